"""A write PostgreSQL rolled back for a concurrent one goes again, within the request's deadline."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retrieval_core.clients.deadline import deadline_of
from retrieval_core.documents.writer import CONFLICT_ATTEMPTS, again_after_conflict
from retrieval_core.exceptions import DeadlockError, QueryTimeoutError, TransactionConflictError


def failing(times: int, error: Exception) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def transaction() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "written"

    return calls, transaction


def test_a_deadlock_victim_goes_again_until_it_is_written() -> None:
    calls, transaction = failing(3, DeadlockError("deadlock"))
    assert again_after_conflict(transaction) == "written"
    assert len(calls) == 4


def test_a_write_that_keeps_losing_ends_as_its_conflict_after_the_last_attempt() -> None:
    calls, transaction = failing(100, TransactionConflictError("could not serialise"))
    with pytest.raises(TransactionConflictError):
        again_after_conflict(transaction)
    assert len(calls) == CONFLICT_ATTEMPTS


def test_no_attempt_starts_once_the_request_deadline_is_too_close() -> None:
    calls, transaction = failing(100, DeadlockError("deadlock"))
    with deadline_of(0.0), pytest.raises(DeadlockError):
        again_after_conflict(transaction)
    assert len(calls) == 1


def test_other_errors_are_not_retried() -> None:
    calls, transaction = failing(1, QueryTimeoutError("slow"))
    with pytest.raises(QueryTimeoutError):
        again_after_conflict(transaction)
    assert len(calls) == 1
