"""Retry timing shared by every outbound client. Pure: no I/O."""

from __future__ import annotations

import random

RETRY_ATTEMPTS = 3
RETRY_BASE_DELAY_S = 0.5
RETRY_MAX_DELAY_S = 8.0


def backoff_delay(retry: int, base_delay_s: float, max_delay_s: float = RETRY_MAX_DELAY_S) -> float:
    """Seconds to wait before retry number `retry` (1-based): exponential, with equal jitter."""
    ceiling = min(max_delay_s, base_delay_s * 2.0 ** (retry - 1))
    # Jitter spreads the retries of many concurrent Lambda instances hitting one rate limit.
    return ceiling / 2 + random.uniform(0, ceiling / 2)
