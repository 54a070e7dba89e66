"""bench/answers.py writes its block of docs/quality.md between its markers, each a line of its own: the
page's prose may name the markers, and the rest of the page is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import answers

PAGE = """# Retrieval quality

The block between `<!-- answers:start -->` and `<!-- answers:end -->` is written by the bench.

<!-- eval:scifact:start -->
scifact table
<!-- eval:scifact:end -->
"""


def test_the_block_is_added_once_at_the_end_then_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "quality.md"
    page.write_text(PAGE + "\n## Written by hand\n\nKept.\n")
    monkeypatch.setattr(answers, "OUT", page)

    answers.write_block("## Grounded answers\n\nfirst run")
    first = page.read_text()
    assert first.endswith(
        "Kept.\n\n<!-- answers:start -->\n## Grounded answers\n\nfirst run\n<!-- answers:end -->\n"
    )

    page.write_text(first + "\n### What the figures show\n\nBy hand.\n")
    answers.write_block("## Grounded answers\n\nsecond run")
    second = page.read_text()
    assert "first run" not in second and second.count("second run") == 1
    assert second.startswith(PAGE)
    assert second.endswith("second run\n<!-- answers:end -->\n\n### What the figures show\n\nBy hand.\n")
