from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval_core.documents.chunking import chunk_spans, chunk_text


def test_short_text_is_one_chunk() -> None:
    assert chunk_text("  Hello world.  ", max_chars=100, overlap=10) == ["Hello world."]


def test_empty_text_has_no_chunks() -> None:
    assert chunk_text(" \n\t ", max_chars=100, overlap=10) == []


def test_chunks_respect_max_size_and_prefer_sentence_ends() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    chunks = chunk_text(text, max_chars=120, overlap=30)
    assert len(chunks) > 5
    assert all(len(c) <= 120 for c in chunks)
    assert all(c.endswith(".") for c in chunks[:-1])


def test_consecutive_chunks_overlap() -> None:
    words = " ".join(f"w{i}" for i in range(300))
    chunks = chunk_text(words, max_chars=100, overlap=40)
    for left, right in itertools.pairwise(chunks):
        assert right.split()[0] in left.split()


def test_no_chunk_starts_mid_word_when_overlapping() -> None:
    words = " ".join(f"token{i}" for i in range(200))
    for chunk in chunk_text(words, max_chars=90, overlap=25):
        assert chunk.split()[0].startswith("token")


def test_paragraph_breaks_win_over_sentences() -> None:
    text = "First paragraph sentence one. Sentence two.\n\nSecond paragraph " + "x " * 40
    chunks = chunk_text(text, max_chars=70, overlap=0)
    assert chunks[0] == "First paragraph sentence one. Sentence two."


def test_multibyte_text_is_never_split_inside_a_character() -> None:
    text = "日本語のテキスト。" * 100 + "🙂" * 300
    chunks = chunk_text(text, max_chars=64, overlap=8)
    spans = chunk_spans(text, max_chars=64, overlap=8)
    # Every chunk is the text itself between two character positions: no character cut, lost or replaced.
    assert chunks == [text[start:end] for start, end in spans]
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(start <= end for (_, end), (start, _) in itertools.pairwise(spans)), "no gap"
    # Sizes count characters, not bytes: 64 emoji (256 bytes in UTF-8) make one chunk.
    assert all(len(chunk) <= 64 for chunk in chunks)
    assert "🙂" * 64 in chunks


@pytest.mark.parametrize(("max_chars", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_invalid_sizes_are_refused(max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", max_chars=max_chars, overlap=overlap)


@settings(max_examples=300, deadline=None)
# Found by this test: the second chunk's leading "\r" was trimmed, so it began where the third did.
@example("0\r" + "0" * 20, 20, 19)
@given(st.text(min_size=0, max_size=3000), st.integers(20, 400), st.integers(0, 19))
def test_chunks_are_in_order_bounded_and_cover_the_text(text: str, max_chars: int, overlap: int) -> None:
    normalised = text.replace("\r\n", "\n")
    spans = chunk_spans(normalised, max_chars, overlap)
    assert chunk_text(text, max_chars, overlap) == [normalised[a:b] for a, b in spans]
    assert bool(spans) == bool(normalised.strip())
    covered = 0
    for (start, end), previous in zip(spans, [(-1, 0), *spans], strict=False):
        assert 0 < end - start <= max_chars
        assert start > previous[0], "chunks come in order"
        assert not normalised[covered:start].strip(), "nothing but whitespace falls between chunks"
        covered = max(covered, end)
    assert not normalised[covered:].strip()


def test_repetitive_text_is_covered() -> None:
    spans = chunk_spans("0" * 30, max_chars=20, overlap=15)
    assert spans[0] == (0, 20) and spans[-1][1] == 30


def test_a_chunk_cut_shorter_than_the_overlap_still_moves_on() -> None:
    # The cut at the space leaves a 12-character chunk; an overlap of 19 would restart before it.
    text = "aaaaaaaaaaa " + "b" * 44
    spans = chunk_spans(text, max_chars=20, overlap=19)
    starts = [start for start, _ in spans]
    assert starts == sorted(set(starts))
    assert spans[0] == (0, 11) and spans[-1][1] == len(text)
