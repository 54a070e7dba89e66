"""Maximal marginal relevance on hand-checkable vectors, and its invariants under hypothesis."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_core.rerank.mmr import maximal_marginal_relevance


def _cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


QUERY = [1.0, 0.0]
# A query halfway between two topics: candidate 0 is on topic A, 1 is a near-copy of 0, 2 is on topic B.
# Relevance (cosine to the query) is 0.7071, 0.7068 and 0.7036; cos(0, 1) = 0.9996, cos(0, 2) = 0.
BETWEEN_TOPICS = [1.0, 1.0, 0.0]
NEAR_COPIES = [
    [1.0, 0.0, 0.0],
    [1.0, 0.0, 0.03],
    [0.0, 1.0, 0.1],
]


def test_diversity_is_chosen_over_a_near_duplicate() -> None:
    # Second pick: 0.7 * 0.7068 - 0.3 * 0.9996 = 0.195 for the copy, 0.7 * 0.7036 - 0 = 0.493 for topic B.
    assert maximal_marginal_relevance(BETWEEN_TOPICS, NEAR_COPIES, k=2, lambda_=0.7) == [0, 2]


def test_lambda_one_is_the_relevance_order() -> None:
    assert maximal_marginal_relevance(BETWEEN_TOPICS, NEAR_COPIES, k=3, lambda_=1.0) == [0, 1, 2]


def test_the_default_lambda_is_0_7() -> None:
    candidates = [[1.0, 0.0], [0.99, 0.14], [0.8, 0.6]]
    # Second pick with 0.7: 0.7 * 0.990 - 0.3 * 0.990 = 0.396 beats 0.7 * 0.8 - 0.3 * 0.8 = 0.32;
    # with 0.3 the order flips (-0.396 against -0.32).
    assert maximal_marginal_relevance(QUERY, candidates, k=2) == [0, 1]
    assert maximal_marginal_relevance(QUERY, candidates, k=2, lambda_=0.3) == [0, 2]


def test_lambda_zero_picks_the_least_similar_after_the_most_relevant() -> None:
    candidates = [[1.0, 0.0], [0.0, 1.0], [0.7, 0.7], [-1.0, 0.1]]

    # First the most relevant; then whatever is least like the selection, however irrelevant.
    assert maximal_marginal_relevance(QUERY, candidates, k=4, lambda_=0.0) == [0, 3, 1, 2]


def test_exact_duplicates_are_skipped_while_something_else_is_left() -> None:
    candidates = [[1.0, 0.1], [1.0, 0.1], [1.0, 0.1], [0.2, 1.0]]

    # Second pick: 0.3 * 0.995 - 0.7 * 1 = -0.40 for a copy, 0.3 * 0.196 - 0.7 * 0.293 = -0.15 for 3.
    assert maximal_marginal_relevance(QUERY, candidates, k=2, lambda_=0.3) == [0, 3]
    assert maximal_marginal_relevance(QUERY, candidates, k=4, lambda_=0.3) == [0, 3, 1, 2]


def test_k_larger_than_the_candidates_returns_them_all() -> None:
    assert maximal_marginal_relevance(BETWEEN_TOPICS, NEAR_COPIES, k=10) == [0, 2, 1]


@pytest.mark.parametrize("k", [0, -1])
def test_k_zero_or_less_returns_nothing(k: int) -> None:
    assert maximal_marginal_relevance(BETWEEN_TOPICS, NEAR_COPIES, k=k) == []


def test_no_candidates_returns_nothing() -> None:
    assert maximal_marginal_relevance(QUERY, [], k=3) == []


def test_zero_vectors_have_no_relevance_and_no_similarity() -> None:
    candidates = [[0.0, 0.0], [0.5, 0.5], [0.0, 0.0]]

    assert maximal_marginal_relevance(QUERY, candidates, k=3, lambda_=1.0) == [1, 0, 2]
    assert maximal_marginal_relevance([0.0, 0.0], candidates, k=3, lambda_=1.0) == [0, 1, 2]


@pytest.mark.parametrize("lambda_", [-0.1, 1.5, math.nan])
def test_lambda_outside_0_1_is_refused(lambda_: float) -> None:
    with pytest.raises(ValueError, match="lambda_"):
        maximal_marginal_relevance(BETWEEN_TOPICS, NEAR_COPIES, k=2, lambda_=lambda_)


@pytest.mark.parametrize(
    ("query", "candidates"),
    [(QUERY, NEAR_COPIES), (QUERY, [[1.0, 0.0], [1.0]]), (QUERY, [[math.nan, 0.0]])],
)
def test_mismatched_or_non_finite_vectors_are_refused(
    query: list[float], candidates: list[list[float]]
) -> None:
    with pytest.raises(ValueError):
        maximal_marginal_relevance(query, candidates, k=2)


_values = st.floats(min_value=-10, max_value=10, allow_nan=False).map(lambda v: 0.0 if abs(v) < 1e-3 else v)


@st.composite
def _problems(draw: st.DrawFn) -> tuple[list[float], list[list[float]], int, float]:
    dimension = draw(st.integers(min_value=1, max_value=6))
    vector = st.lists(_values, min_size=dimension, max_size=dimension)
    query = draw(vector)
    candidates = draw(st.lists(vector, max_size=20))
    k = draw(st.integers(min_value=0, max_value=25))
    lambda_ = draw(st.floats(min_value=0, max_value=1))
    return query, candidates, k, lambda_


@given(_problems())
def test_selection_is_distinct_indices_of_length_min_k_n(
    problem: tuple[list[float], list[list[float]], int, float],
) -> None:
    query, candidates, k, lambda_ = problem

    selected = maximal_marginal_relevance(query, candidates, k, lambda_)

    assert len(selected) == min(k, len(candidates))
    assert len(set(selected)) == len(selected)
    assert all(0 <= index < len(candidates) for index in selected)


@given(_problems())
def test_first_pick_is_most_relevant_and_lambda_one_never_rises(
    problem: tuple[list[float], list[list[float]], int, float],
) -> None:
    query, candidates, k, lambda_ = problem
    relevance = [_cosine(c, query) for c in candidates]

    selected = maximal_marginal_relevance(query, candidates, k, 1.0)
    first = maximal_marginal_relevance(query, candidates, 1, lambda_)

    picked = [relevance[i] for i in selected]
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(picked))
    if candidates and k > 0:
        assert relevance[first[0]] >= max(relevance) - 1e-9
        # A prefix: asking for fewer gives the start of the longer selection.
        assert maximal_marginal_relevance(query, candidates, k, lambda_)[:1] == first
