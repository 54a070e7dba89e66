"""Retry timing shared by every outbound client. Pure: no I/O."""

from __future__ import annotations

import random
import time

RETRY_ATTEMPTS = 3
RETRY_BASE_DELAY_S = 0.5
RETRY_MAX_DELAY_S = 8.0
# HTTP statuses worth another attempt: timeouts, rate limits, server errors. The google-genai client
# takes them as a list; our own HTTP clients also retry any other 5xx (`is_retryable_status`).
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# AWS error codes worth another attempt (throttling and transient service faults), whatever the status.
_AWS_RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailableException",
        "InternalServerException",
        "BadGatewayException",
        "DependencyFailedException",
        "ModelNotReadyException",
        "ModelTimeoutException",
    }
)
# The longest part of an upstream's error message quoted in ours.
MAX_DETAIL_CHARS = 300


def is_retryable_status(status: int) -> bool:
    """A timeout, a rate limit or any server error."""
    return status in (408, 429) or status >= 500


def is_retryable_aws_error(status: int, code: str) -> bool:
    """An AWS ClientError worth another attempt: throttled, a server error, or a transient fault code."""
    return status == 429 or status >= 500 or code in _AWS_RETRYABLE_CODES


def backoff_delay(retry: int, base_delay_s: float, max_delay_s: float = RETRY_MAX_DELAY_S) -> float:
    """Seconds to wait before retry number `retry` (1-based): exponential, with equal jitter."""
    ceiling = min(max_delay_s, base_delay_s * 2.0 ** (retry - 1))
    # Jitter spreads the retries of many concurrent Lambda instances hitting one rate limit.
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def worst_case_s(attempts: int, timeout_s: float, base_delay_s: float) -> float:
    """The longest that `attempts` attempts of `timeout_s` each take, the longest waits between included."""
    waits = sum(min(RETRY_MAX_DELAY_S, base_delay_s * 2.0 ** (retry - 1)) for retry in range(1, attempts))
    return attempts * timeout_s + waits


class Deadline:
    """A point in time (monotonic clock) that work must finish by; None: no limit."""

    def __init__(self, budget_s: float | None) -> None:
        self.budget_s = budget_s
        self._at = None if budget_s is None else time.monotonic() + budget_s

    def remaining_s(self) -> float | None:
        """Seconds left (negative once passed); None when there is no limit."""
        return None if self._at is None else self._at - time.monotonic()
