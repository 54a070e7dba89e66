"""bench/tenants.py's arithmetic: the buckets make 1% and 10%, fillers hold 1 to 5 documents, the ETA and
the ratios to the 1-store figures."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from bench.tenants_build import eta_seconds, linear_fit
from bench.tenants_data import bucket_of, filler_offsets, filler_size
from bench.tenants_report import ratio_and_range


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


def test_ratios_to_the_one_store_figure_and_their_range_over_rounds() -> None:
    assert ratio_and_range(3.0, [2.0, 4.0, 3.0], 2.0) == (1.5, 1.0, 2.0)
    assert all(math.isnan(v) for v in ratio_and_range(3.0, [3.0], None))
    assert all(math.isnan(v) for v in ratio_and_range(math.nan, [3.0], 1.0))
