"""How a chunk or a packed context is judged to hold an answer inside a long document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_core.evaluation.evidence import Matcher, evidence_of, first_hit, read_judgments

SPAN = {
    "qid": "1",
    "document": "630.txt",
    "start": 10,
    "end": 60,
    "answer": "Mother-to-child  transmission\nis ",
}
SECTION_TEXT = (
    "# Installing Ansible plug-ins\n\nAnsible plug-ins for Red Hat Developer Hub deliver an Ansible-specific "
    "portal experience with curated learning paths, push-button content creation and integrated tools."
)
SECTION = {
    "qid": "2",
    "documents": ["plugins-configure.md", "plugins-using.md"],
    "context": SECTION_TEXT,
    "answer": "Ansible plug-ins deliver an Ansible-specific portal experience with curated learning paths.",
}


def test_a_span_is_held_by_any_chunk_with_its_text_whatever_the_whitespace() -> None:
    matcher = Matcher(evidence_of(SPAN))
    assert matcher.chunk_holds("other.txt", "... said that Mother-to-child transmission is the main cause.")
    assert not matcher.chunk_holds("630.txt", "Mother-to-child transmission was the main cause.")
    assert matcher.context_holds("[1] Source: 630.txt\nMother-to-child\ttransmission is the cause")


def test_a_section_is_held_by_twelve_shared_words_within_a_judged_document() -> None:
    matcher = Matcher(evidence_of(SECTION))
    chunk = (
        "Intro. Ansible plug-ins for **Red Hat** Developer Hub deliver an Ansible-specific portal, and more."
    )
    assert matcher.chunk_holds("plugins-using.md", chunk)  # 12 words once Markdown marks are dropped
    assert not matcher.chunk_holds("about.md", chunk)  # the same words in a manual not judged
    assert not matcher.chunk_holds("plugins-using.md", "Ansible plug-ins for Red Hat Developer Hub deliver")


def test_a_context_holds_a_section_answer_with_four_fifths_of_its_content_words() -> None:
    matcher = Matcher(evidence_of(SECTION))
    # Content words: ansible, plug, ins, deliver, specific, portal, experience, curated, learning, paths.
    assert matcher.context_holds("Ansible plug-ins: a specific portal experience, curated learning paths.")
    assert not matcher.context_holds("Ansible plug-ins deliver a portal.")


def test_first_hit_is_the_rank_of_the_first_chunk_holding_the_evidence() -> None:
    matcher = Matcher(evidence_of(SPAN))
    chunks = [("a.txt", "nothing"), ("630.txt", "Mother-to-child transmission is"), ("b", "again")]
    assert first_hit(matcher, chunks) == 2
    assert first_hit(matcher, chunks[:1]) is None


def test_judgments_of_both_kinds_are_read_and_a_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "judgments.jsonl"
    path.write_text(json.dumps(SPAN) + "\n\n" + json.dumps(SECTION) + "\n")
    judged = read_judgments(path)
    assert judged["1"].span == (10, 60) and judged["1"].documents == ("630.txt",)
    assert judged["2"].section == SECTION_TEXT and len(judged["2"].documents) == 2
    path.write_text(json.dumps(SPAN) + "\n" + json.dumps({"qid": "3", "answer": "x"}) + "\n")
    with pytest.raises(ValueError, match="line 2: not a span or section judgment"):
        read_judgments(path)
