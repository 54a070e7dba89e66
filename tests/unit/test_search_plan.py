"""The exact-or-index choice: a function of counts, remembered for a while."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from retrieval_core.search.plan import EXACT_SCAN_COST_RATIO, FilterSizes, exact_scan_limit


def test_the_limit_grows_with_the_square_root_of_store_size_and_k() -> None:
    base = exact_scan_limit(200_000, 10, 20_000)
    assert base == math.ceil(math.sqrt(EXACT_SCAN_COST_RATIO * 10 * 200_000)) == 2829
    assert exact_scan_limit(800_000, 10, 20_000) == pytest.approx(2 * base, abs=1)
    assert exact_scan_limit(200_000, 40, 20_000) == pytest.approx(2 * base, abs=1)


def test_the_limit_is_capped_and_can_be_turned_off() -> None:
    assert exact_scan_limit(10**9, 10, 20_000) == 20_000
    assert exact_scan_limit(200_000, 10, 0) == 0
    assert exact_scan_limit(0, 10, 20_000) == 0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def counting(matching: int, calls: list[int]) -> Callable[[int], int]:
    """A count of `matching` chunks that stops at its argument, recording each call's argument."""

    def count_up_to(up_to: int) -> int:
        calls.append(up_to)
        return min(matching, up_to)

    return count_up_to


def test_at_the_limit_is_exact_and_one_past_it_is_not() -> None:
    sizes = FilterSizes()
    assert sizes.at_most("a", 490, counting(490, []))
    assert not sizes.at_most("b", 490, counting(491, []))


def test_a_count_serves_every_limit_it_answers_until_it_expires() -> None:
    calls: list[int] = []
    clock = Clock()
    sizes = FilterSizes(ttl_s=60, clock=clock)
    few = counting(60, calls)
    assert sizes.at_most("few", 100, few)
    assert calls == [101]  # counting stops one past the limit
    # 60 is the exact number: it answers a smaller or larger limit (a store that shrank or grew).
    assert not sizes.at_most("few", 50, few) and sizes.at_most("few", 5_000, few)
    assert calls == [101]
    clock.now += 61
    assert sizes.at_most("few", 100, few)
    assert calls == [101, 101]


def test_a_filter_counted_past_a_limit_is_counted_again_only_for_a_larger_limit() -> None:
    calls: list[int] = []
    sizes = FilterSizes(clock=Clock())
    many = counting(10_000, calls)
    assert not sizes.at_most("many", 2_829, many)
    assert not sizes.at_most("many", 2_000, many)  # more than 2,830 match: more than 2,000 too
    assert calls == [2_830]
    assert not sizes.at_most("many", 5_000, many)  # unknown beyond 2,830: counted again
    assert calls == [2_830, 5_001]


def test_the_least_recently_used_filters_are_forgotten_first() -> None:
    calls: list[int] = []
    sizes = FilterSizes(capacity=2, clock=Clock())
    counted: list[str] = []
    for name in ("a", "b", "a", "c", "a", "b"):
        before = len(calls)
        sizes.at_most(name, 10, counting(1, calls))
        if len(calls) > before:
            counted.append(name)
    # "b" was the least recently used when "c" came, and had to be counted again.
    assert counted == ["a", "b", "c", "b"]
