"""The rerank package's pure parts: cold-start imports, the answer checks and the attempt budget."""

from __future__ import annotations

import math
import time

import pytest

from retrieval_core.exceptions import RerankerUnavailableError, RetrievalError
from retrieval_core.rerank.base import RerankScore, RetryableFailure, ranked_scores, with_attempts
from tests.probes import probe

CLIENT_LIBRARIES = ["httpx", "google.genai", "boto3", "botocore", "numpy"]


def test_importing_the_rerank_package_loads_no_client_library() -> None:
    code = (
        "import json, sys\n"
        "import retrieval_core.rerank, retrieval_core.rerank.mmr\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = set(probe(code))
    assert "retrieval_core.rerank" in loaded
    assert [name for name in CLIENT_LIBRARIES if name in loaded] == []


def test_reranker_unavailable_is_a_retrieval_error() -> None:
    error = RerankerUnavailableError("down")
    assert isinstance(error, RetrievalError)
    assert error.code == "reranker_unavailable"


def test_ranked_scores_sorts_best_first_and_keeps_input_order_on_ties() -> None:
    pairs: list[tuple[object, object]] = [(0, 0.2), (1, 0.9), (2, 0.2), (3, 1)]

    assert ranked_scores(pairs, 4, "test") == [
        RerankScore(3, 1.0),
        RerankScore(1, 0.9),
        RerankScore(0, 0.2),
        RerankScore(2, 0.2),
    ]


@pytest.mark.parametrize(
    "pairs",
    [
        [(0, 0.5)],  # missing index 1
        [(0, 0.5), (1, 0.5), (2, 0.5)],  # index out of range
        [(0, 0.5), (0, 0.6)],  # scored twice
        [(0, 0.5), (True, 0.5)],  # a boolean is not an index
        [(0, 0.5), (1, math.nan)],
        [(0, 0.5), (1, math.inf)],
        [(0, 0.5), (1, False)],
        [(0, 0.5), ("1", 0.5)],
    ],
)
def test_ranked_scores_refuses_incomplete_or_invalid_answers(pairs: list[tuple[object, object]]) -> None:
    with pytest.raises(RerankerUnavailableError):
        ranked_scores(pairs, 2, "test")


def test_with_attempts_retries_a_retryable_failure() -> None:
    calls: list[float] = []

    def attempt(remaining_s: float) -> str:
        calls.append(remaining_s)
        if len(calls) == 1:
            raise RetryableFailure("HTTP 503", {"status": 503})
        return "ok"

    result = with_attempts(
        attempt, label="test", attempts=2, deadline=time.monotonic() + 60, retry_base_delay_s=0.001
    )

    assert result == "ok"
    assert len(calls) == 2
    assert all(0 < remaining <= 60 for remaining in calls)


def test_with_attempts_stops_after_the_last_attempt_with_its_reason() -> None:
    def attempt(remaining_s: float) -> str:
        raise RetryableFailure("HTTP 500", {"status": 500})

    with pytest.raises(RerankerUnavailableError) as caught:
        with_attempts(
            attempt, label="svc", attempts=3, deadline=time.monotonic() + 60, retry_base_delay_s=0.001
        )

    assert caught.value.message == "svc: HTTP 500 (after 3 attempts)"
    assert caught.value.details == {"status": 500, "attempts": 3}


def test_with_attempts_does_not_retry_once_the_budget_is_spent() -> None:
    # Long enough that even a loaded machine starts the first attempt before the deadline.
    deadline = time.monotonic() + 0.5
    calls = 0

    def attempt(remaining_s: float) -> str:
        nonlocal calls
        calls += 1
        while time.monotonic() < deadline:  # a hanging service, as seen from the client
            time.sleep(0.01)
        raise RetryableFailure("no answer within the timeout")

    with pytest.raises(RerankerUnavailableError, match="RERANK_TIMEOUT_S"):
        with_attempts(attempt, label="svc", attempts=2, deadline=deadline, retry_base_delay_s=0.001)

    assert calls == 1


def test_with_attempts_passes_a_final_error_through_without_retrying() -> None:
    calls = 0

    def attempt(remaining_s: float) -> str:
        nonlocal calls
        calls += 1
        raise RerankerUnavailableError("HTTP 401")

    with pytest.raises(RerankerUnavailableError, match="HTTP 401"):
        with_attempts(
            attempt, label="svc", attempts=2, deadline=time.monotonic() + 60, retry_base_delay_s=0.001
        )

    assert calls == 1
