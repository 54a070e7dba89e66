"""Which retrieves are expensive, and the slots that bound them."""

from __future__ import annotations

import threading
import time

import pytest

from retrieval_core.exceptions import DatabaseOverloadedError
from retrieval_core.search.concurrency import (
    EXPENSIVE_KEYWORD_TERMS,
    EXPENSIVE_MMR_DEPTH,
    EXPENSIVE_QUERY_CHARS,
    ExpensiveSlots,
    is_expensive,
)


def test_ordinary_retrieves_are_not_expensive() -> None:
    assert not is_expensive(200, 0, None)
    assert not is_expensive(EXPENSIVE_QUERY_CHARS, EXPENSIVE_KEYWORD_TERMS, EXPENSIVE_MMR_DEPTH)


@pytest.mark.parametrize(
    ("chars", "terms", "mmr"),
    [
        (EXPENSIVE_QUERY_CHARS + 1, 0, None),
        (50, EXPENSIVE_KEYWORD_TERMS + 1, None),
        (50, 3, EXPENSIVE_MMR_DEPTH + 1),
    ],
)
def test_a_long_query_many_keyword_terms_or_a_deep_mmr_is_expensive(
    chars: int, terms: int, mmr: int | None
) -> None:
    assert is_expensive(chars, terms, mmr)


def test_slots_full_answer_overloaded_after_the_wait_and_free_again() -> None:
    slots = ExpensiveSlots(limit=1, wait_s=0.05)
    taken = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with slots.hold():
            taken.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(5)
    started = time.perf_counter()
    with pytest.raises(DatabaseOverloadedError) as refused, slots.hold():
        pass
    assert time.perf_counter() - started < 1.0
    assert refused.value.code == "overloaded" and refused.value.retry_after_s == 1
    release.set()
    holder.join(5)
    with slots.hold():  # given back
        pass


def test_a_thread_reenters_its_own_slot() -> None:
    slots = ExpensiveSlots(limit=1, wait_s=0.01)
    with slots.hold(), slots.hold():  # a batch holds one; its items run inside it
        pass
    with slots.hold():
        pass
