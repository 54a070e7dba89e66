"""Every example request of the README runs as written and answers as shown.

The README marks each example with `<!-- example: STATUS -->` before its ```bash block, the answer shown
in the ```json block after it (tests/doc_examples.py has the convention). This test runs every block with
bash and curl, in README order, against `retrieval serve` started the way `make serve` does (a fresh
embedded PostgreSQL, the sample corpus), and compares each answer's status and shape with the one shown.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.doc_examples import REPO, ServedApp, page_examples, run_examples

README = REPO / "README.md"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the README's examples use curl")


def test_the_readme_shows_an_example_of_every_endpoint() -> None:
    commands = "\n".join(example.command for example in page_examples(README))
    for route in (
        "/api/v1/health",
        "/api/v1/rag/retrieve ",
        "/api/v1/rag/retrieve/batch",
        "/api/v1/chunks/similarity-search",
        "/api/v1/knowledge/search",
        "/api/v1/stores/resolve",
        "/api/v1/stores ",
        "/api/v1/stores/team-notes/documents ",
    ):
        assert route.strip() in commands, route
    for method in ("-X PUT", "-X DELETE"):
        assert method in commands


def test_every_readme_example_answers_as_shown(served_app: ServedApp, tmp_path: Path) -> None:
    examples = page_examples(README)
    assert len(examples) >= 12
    run_examples(examples, served_app.address, tmp_path)


def test_serve_starts_with_a_few_plain_lines(served_app: ServedApp) -> None:
    # A newcomer's first screen: where the database runs, the migrations, the sample corpus, the address;
    # not every pg_ctl command of the embedded server with initdb's output, nor a platform warning.
    startup = served_app.log.read_text().split("Uvicorn running on")[0]
    for noise in ("Running commandline", "initdb", "Warning", "Traceback"):
        assert noise not in startup, startup
    assert len(startup.splitlines()) <= 10, startup
