"""The rate limiter: which window a request falls in, whether its credential has room left there.

Fails open: when the shared counter (DynamoDB) cannot be reached, the request is served, a warning is
logged and `RateLimitError` is counted. A limiter that failed closed would turn a DynamoDB outage into
an outage of every route for every caller; the limit guards against one caller's excess, which the
database's own bounds (statement timeout, pool wait) still contain while the counter is away. After a
failure the counter is left alone for PAUSE_AFTER_FAILURE_S, so an outage does not add a timeout to
every request (each of those requests is counted in `RateLimitError` too).
"""

from __future__ import annotations

import logging
import threading
import time

from retrieval_core.clients.aws import fail_open_options, lazy_aws_client
from retrieval_core.exceptions import RateLimitedError
from retrieval_core.observability import metrics
from retrieval_core.ratelimit.counters import (
    Clock,
    DynamoDBCounter,
    MemoryCounter,
    RateCounter,
    RateCounterError,
)
from retrieval_core.ratelimit.window import RateLimit, window_at
from retrieval_core.settings import Settings, get_settings

logger = logging.getLogger(__name__)

PAUSE_AFTER_FAILURE_S = 10.0
# Counts the requests let through unchecked (template.yaml's RateLimitErrorAlarm watches it).
RATE_LIMIT_ERROR_METRIC = "RateLimitError"


class RateLimiter:
    """Counts each credential's requests in fixed windows on `counter`."""

    def __init__(self, counter: RateCounter, default: RateLimit, *, shared: bool, clock: Clock = time.time):
        self.counter = counter
        self.default = default
        # Whether `counter` is a network call (then kept off the event loop).
        self.shared = shared
        self._clock = clock
        self._paused_until = 0.0

    def check(self, subject: str, limit: RateLimit | None, cost: int = 1) -> None:
        """Take `cost` requests from `subject`'s window; RateLimitedError (429) when there is no room.

        `limit` None: the service default. `subject` identifies the credential (a hash, never a key).
        """
        limit = limit or self.default
        if limit.unlimited or cost <= 0:
            return
        now = self._clock()
        if now < self._paused_until:
            metrics.count(RATE_LIMIT_ERROR_METRIC)
            return
        window = window_at(subject, limit, now)
        try:
            taken = self.counter.take(window.key, cost, limit.requests, window.expires_at)
        except RateCounterError as exc:
            self._paused_until = now + PAUSE_AFTER_FAILURE_S
            logger.warning(
                "rate limit not checked, requests let through for %.0f s: %s", PAUSE_AFTER_FAILURE_S, exc
            )
            metrics.count(RATE_LIMIT_ERROR_METRIC)
            return
        if not taken:
            metrics.count("RateLimited")
            raise RateLimitedError(limit.requests, limit.window_s, window.retry_after_s(now))


def build_rate_limiter(settings: Settings, clock: Clock = time.time) -> RateLimiter:
    """Counted in CACHE_TABLE_NAME when set (shared by every instance), like the cache; else in process."""
    default = RateLimit(settings.rate_limit_requests, settings.rate_limit_window_s)
    if not settings.cache_table_name:
        return RateLimiter(MemoryCounter(clock), default, shared=False, clock=clock)
    # Fail-open: a failed check lets the request through anyway.
    dynamodb_client = lazy_aws_client("dynamodb", fail_open_options(settings.dynamodb_endpoint_url))
    counter = DynamoDBCounter(settings.cache_table_name, dynamodb_client)
    return RateLimiter(counter, default, shared=True, clock=clock)


_lock = threading.Lock()
_limiter: RateLimiter | None = None
_built_from: Settings | None = None


def get_rate_limiter() -> RateLimiter:
    """The process-wide limiter, built on first use and again whenever the settings are rebuilt."""
    global _limiter, _built_from
    settings = get_settings()
    with _lock:
        if _limiter is None or (_built_from is not None and _built_from is not settings):
            _limiter, _built_from = build_rate_limiter(settings), settings
        return _limiter


def replace_rate_limiter(limiter: RateLimiter | None) -> RateLimiter | None:
    """Install `limiter` (kept whatever the settings; None: build from the settings again); return the old."""
    global _limiter, _built_from
    with _lock:
        previous, _limiter, _built_from = _limiter, limiter, None
    return previous
