"""What every reranker shares: the score type, the protocol, answer checks and the attempt budget. Pure."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from retrieval_core.clients.deadline import request_deadline
from retrieval_core.clients.retry import backoff_delay
from retrieval_core.exceptions import RerankerUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RerankScore:
    """The relevance of one document to the query."""

    index: int  # index into the documents passed to `rerank`
    score: float  # relevance, higher is better (0..1 where the provider gives that)


class Reranker(Protocol):
    """Scores documents against a query. Implementations create their client on first use."""

    strategy: str

    def rerank(self, query: str, documents: Sequence[str]) -> list[RerankScore]:
        """One score per document, best first; raises RerankerUnavailableError on failure or timeout."""
        ...


class RetryableFailure(Exception):
    """One attempt failed in a way another attempt may not (5xx, 429, timeout, connection)."""

    def __init__(self, reason: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details or {}


@contextmanager
def transport_failures(unreachable: str) -> Iterator[None]:
    """Turn an httpx timeout or transport error inside the block into RetryableFailure.

    `unreachable` starts the reason given when the service could not be reached.
    """
    import httpx

    try:
        yield
    except httpx.TimeoutException as exc:
        raise RetryableFailure(f"no answer within the timeout ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise RetryableFailure(f"{unreachable} ({type(exc).__name__})") from exc


def with_attempts(
    attempt: Callable[[float], T],
    *,
    label: str,
    attempts: int,
    deadline: float,
    retry_base_delay_s: float,
) -> T:
    """Call `attempt(remaining_s)` until it returns, at most `attempts` times and before `deadline`.

    `deadline` is a `time.monotonic()` value: the budget covers every attempt and the waits between
    them, so a slow reranker holds a request for at most RERANK_TIMEOUT_S, not attempts times that.
    `attempt` raises RetryableFailure to ask for another try, RerankerUnavailableError to stop.
    The request's deadline (REQUEST_DEADLINE_S) cuts the budget further.
    """
    request_left = request_deadline().remaining_s()
    if request_left is not None:
        deadline = min(deadline, time.monotonic() + request_left)
    for number in range(1, attempts + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RerankerUnavailableError(
                f"{label}: no time left for attempt {number} of {attempts} (RERANK_TIMEOUT_S is spent)",
                {"attempts": number - 1},
            )
        try:
            return attempt(remaining)
        except RetryableFailure as exc:
            delay = backoff_delay(number, retry_base_delay_s)
            if number == attempts:
                raise RerankerUnavailableError(
                    f"{label}: {exc.reason} (after {number} attempts)", {**exc.details, "attempts": number}
                ) from exc
            if deadline - time.monotonic() <= delay:
                raise RerankerUnavailableError(
                    f"{label}: {exc.reason} (gave up after {number} of {attempts} attempts: the rerank "
                    "timeout, RERANK_TIMEOUT_S, is spent)",
                    {**exc.details, "attempts": number},
                ) from exc
            logger.warning("%s: %s, retrying", label, exc.reason)
            time.sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")


def ranked_scores(pairs: Iterable[tuple[object, object]], count: int, label: str) -> list[RerankScore]:
    """Check (index, score) pairs from a provider: exactly one finite score per document index.

    Best first; equal scores keep document order, so the vector order breaks ties.
    """
    scores: dict[int, float] = {}
    for index, score in pairs:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise RerankerUnavailableError(f"{label} answered with an invalid document index {index!r}")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise RerankerUnavailableError(f"{label} answered with an invalid score {score!r}")
        if index in scores:
            raise RerankerUnavailableError(f"{label} scored document {index} twice")
        scores[index] = float(score)
    if len(scores) != count:
        missing = sorted(set(range(count)) - scores.keys())
        raise RerankerUnavailableError(
            f"{label} scored {len(scores)} of {count} documents; missing indices {missing[:10]}"
        )
    return [RerankScore(index, score) for index, score in sorted(scores.items(), key=lambda item: -item[1])]
