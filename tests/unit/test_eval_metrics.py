"""The evaluation's metrics and paired bootstrap, checked against values computed by hand."""

from __future__ import annotations

import math

import pytest

from retrieval_core.evaluation.beir import read_qrels
from retrieval_core.evaluation.ranking_metrics import (
    documents_of,
    interval_of,
    ndcg_at,
    paired_bootstrap,
    percentile,
    recall_at,
)
from retrieval_core.evaluation.runner import judged_queries


def test_ndcg_uses_exponential_gains_and_the_ideal_order_of_every_judgment() -> None:
    judged = {"a": 2, "b": 1, "c": 0}
    # DCG of b, x, a: 1/log2(2) + 0 + 3/log2(4) = 2.5; ideal a, b: 3 + 1/log2(3).
    assert ndcg_at(["b", "x", "a"], judged) == pytest.approx(2.5 / (3 + 1 / math.log2(3)))
    assert ndcg_at(["a", "b"], judged) == pytest.approx(1.0)
    assert ndcg_at(["c", "x"], judged) == 0.0


def test_ndcg_counts_only_the_top_k() -> None:
    assert ndcg_at(["x", "a"], {"a": 1}, k=1) == 0.0
    assert ndcg_at(["x", "a"], {"a": 1}, k=2) == pytest.approx(1 / math.log2(3))


def test_recall_counts_grade_one_and_above_within_k() -> None:
    judged = {"a": 1, "b": 2, "c": 0}
    assert recall_at(["a", "c", "b"], judged, k=2) == 0.5
    assert recall_at(["a", "c", "b"], judged, k=3) == 1.0


def test_a_document_ranks_by_its_best_chunk() -> None:
    assert documents_of(["d2", "d1", "d2", "d3", "d1"]) == ["d2", "d1", "d3"]


def test_percentile_interpolates_between_order_statistics() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 0.5) == 2.5  # position 1.5 between 2 and 3
    assert percentile(values, 0.9) == pytest.approx(3.7)  # position 2.7 between 3 and 4
    assert percentile(values, 1.0) == 4.0


def test_interval_of_given_resamples_matches_the_hand_computation() -> None:
    differences = [0.1, 0.3, 0.5]
    draws = [[0, 0, 0], [0, 1, 2], [2, 2, 1], [1, 1, 1], [2, 2, 2]]
    # Means of the draws: 0.1, 0.3, 0.4333, 0.3, 0.5 -> sorted 0.1, 0.3, 0.3, 0.4333, 0.5.
    # 50% interval: quantiles 0.25 and 0.75 -> positions 1 and 3 -> 0.3 and 0.4333.
    found = interval_of(differences, draws, level=0.5)
    assert found.mean == pytest.approx(0.3)
    assert found.low == pytest.approx(0.3)
    assert found.high == pytest.approx(1.3 / 3)
    assert found.significant
    # 100%: the smallest and largest mean.
    whole = interval_of(differences, draws, level=1.0)
    assert (whole.low, whole.high) == (pytest.approx(0.1), pytest.approx(0.5))


def test_paired_bootstrap_is_paired_reproducible_and_near_the_normal_interval() -> None:
    baseline = [0.1 * (i % 7) for i in range(400)]
    # Differences alternate 0 and 0.2: mean 0.1, standard error 0.1 / sqrt(400) = 0.005.
    scores = [b + (0.2 if i % 2 else 0.0) for i, b in enumerate(baseline)]
    found = paired_bootstrap(scores, baseline, resamples=2000, seed=7)
    assert found == paired_bootstrap(scores, baseline, resamples=2000, seed=7)
    assert found.mean == pytest.approx(0.1)
    # A paired test ignores the spread of the baseline itself (0 to 0.6): only the differences count.
    assert found.low == pytest.approx(0.1 - 1.96 * 0.005, abs=0.002)
    assert found.high == pytest.approx(0.1 + 1.96 * 0.005, abs=0.002)


def test_identical_methods_differ_by_exactly_zero() -> None:
    scores = [0.2, 0.9, 0.4]
    found = paired_bootstrap(scores, scores)
    assert (found.mean, found.low, found.high) == (0.0, 0.0, 0.0)
    assert not found.significant


def test_paired_bootstrap_refuses_unpaired_scores() -> None:
    with pytest.raises(ValueError, match="same queries"):
        paired_bootstrap([0.1, 0.2], [0.1])


def test_qrels_with_and_without_header_read_the_same(tmp_path) -> None:  # type: ignore[no-untyped-def]
    body = "q1\td1\t1\nq1\td2\t0\nq2\td3\t2\n"
    (tmp_path / "plain.tsv").write_text(body)
    (tmp_path / "header.tsv").write_text("query-id\tcorpus-id\tscore\n" + body)
    expected = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    assert read_qrels(tmp_path / "plain.tsv") == expected
    assert read_qrels(tmp_path / "header.tsv") == expected


def test_only_queries_with_a_relevant_judgment_count() -> None:
    queries = {"q1": "a", "q2": "b", "q3": "c"}
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 0}, "q9": {"d3": 1}}
    assert judged_queries(queries, qrels) == (["q1"], 1)
