"""Attempts of one outbound call within a time budget: what may be tried again, and when to give up.

Shared by the rerankers and the generators. The budget covers every attempt and the waits between
them, and the request's deadline (REQUEST_DEADLINE_S, clients/deadline.py) cuts it further, so a slow
provider holds a request for at most its timeout setting, never attempts times that.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from retrieval_core.clients.deadline import request_deadline
from retrieval_core.clients.retry import backoff_delay

logger = logging.getLogger(__name__)

T = TypeVar("T")


class RetryableFailure(Exception):
    """One attempt failed in a way another attempt may not (5xx, 429, timeout, connection)."""

    def __init__(
        self, reason: str, details: dict[str, Any] | None = None, *, timed_out: bool = False
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details or {}
        # The attempt ran out of time (rather than being refused): what a caller reports as a time-out.
        self.timed_out = timed_out


class GiveUp(Protocol):
    """Builds the error raised when no attempt succeeded: `out_of_time` when the budget ended it."""

    def __call__(self, message: str, details: dict[str, Any], *, out_of_time: bool) -> Exception: ...


@contextmanager
def transport_failures(unreachable: str) -> Iterator[None]:
    """Turn an httpx timeout or transport error inside the block into RetryableFailure.

    `unreachable` starts the reason given when the service could not be reached.
    """
    import httpx

    try:
        yield
    except httpx.TimeoutException as exc:
        reason = f"no answer within the timeout ({type(exc).__name__})"
        raise RetryableFailure(reason, timed_out=True) from exc
    except httpx.TransportError as exc:
        raise RetryableFailure(f"{unreachable} ({type(exc).__name__})") from exc


def with_attempts(
    attempt: Callable[[float], T],
    *,
    label: str,
    attempts: int,
    deadline: float,
    retry_base_delay_s: float,
    budget: str,
    give_up: GiveUp,
) -> T:
    """Call `attempt(remaining_s)` until it returns, at most `attempts` times and before `deadline`.

    `deadline` is a `time.monotonic()` value; `budget` names the setting it comes from, for messages.
    `attempt` raises RetryableFailure to ask for another try, any other error to stop; when no attempt
    is left, or no time for one, `give_up` builds the error raised.
    """
    request_left = request_deadline().remaining_s()
    if request_left is not None:
        deadline = min(deadline, time.monotonic() + request_left)
    for number in range(1, attempts + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise give_up(
                f"{label}: no time left for attempt {number} of {attempts} ({budget} is spent)",
                {"attempts": number - 1},
                out_of_time=True,
            )
        try:
            return attempt(remaining)
        except RetryableFailure as exc:
            details = {**exc.details, "attempts": number}
            delay = backoff_delay(number, retry_base_delay_s)
            if number == attempts:
                message = f"{label}: {exc.reason} (after {number} attempts)"
                raise give_up(message, details, out_of_time=exc.timed_out) from exc
            if deadline - time.monotonic() <= delay:
                message = (
                    f"{label}: {exc.reason} (gave up after {number} of {attempts} attempts: "
                    f"{budget} is spent)"
                )
                raise give_up(message, details, out_of_time=True) from exc
            logger.warning("%s: %s, retrying", label, exc.reason)
            time.sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")
