"""Collapsing exact duplicates in a search's candidates (search/duplicates.py), and Gemini's by text."""

from __future__ import annotations

from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.schemas.knowledge import KnowledgeSource
from retrieval_core.search.duplicates import collapse_duplicates, distinct_candidates, first_of_each_text


def chunk(
    document: str,
    index: int = 0,
    content_hash: str | None = None,
    text: str = "",
    *,
    keyword_score: float | None = None,
    vector_hit: bool = True,
    row_id: str | None = None,
) -> ScoredChunk:
    return ScoredChunk(
        document,
        index,
        text or f"{document} {index}",
        0.5,
        keyword_score=keyword_score,
        vector_hit=vector_hit,
        row_id=row_id,
        content_sha256=content_hash,
    )


def keys(chunks: list[ScoredChunk]) -> list[tuple[str, int]]:
    return [c.key for c in chunks]


def test_the_best_ranked_document_of_a_content_keeps_all_its_chunks_and_its_copies_none() -> None:
    found = [
        chunk("b", 0, "h1"),
        chunk("a", 0, "h1"),
        chunk("b", 1, "h1"),
        chunk("c", 0, "h2"),
        chunk("a", 1, "h1"),
    ]
    assert keys(collapse_duplicates(found)) == [("b", 0), ("b", 1), ("c", 0)]


def test_chunks_without_a_hash_are_compared_by_their_text() -> None:
    rows = [
        chunk("r1", -1, None, "same row", row_id="r1"),
        chunk("r2", -1, None, "same row", row_id="r2"),
        chunk("r3", -1, None, "another row", row_id="r3"),
        chunk("r4", -1, None, "", row_id="r4"),
        chunk("r5", -1, None, "", row_id="r5"),
    ]
    # Empty texts say nothing about sameness: both kept.
    assert [c.row_id for c in collapse_duplicates(rows)] == ["r1", "r3", "r4", "r5"]


class Store:
    """A ranked list of chunks searched `n` deep, counting the searches."""

    def __init__(self, chunks: list[ScoredChunk]) -> None:
        self.chunks = chunks
        self.depths: list[int] = []

    def search(self, n: int) -> list[ScoredChunk]:
        self.depths.append(n)
        return self.chunks[:n]


def test_no_duplicates_one_search() -> None:
    store = Store([chunk(d, 0, d) for d in "abcdef"])
    assert keys(distinct_candidates(store.search, 3)) == [("a", 0), ("b", 0), ("c", 0)]
    # A little deeper than asked (a few copies then cost no second search), and cut back.
    assert store.depths == [8]


def test_copies_filling_the_candidates_send_the_search_deeper_until_k_distinct() -> None:
    copies = [chunk(f"copy-{n}", 0, "same") for n in range(10)]
    store = Store([*copies, *(chunk(d, 0, d) for d in "abcdef")])
    assert keys(distinct_candidates(store.search, 3)) == [("copy-0", 0), ("a", 0), ("b", 0)]
    assert store.depths == [8, 12]


def test_a_store_with_fewer_distinct_documents_than_asked_stops_after_one_search() -> None:
    store = Store([chunk("a", 0, "h"), chunk("b", 0, "h")])
    assert keys(distinct_candidates(store.search, 5)) == [("a", 0)]
    assert store.depths == [10]


def test_the_deeper_search_is_bounded() -> None:
    store = Store([*(chunk(f"copy-{n}", 0, "same") for n in range(100)), chunk("z", 0, "z")])
    assert keys(distinct_candidates(store.search, 3)) == [("copy-0", 0)]
    assert store.depths == [8, 12]


def test_a_hybrid_pool_keeps_the_k_nearest_and_the_k_best_keyword_hits_marked_as_such() -> None:
    """A pool searched deeper than asked, cut back to what a search of k gives: a chunk kept for one list
    no longer counts in the other (fusion ranks each list)."""
    pool = [
        chunk("a", 0, "h", keyword_score=0.9),
        chunk("b", 0, "h", keyword_score=0.9),
        chunk("c", 0, "c", keyword_score=0.05),
        chunk("d", 0, "d", keyword_score=0.1, vector_hit=False),
        chunk("e", 0, "e"),
        chunk("f", 0, "f", keyword_score=0.5),
    ]
    kept = distinct_candidates(lambda n: pool, 2)
    assert [(c.key[0], c.vector_hit, c.keyword_score) for c in kept] == [
        ("a", True, 0.9),
        ("c", True, None),
        ("f", False, 0.5),
    ]


def test_gemini_sources_with_the_same_text_appear_once() -> None:
    sources = [
        KnowledgeSource(document_id="d1", chunk="Same text.", score=0.9),
        KnowledgeSource(document_id="d2", chunk="Same text.", score=0.8),
        KnowledgeSource(document_id="d3", chunk="Other text.", score=0.7),
        KnowledgeSource(document_id="d4", chunk=None),
        KnowledgeSource(document_id="d5", chunk=None),
    ]
    assert [s.document_id for s in first_of_each_text(sources, lambda s: s.chunk)] == ["d1", "d3", "d4", "d5"]
