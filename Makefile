# One command each: `make serve` runs the service, `make test` runs the suite.
# Both install what they need into .venv on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export PYTHONDONTWRITEBYTECODE := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export SAM_CLI_TELEMETRY := 0
export AWS_DEFAULT_REGION ?= us-east-1

.PHONY: serve test lint typecheck unit integration bench eval clean install-local install-dev

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch is pinned and installed first: the CPU wheel of 2.13.0 lies on these machines,
# while an unpinned torch would pull a CUDA build of several GB.
$(VENV)/.local-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[local]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(VENV)/.local-installed
	$(BIN)/pip install -q -e '.[local,dev]'
	touch $@

install-local: $(VENV)/.local-installed
install-dev: $(VENV)/.dev-installed

serve: $(VENV)/.local-installed
	$(BIN)/retrieval serve --host 127.0.0.1 --port 8000

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check layers functions tests bench
	$(BIN)/ruff format --check layers functions tests bench

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q

bench: $(VENV)/.dev-installed
	$(BIN)/python -m bench.core $(ARGS)

clean:
	rm -rf $(VENV) .data .aws-sam
