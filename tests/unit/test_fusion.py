from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_core.fusion import min_max, ordered, reciprocal_rank_fusion, weighted_fusion

A, B, C = ("a", 0), ("b", 0), ("c", 0)


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    scores = reciprocal_rank_fusion([[A, B], [B, C]])
    assert scores[A] == pytest.approx(1 / 61)
    assert scores[B] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[C] == pytest.approx(1 / 62)
    assert ordered(scores) == [B, A, C]


def test_rrf_ignores_raw_scores_so_scales_need_not_match() -> None:
    # Only positions count: a chunk first in both lists wins however its raw scores compare.
    assert ordered(reciprocal_rank_fusion([[A, B, C], [A, C, B]]))[0] == A


def test_min_max_scales_to_unit_interval_and_equal_scores_are_all_best() -> None:
    assert min_max({A: 2.0, B: 4.0, C: 3.0}) == {A: 0.0, B: 1.0, C: 0.5}
    assert min_max({A: 0.3, B: 0.3}) == {A: 1.0, B: 1.0}
    assert min_max({}) == {}


def test_weighted_fusion_normalises_each_signal_before_weighting() -> None:
    # Similarities near 0.8 and ts_rank scores near 0.1 are on different scales; weights apply after scaling.
    fused = weighted_fusion({A: 0.80, B: 0.70, C: 0.60}, {A: 0.0, B: 0.1, C: 0.2}, 0.5, 0.5)
    assert fused[A] == pytest.approx(0.5)  # best vector, no keyword match
    assert fused[B] == pytest.approx(0.5 * 0.5 + 0.5 * 0.5)  # middle of both
    assert fused[C] == pytest.approx(0.5)  # worst vector, best keyword


def test_weighted_fusion_without_any_keyword_match_is_the_vector_order() -> None:
    fused = weighted_fusion({A: 0.9, B: 0.5}, {A: 0.0, B: 0.0}, 0.7, 0.3)
    assert fused == {A: pytest.approx(0.7), B: pytest.approx(0.0)}


def test_weighted_fusion_all_weight_on_one_side_keeps_that_order() -> None:
    vector, keyword = {A: 0.9, B: 0.5, C: 0.1}, {A: 0.0, B: 0.3, C: 0.2}
    assert ordered(weighted_fusion(vector, keyword, 1.0, 0.0)) == [A, B, C]
    assert ordered(weighted_fusion(vector, keyword, 0.0, 1.0)) == [B, C, A]


def test_ties_break_by_document_then_chunk_index() -> None:
    assert ordered({("b", 0): 1.0, ("a", 2): 1.0, ("a", 1): 1.0}) == [("a", 1), ("a", 2), ("b", 0)]


keys = st.tuples(st.sampled_from("abcdef"), st.integers(0, 3))


@given(st.dictionaries(keys, st.floats(-1, 1)), st.dictionaries(keys, st.floats(0, 1)), st.floats(0, 1))
def test_weighted_fusion_scores_stay_within_the_weights(
    vector: dict[tuple[str, int], float], keyword: dict[tuple[str, int], float], weight: float
) -> None:
    fused = weighted_fusion(vector, keyword, weight, 1 - weight)
    assert set(fused) == set(vector) | set(keyword)
    assert all(-1e-9 <= score <= 1 + 1e-9 for score in fused.values())
