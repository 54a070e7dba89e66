from __future__ import annotations

from retrieval_core.db.scored_chunk import ScoredChunk, similarity_from_distance
from retrieval_core.search.ranking import apply_threshold, at_least


def chunk(doc: str, index: int, score: float) -> ScoredChunk:
    return ScoredChunk(document_id=doc, chunk_index=index, content=f"{doc}-{index}", score=score)


def test_similarity_is_one_minus_cosine_distance() -> None:
    assert similarity_from_distance(0.0) == 1.0
    assert similarity_from_distance(0.25) == 0.75
    assert similarity_from_distance(2.0) == -1.0


def test_threshold_keeps_scores_at_or_above_grade_in_the_given_order() -> None:
    # The order is the engine's (similarity, fused or reranked), so the threshold must not re-sort.
    kept = apply_threshold([chunk("a", 0, 0.7), chunk("b", 0, 0.69999), chunk("c", 0, 0.9)], grade=0.7)
    assert [c.document_id for c in kept] == ["a", "c"]


def test_threshold_nothing_meets_is_empty_not_error() -> None:
    assert apply_threshold([chunk("a", 0, 0.4)], grade=0.95) == []


def test_chunk_id_is_document_id_plus_index() -> None:
    assert chunk("doc-1", 3, 0.1).chunk_id == "doc-1#3"


def test_at_least_keeps_chunks_whose_own_score_reaches_the_minimum_whatever_their_similarity() -> None:
    low_similarity, high_similarity = chunk("a", 0, 0.1), chunk("b", 0, 0.9)
    fused = {("a", 0): 1.0, ("b", 0): 0.49}
    assert at_least([high_similarity, low_similarity], fused, 0.5) == [low_similarity]
    assert at_least([high_similarity, low_similarity], fused, 0.49) == [high_similarity, low_similarity]
