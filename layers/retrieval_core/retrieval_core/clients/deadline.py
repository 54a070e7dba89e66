"""One deadline per request, that every outbound call's attempts, timeouts and backoff are cut to.

A function behind API Gateway is stopped at its Timeout (29 s): an upstream answer that would arrive
later reaches nobody, and the caller gets the gateway's generic error. With the deadline, a call that
runs out of time ends as our 504 `upstream_timeout` instead, early enough to be sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from retrieval_core.clients.retry import Deadline

# Seconds kept back from the Lambda's remaining time, for answering once an upstream call gave up.
LAMBDA_MARGIN_S = 3.0
# The shortest attempt worth starting: below this, give up rather than send a request doomed to time out.
MIN_ATTEMPT_S = 0.2

_current: ContextVar[Deadline | None] = ContextVar("request_deadline", default=None)


def request_deadline() -> Deadline:
    """The deadline of the request being served (no limit outside a request: the CLI, ingestion)."""
    return _current.get() or Deadline(None)


def lambda_remaining_s(context: object) -> float | None:
    """Seconds the Lambda invocation of `context` has left; None without a Lambda context."""
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    return remaining_ms() / 1000 if callable(remaining_ms) else None


def budget_s(setting_s: float, lambda_remaining_s: float | None) -> float:
    """`setting_s`, cut to the Lambda's remaining time less a margin when there is one."""
    if lambda_remaining_s is None:
        return setting_s
    return max(0.0, min(setting_s, lambda_remaining_s - LAMBDA_MARGIN_S))


@contextmanager
def deadline_of(seconds: float | None) -> Iterator[Deadline]:
    """Serve the code inside with a deadline `seconds` from now (None: no limit)."""
    deadline = Deadline(seconds)
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)


def attempt_timeout_s(timeout_s: float, deadline: Deadline) -> float | None:
    """The timeout of the next attempt: `timeout_s`, cut to what is left; None when too little is left."""
    remaining = deadline.remaining_s()
    if remaining is None:
        return timeout_s
    return min(timeout_s, remaining) if remaining >= MIN_ATTEMPT_S else None


def time_for_retry(delay_s: float, deadline: Deadline) -> bool:
    """Whether waiting `delay_s` still leaves time for a worthwhile attempt."""
    remaining = deadline.remaining_s()
    return remaining is None or remaining - delay_s >= MIN_ATTEMPT_S
