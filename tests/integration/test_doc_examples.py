"""Every example request in docs/ for the local service runs as written and answers as shown.

Each marked example (`<!-- example: STATUS -->`, the convention in tests/doc_examples.py) runs with bash and
curl against one `retrieval serve` on a fresh database with the sample corpus (shared with
test_readme_examples.py), page by page, in a working directory holding the files the examples upload
(`travel.md`, `travel.pdf`). Each page deletes the stores it created, so pages do not depend on each other.
A server without API keys ignores the `x-api-key` header docs/documents-api.md sends.

A `curl` block of README.md or docs/ that targets the local service (`127.0.0.1:8000`, `localhost:8000`, or
`$API` as docs/documents-api.md defines it) is either marked or listed in NOT_RUN with its reason, so no
local example goes stale unchecked.

docs/security.md's `retrieval make-api-key` example runs too (its key is random, so it has a test of its
own): the entry printed has the shape and values shown, and the SHA-256 of the key printed.

Not executed, and why:
- docs/existing-tables.md's attach requests: they need the reader's own table (NOT_RUN); the same
  definitions run against real tables in test_attached_stores.py and test_attached_presets.py.
- docs/loading-documents.md, the `retrieval` command block: it syncs from `s3://my-bucket` (needs S3),
  evaluates a BEIR set the reader brings (`corpus.jsonl`, `queries.jsonl`, `qrels/test.tsv`), and
  mixes several commands with no answer shown. The commands themselves are exercised by
  tests/integration/test_cli_sync.py and test_eval_cli.py.
- docs/deploy.md, docs/migrations.md, docs/s3-sync.md, docs/operations.md: `sam`, `aws`, `make deploy`
  and `retrieval migrate` against a deployed stack's database, which need AWS.
- JSON shown without a request (docs/api.md's health answer, docs/operations.md's rate-limit and queue
  messages, docs/gemini.md's Gemini File Search bodies): no request to run; the README runs health and
  knowledge search.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_examples import (
    PYTHONPATH,
    REPO,
    ServedApp,
    local_curl_blocks,
    page_examples,
    run_examples,
    shape_problems,
)
from tests.files import markdown_bytes, pdf_bytes

PAGES = sorted(REPO.glob("docs/*.md"))
RUNNABLE = [page for page in PAGES if page_examples(page)]
# Local requests not run, each with its reason: (page, a fragment of the block) -> reason.
NOT_RUN: dict[tuple[str, str], str] = {
    # Both attach a table the served app's database does not have (public.items, a view); the
    # same definitions and searches run against real tables in test_attached_stores.py and
    # test_attached_presets.py.
    ("docs/existing-tables.md", '"$API/stores/items"'): "needs the user's table public.items",
    (
        "docs/existing-tables.md",
        '"$API/stores/shared"',
    ): "needs the documents, chunks and embeddings tables behind shared.rag_chunks",
}
# docs/security.md's block: the command, the key printed, the entry printed.
MAKE_API_KEY = re.compile(r"```console\n\$ (?P<command>retrieval make-api-key .*)\n.*\n(?P<entry>\{.*\})\n")

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the docs' examples use curl")


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """The current directory of the examples, with the files they upload."""
    (tmp_path / "travel.md").write_bytes(
        markdown_bytes("# Travel policy\n\nBook flights through the travel desk at least 14 days ahead.\n")
    )
    (tmp_path / "travel.pdf").write_bytes(
        pdf_bytes(["Travel policy\nEconomy class for flights under six hours."], title="Travel policy")
    )
    return tmp_path


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda page: page.name)
def test_every_example_of_the_page_answers_as_shown(page: Path, served_app: ServedApp, workdir: Path) -> None:
    if page.name == "mcp.md" and importlib.util.find_spec("mcp") is None:
        pytest.skip("/mcp is served only with the mcp extra (make check-min-deps runs without it)")
    run_examples(page_examples(page), served_app.address, workdir)


def test_the_local_examples_are_all_run_or_listed_with_a_reason() -> None:
    unmarked = []
    listed = set()
    for page in [REPO / "README.md", *PAGES]:
        name = page.relative_to(REPO).as_posix()
        for line, code, marked in local_curl_blocks(page):
            reasons = [key for key in NOT_RUN if key[0] == name and key[1] in code]
            listed.update(reasons)
            if not marked and not reasons:
                unmarked.append(f"{name}:{line}: {code.splitlines()[0]}")
    assert unmarked == [], "mark these `<!-- example: STATUS -->`, or list them in NOT_RUN with the reason"
    assert listed == set(NOT_RUN), f"NOT_RUN lists blocks that are no longer there: {set(NOT_RUN) - listed}"


def test_the_pages_with_local_requests_have_runnable_examples() -> None:
    names = {page.name for page in RUNNABLE}
    assert {"api.md", "documents-api.md", "loading-documents.md"} <= names, names


def test_the_make_api_key_example_prints_a_key_and_the_entry_shown() -> None:
    shown = MAKE_API_KEY.search((REPO / "docs" / "security.md").read_text("utf-8"))
    assert shown is not None, "docs/security.md no longer shows `retrieval make-api-key` and its output"
    arguments = shlex.split(shown["command"])[1:]
    run = subprocess.run(
        [sys.executable, "-m", "retrieval_core.cli.main", *arguments],
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    key, entry_line = run.stdout.splitlines()
    assert key.startswith("rk_"), key
    entry, shown_entry = json.loads(entry_line), json.loads(shown["entry"])
    assert shape_problems(shown_entry, entry) == []
    assert entry["sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert entry | {"sha256": shown_entry["sha256"]} == shown_entry  # the name, stores and scopes asked for
