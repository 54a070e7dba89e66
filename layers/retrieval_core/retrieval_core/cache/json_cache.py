"""JSON values over a cache backend: compressed, size-checked, and failing open."""

from __future__ import annotations

import json
import logging
import zlib
from enum import StrEnum
from typing import Any

from retrieval_core.cache.backends import CacheBackend, ValueTooLargeError
from retrieval_core.exceptions import CacheUnavailableError
from retrieval_core.observability import metrics

logger = logging.getLogger(__name__)

# Counts the cache calls that failed, the request served uncached (template.yaml's CacheErrorAlarm).
CACHE_ERROR_METRIC = "CacheError"


class CacheStatus(StrEnum):
    """What the cache did for a request; reported in the `X-Cache` header."""

    HIT = "hit"
    MISS = "miss"
    BYPASS = "bypass"


class JsonCache:
    """Caches JSON-serialisable values. A failing backend never fails the caller."""

    def __init__(self, backend: CacheBackend, name: str) -> None:
        self.backend = backend
        self.name = name

    def get(self, key: str) -> Any | None:
        """The cached value, or None on a miss or when the backend is unavailable."""
        try:
            raw = self.backend.get(key)
        except CacheUnavailableError as exc:
            self._unavailable(exc)
            return None
        if raw is None:
            return None
        return json.loads(zlib.decompress(raw))

    def put(self, key: str, value: Any, ttl_s: float) -> None:
        """Cache `value` for `ttl_s` seconds; too large or failing: logged, counted, skipped."""
        raw = _encode(value)
        try:
            self.backend.put(key, raw, ttl_s)
        except ValueTooLargeError:
            metrics.count("CacheValueTooLarge")
            logger.warning(
                "%s cache: value of %d compressed bytes is too large to cache", self.name, len(raw)
            )
        except CacheUnavailableError as exc:
            self._unavailable(exc)

    def _unavailable(self, exc: CacheUnavailableError) -> None:
        metrics.count(CACHE_ERROR_METRIC)
        logger.warning("%s cache unavailable, serving uncached: %s", self.name, exc.message)


def _encode(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode("utf-8"), level=6)
