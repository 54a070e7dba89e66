"""bench/tenants.py's arithmetic: the buckets make 1% and 10%, fillers hold 1 to 5 documents, the ETA, the
order of the copy into the alone database, the rounds' order of figures and databases, and the ratios of
the main database to the alone one."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from bench.tenants_build import ALONE_DATABASE, alone_conninfo, dependency_order, eta_seconds, linear_fit
from bench.tenants_data import bucket_of, filler_offsets, filler_size
from bench.tenants_measure import SIDES, Figure, round_order
from bench.tenants_report import pooled_ratio, ratio_json, round_ratios


def test_buckets_are_one_and_ten_percent_of_any_hundred_documents() -> None:
    for start in (0, 37, 1_000_003):
        counts = Counter(bucket_of(n) for n in range(start, start + 100))
        assert counts == {"b01": 1, "b10": 10, "rest": 89}


def test_fillers_hold_one_to_five_documents_and_offsets_count_them() -> None:
    sizes = [filler_size(i) for i in range(1, 2001)]
    assert set(sizes) == {1, 2, 3, 4, 5}
    assert 2.8 < sum(sizes) / len(sizes) < 3.2
    offsets = list(filler_offsets(5, 9))
    assert offsets[0] == (5, sum(sizes[:4]))
    assert [first for _, first in offsets] == [sum(sizes[: i - 1]) for i in range(5, 9)]


def test_eta_at_a_steady_rate_and_with_the_per_store_time_growing() -> None:
    steady_blocks = [(n, 0.5) for n in range(100, 1001, 100)]
    assert eta_seconds(steady_blocks, 1000, 10_000) == (4500.0, 4500.0)
    # 1 ms more a store for every 1,000 stores: the integral of 0.001 * n / 1000 from 1,000 to 3,000.
    growing = [(n, 0.001 * n / 1000) for n in range(100, 1001, 100)]
    steady, rising = eta_seconds(growing, 1000, 3000)
    assert rising == pytest.approx(0.001 / 1000 * (3000**2 - 1000**2) / 2)
    assert steady < rising
    assert eta_seconds([], 0, 10) == (0.0, 0.0)
    assert linear_fit([1.0], [2.0]) == (0.0, 2.0)


# The foreign keys of the schema's tables holding a store_id (migrations 1, 4 and 7).
REFERENCES = [
    ("documents", "stores"),
    ("chunks", "documents"),
    ("keyword_terms", "stores"),
    ("keyword_chunks", "stores"),
    ("source_sequences", "stores"),
    ("source_metadata", "stores"),
]
TABLES = ["chunks", "documents", "keyword_chunks", "keyword_terms", "source_metadata", "source_sequences"]


def test_the_copy_takes_each_table_after_the_tables_it_references() -> None:
    order = dependency_order(["stores", *TABLES], REFERENCES)
    assert order == [
        "stores",
        "documents",
        "keyword_chunks",
        "keyword_terms",
        "source_metadata",
        "source_sequences",
        "chunks",
    ]
    for table, referenced in REFERENCES:
        assert order.index(referenced) < order.index(table)


def test_the_copy_order_ignores_tables_outside_the_copy_and_refuses_a_cycle() -> None:
    assert dependency_order(["b", "a"], [("a", "b"), ("a", "elsewhere"), ("b", "b")]) == ["b", "a"]
    with pytest.raises(RuntimeError, match="cycle"):
        dependency_order(["a", "b"], [("a", "b"), ("b", "a")])


def test_the_alone_database_is_on_the_same_server() -> None:
    conninfo = alone_conninfo("postgresql://postgres:@/postgres?host=/tmp/pg")
    assert f"dbname={ALONE_DATABASE}" in conninfo
    assert "host=/tmp/pg" in conninfo


def test_each_round_takes_every_figure_on_both_databases_back_to_back() -> None:
    tasks = ["write", "dense", "put"]
    even = round_order(tasks, SIDES, 0)
    odd = round_order(tasks, SIDES, 1)
    assert even == [(task, side) for task in tasks for side in ("alone", "main")]
    assert odd == even[::-1]
    assert odd[:2] == [("put", "main"), ("put", "alone")]
    assert round_order(tasks, SIDES, 4) == even


def test_a_round_ratio_pairs_the_main_and_alone_figures_of_the_same_round() -> None:
    main = [[2.0, 4.0, 3.0], [9.0], [6.0, 6.0]]
    alone = [[1.0, 2.0, 3.0], [3.0], [4.0, 2.0]]
    assert round_ratios(main, alone) == [1.5, 3.0, 2.0]
    # The pooled ratio: the p50 of all main samples (5.0) over the p50 of all alone samples (2.5).
    assert pooled_ratio(main, alone) == pytest.approx(2.0)


def test_a_round_without_samples_on_either_side_has_no_ratio() -> None:
    assert round_ratios([[2.0], [], [3.0]], [[1.0], [1.0], []]) == [2.0]
    assert math.isnan(pooled_ratio([[], []], [[1.0], [1.0]]))
    failed = ratio_json(Figure(rounds=[[]]), Figure(rounds=[[1.0]]))
    assert failed == {"p50": None, "rounds": []}
    assert ratio_json(Figure(rounds=[[3.0]]), Figure(rounds=[[2.0]])) == {"p50": 1.5, "rounds": [1.5]}
