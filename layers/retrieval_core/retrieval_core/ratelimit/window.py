"""Fixed-window arithmetic of the rate limits. Pure: no I/O.

Time is cut into windows of `window_s` seconds aligned on the epoch, so every Lambda instance computes
the same window (and the same counter key) for the same instant without talking to the others. A
window's count starts at 0; a request costing `cost` passes while count + cost <= requests.

A fixed window lets a caller send up to 2 x `requests` across one window boundary (the end of one
window, the start of the next); docs/operations.md "Rate limits" says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Longest window accepted: a counter item lives for its window plus TTL_SLACK_S.
MAX_WINDOW_S = 3600
MAX_REQUESTS = 1_000_000
# DynamoDB deletes expired items up to days late; counters past their window are never read again
# (the key names its window), so this only keeps the table from growing before TTL catches up.
TTL_SLACK_S = 60
KEY_PREFIX = "ratelimit"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `requests` per window of `window_s` seconds; `requests` 0: unlimited."""

    requests: int
    window_s: int

    @property
    def unlimited(self) -> bool:
        """Whether nothing is counted (requests 0)."""
        return self.requests == 0


@dataclass(frozen=True, slots=True)
class Window:
    """The window holding one instant: where its counter lives and when it ends."""

    key: str
    start: int
    end: int

    def retry_after_s(self, now: float) -> int:
        """Whole seconds until the window ends, at least 1 (the Retry-After header)."""
        return max(1, math.ceil(self.end - now))

    @property
    def expires_at(self) -> int:
        """Epoch seconds after which the counter may be deleted (the TTL attribute)."""
        return self.end + TTL_SLACK_S


def window_at(subject: str, limit: RateLimit, now: float) -> Window:
    """The window of `limit` holding `now` (epoch seconds) for the credential `subject`."""
    start = int(now // limit.window_s) * limit.window_s
    # The window length is part of the key: changing a key's limit never reads the old count.
    return Window(f"{KEY_PREFIX}#{subject}#{limit.window_s}#{start}", start, start + limit.window_s)


def parse_rate_limit(value: Any, where: str) -> RateLimit:
    """A key entry's `rateLimit`: `{"requests": N, "windowSeconds": S}`; ValueError naming `where`."""
    if not isinstance(value, dict) or set(value) != {"requests", "windowSeconds"}:
        raise ValueError(f'{where}: rateLimit must be {{"requests": N, "windowSeconds": S}}')
    requests, window_s = value["requests"], value["windowSeconds"]
    if not _whole(requests) or not 0 <= requests <= MAX_REQUESTS:
        raise ValueError(
            f"{where}: rateLimit.requests must be a whole number from 0 (unlimited) to {MAX_REQUESTS}"
        )
    if not _whole(window_s) or not 1 <= window_s <= MAX_WINDOW_S:
        raise ValueError(f"{where}: rateLimit.windowSeconds must be a whole number from 1 to {MAX_WINDOW_S}")
    return RateLimit(requests, window_s)


def _whole(value: Any) -> bool:
    # bool is an int in Python: `true` is no count.
    return isinstance(value, int) and not isinstance(value, bool)
