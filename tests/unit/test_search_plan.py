"""The exact-or-index choice: a function of counts, remembered per store version."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from retrieval_core.search_plan import EXACT_SCAN_COST_RATIO, FilterSizes, exact_scan_limit


def test_the_limit_grows_with_the_square_root_of_store_size_and_k() -> None:
    base = exact_scan_limit(200_000, 10, 20_000)
    assert base == math.ceil(math.sqrt(EXACT_SCAN_COST_RATIO * 10 * 200_000)) == 2829
    assert exact_scan_limit(800_000, 10, 20_000) == pytest.approx(2 * base, abs=1)
    assert exact_scan_limit(200_000, 40, 20_000) == pytest.approx(2 * base, abs=1)


def test_the_limit_is_capped_and_can_be_turned_off() -> None:
    assert exact_scan_limit(10**9, 10, 20_000) == 20_000
    assert exact_scan_limit(200_000, 10, 0) == 0
    assert exact_scan_limit(0, 10, 20_000) == 0


def test_a_filter_is_counted_once_per_key_and_limit() -> None:
    counted: list[int] = []

    def count_up_to(n: int) -> int:
        counted.append(n)
        return 60

    sizes = FilterSizes()
    assert sizes.at_most(("store", 1, "tenant = one"), 100, count_up_to)
    assert sizes.at_most(("store", 1, "tenant = one"), 100, count_up_to)
    assert counted == [101]  # counting stops one past the limit
    assert not sizes.at_most(("store", 1, "tenant = one"), 50, count_up_to)
    assert sizes.at_most(("store", 2, "tenant = one"), 100, count_up_to)  # a new store version
    assert counted == [101, 51, 101]


def test_at_the_limit_is_exact_and_one_past_it_is_not() -> None:
    sizes = FilterSizes()
    assert sizes.at_most("a", 490, lambda n: min(490, n))
    assert not sizes.at_most("b", 490, lambda n: min(491, n))


def test_the_oldest_filters_are_forgotten_first() -> None:
    counted: list[str] = []
    sizes = FilterSizes(capacity=2)

    def counter(name: str) -> Callable[[int], int]:
        def count(up_to: int) -> int:
            counted.append(name)
            return 1

        return count

    for name in ("a", "b", "a", "c", "a", "b"):
        sizes.at_most(name, 10, counter(name))
    # "b" was the least recently used when "c" came, and had to be counted again.
    assert counted == ["a", "b", "c", "b"]
