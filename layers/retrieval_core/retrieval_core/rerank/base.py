"""What every reranker shares: the score type, the protocol, answer checks and the attempt budget. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from retrieval_core.clients.attempts import RetryableFailure, transport_failures
from retrieval_core.clients.attempts import with_attempts as attempts_within_budget
from retrieval_core.exceptions import RerankerUnavailableError

# The rerankers raise these in their attempts.
__all__ = ["RetryableFailure", "transport_failures"]

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


def with_attempts(
    attempt: Callable[[float], T],
    *,
    label: str,
    attempts: int,
    deadline: float,
    retry_base_delay_s: float,
) -> T:
    """`clients.attempts.with_attempts` with the rerank budget (RERANK_TIMEOUT_S): every way of giving up
    is a RerankerUnavailableError, which callers turn into a warning and the vector order."""

    def give_up(message: str, details: dict[str, Any], *, out_of_time: bool) -> Exception:
        return RerankerUnavailableError(message, details)

    return attempts_within_budget(
        attempt,
        label=label,
        attempts=attempts,
        deadline=deadline,
        retry_base_delay_s=retry_base_delay_s,
        budget="the rerank timeout, RERANK_TIMEOUT_S,",
        give_up=give_up,
    )


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
