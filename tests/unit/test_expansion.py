"""Neighbour expansion: a matched chunk joined with the chunks beside it in its block."""

from __future__ import annotations

from retrieval_core.documents.chunking import chunk_text
from retrieval_core.search.expansion import Neighbour, window

TEXT = " ".join(
    f"Sentence {i} of the section about restoring backups from the nightly snapshot." for i in range(40)
)
SECTION = {"section": "Ops > Restoring"}


def chunks_of(text: str, size: int, overlap: int, metadata: dict[str, object]) -> list[Neighbour]:
    return [Neighbour(i, piece, metadata) for i, piece in enumerate(chunk_text(text, size, overlap))]


def test_a_window_joins_its_neighbours_with_each_overlap_once() -> None:
    chunks = chunks_of(TEXT, 300, 60, SECTION)
    matched = chunks[4]
    joined = window(matched, chunks, before=1, after=1, max_overlap=120)
    assert (joined.first, joined.last) == (3, 5)
    assert joined.text[joined.match_start : joined.match_end] == matched.content
    # The joined text is the document's own text from the first chunk's start to the last one's end.
    start = TEXT.index(chunks[3].content)
    assert TEXT[start : start + len(joined.text)] == joined.text


def test_a_window_stops_at_the_documents_ends_and_at_another_block() -> None:
    chunks = chunks_of(TEXT, 300, 60, SECTION)
    assert (window(chunks[0], chunks, 2, 1, 120).first, window(chunks[0], chunks, 2, 1, 120).last) == (0, 1)
    other_page = [
        Neighbour(n.index, n.content, {"section": "Ops > Retention"}) if n.index == 5 else n for n in chunks
    ]
    joined = window(chunks[4], other_page, before=0, after=3, max_overlap=120)
    assert (joined.first, joined.last) == (4, 4) and joined.text == chunks[4].content


def test_chunks_without_overlap_are_joined_on_a_new_line() -> None:
    chunks = [Neighbour(0, "First part.", {}), Neighbour(1, "Second part.", {})]
    joined = window(chunks[1], chunks, before=1, after=0, max_overlap=0)
    assert joined.text == "First part.\nSecond part."
    assert joined.text[joined.match_start : joined.match_end] == "Second part."
