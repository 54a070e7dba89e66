from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.search.fusion import (
    fuse,
    max_scaled,
    min_max,
    ordered,
    reciprocal_rank_fusion,
    unit_reciprocal_rank_fusion,
    weighted_fusion,
)

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


def test_unit_rrf_is_one_for_first_in_both_lists_and_a_half_for_first_in_one() -> None:
    scores = unit_reciprocal_rank_fusion([[A, B], [A, C]])
    assert scores[A] == 1.0  # exactly: a caller may ask for minFusedScore 1
    assert scores[B] == pytest.approx(scores[C]) == pytest.approx((61 / 62) / 2)
    assert unit_reciprocal_rank_fusion([[A], []])[A] == 0.5


def test_unit_rrf_is_rrf_divided_by_its_maximum_and_keeps_its_order() -> None:
    rankings = [[A, B, C], [C, A]]
    for k in (1, 60, 1000):
        raw, unit = reciprocal_rank_fusion(rankings, k), unit_reciprocal_rank_fusion(rankings, k)
        assert unit == {key: pytest.approx(raw[key] / (2 / (k + 1))) for key in raw}
        assert ordered(unit) == ordered(raw)


def test_a_smaller_k_lets_the_first_ranks_count_more() -> None:
    # A is first in one list and ninth in the other, B third in both: k = 1 prefers A, k = 60 B.
    filler = [("x", i) for i in range(8)]
    rankings = [[A, filler[0], B], [filler[1], filler[2], B, *filler[3:], A]]
    assert ordered(unit_reciprocal_rank_fusion(rankings, 1))[0] == A
    assert ordered(unit_reciprocal_rank_fusion(rankings, 60))[0] == B


def test_max_scaling_divides_by_the_best_and_counts_negatives_as_zero() -> None:
    assert max_scaled({A: 2.0, B: 1.0, C: -0.5}) == {A: 1.0, B: 0.5, C: 0.0}
    assert max_scaled({A: 0.0, B: -1.0}) == {A: 0.0, B: 0.0}
    assert max_scaled({}) == {}


def test_max_scaling_does_not_depend_on_the_weakest_candidate() -> None:
    # Min-max moves every score when a poorer candidate joins; max scaling does not.
    assert min_max({A: 0.8, B: 0.6})[B] == 0.0
    assert min_max({A: 0.8, B: 0.6, C: 0.2})[B] == pytest.approx(2 / 3)
    assert max_scaled({A: 0.8, B: 0.6})[B] == max_scaled({A: 0.8, B: 0.6, C: 0.2})[B] == pytest.approx(0.75)


def test_weights_are_relative_so_their_sum_does_not_change_the_scores() -> None:
    vector, keyword = {A: 0.9, B: 0.5, C: 0.1}, {A: 0.0, B: 12.0, C: 3.0}
    assert weighted_fusion(vector, keyword, 1.0, 1.0) == pytest.approx(
        weighted_fusion(vector, keyword, 0.5, 0.5)
    )
    assert weighted_fusion(vector, keyword, 0.2, 0.1) == pytest.approx(
        weighted_fusion(vector, keyword, 0.6, 0.3)
    )
    # Best on both sides scores exactly 1.
    assert weighted_fusion({A: 0.9, B: 0.1}, {A: 7.5, B: 0.0}, 0.7, 0.3)[A] == 1.0


def test_weighted_fusion_refuses_two_zero_weights() -> None:
    with pytest.raises(ValueError, match="both be 0"):
        weighted_fusion({A: 0.5}, {A: 1.0}, 0.0, 0.0)


def test_max_normalisation_scores_a_keyword_side_of_any_scale() -> None:
    # BM25 is unbounded above: the keyword side is divided by its best score.
    fused = weighted_fusion({A: 0.8, B: 0.4}, {A: 0.0, B: 25.0}, 0.5, 0.5, "max")
    assert fused == {A: pytest.approx(0.5), B: pytest.approx(0.5 * 0.5 + 0.5)}


def chunk(name: str, score: float, keyword: float | None, vector_hit: bool = True) -> ScoredChunk:
    return ScoredChunk(name, 0, name, score, keyword_score=keyword, vector_hit=vector_hit)


CANDIDATES = [
    chunk("a", 0.9, None),
    chunk("b", 0.8, 30.0),
    chunk("c", 0.5, 2.0),
    chunk("d", 0.2, 45.0, vector_hit=False),
]


def test_fuse_passes_k_and_normalisation_through() -> None:
    rrf_60 = fuse(CANDIDATES, "rrf", 0.7, 0.3)
    assert rrf_60 == fuse(CANDIDATES, "rrf", 0.7, 0.3, rrf_k=60)
    assert rrf_60 != fuse(CANDIDATES, "rrf", 0.7, 0.3, rrf_k=1)
    # b: second by vector, second by keyword (d's 45 is first).
    assert rrf_60[("b", 0)] == pytest.approx((61 / 62 + 61 / 62) / 2)
    minmax = fuse(CANDIDATES, "weighted", 0.5, 0.5)
    by_max = fuse(CANDIDATES, "weighted", 0.5, 0.5, normalization="max")
    assert minmax[("a", 0)] == pytest.approx(0.5) and by_max[("a", 0)] == pytest.approx(0.5)
    assert minmax[("d", 0)] == pytest.approx(0.5) and by_max[("d", 0)] == pytest.approx((0.2 / 0.9 + 1) / 2)


@pytest.mark.parametrize(
    ("fusion", "normalization"), [("rrf", "minmax"), ("weighted", "minmax"), ("weighted", "max")]
)
@given(
    st.lists(
        st.tuples(st.floats(-1, 1), st.one_of(st.none(), st.floats(0, 1e6)), st.booleans()),
        min_size=1,
        max_size=30,
    ),
    st.floats(0, 1),
    st.floats(0.001, 1),
    st.integers(1, 1000),
)
def test_every_fused_score_is_between_0_and_1(
    fusion: str,
    normalization: str,
    rows: list[tuple[float, float | None, bool]],
    vector_weight: float,
    keyword_weight: float,
    k: int,
) -> None:
    candidates = [
        ScoredChunk(f"d{i}", 0, "", s, keyword_score=w, vector_hit=v) for i, (s, w, v) in enumerate(rows)
    ]
    fused = fuse(candidates, fusion, vector_weight, keyword_weight, rrf_k=k, normalization=normalization)  # type: ignore[arg-type]
    assert set(fused) == {c.key for c in candidates}
    assert all(0.0 <= score <= 1.0 + 1e-12 for score in fused.values())
