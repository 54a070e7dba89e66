"""Cached answers of the pgvector service: the key, the store's version, and the grant, in one place.

An answer's key holds every option of its request, the store's current version (read from PostgreSQL
on every request: a write gives the store a new version in the transaction that commits it, so no
answer of an older version is served once a write has answered) and what the service adds to the
request (embedding model, index knobs, rerankers, a generator's identity).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from retrieval_core.cache.cache_keys import search_key
from retrieval_core.cache.json_cache import CacheStatus
from retrieval_core.cache.search_cache import CacheSlot, SearchCache, StoreRef
from retrieval_core.grants import Grant
from retrieval_core.observability import metrics
from retrieval_core.observability.debug import DebugLog

debug = DebugLog(__name__)

BACKEND = "pgvector"


def _unused(body: dict[str, Any]) -> None:
    """Where an answer the cache does not keep goes."""


def cache_slot(
    cache: SearchCache | None,
    operation: str,
    cache_ttl_ms: int | None,
    name: str,
    current: Callable[[], StoreRef],
    options: Mapping[str, Any],
    context: Mapping[str, Any],
    grant: Grant,
) -> CacheSlot:
    """The slot of one request on store `name`: a hit, a miss with where to put the answer, or a bypass.

    `current` reads the store from PostgreSQL (its errors propagate). `grant` must hold the store,
    checked before an answer is served (404 otherwise); a bypass leaves that check to the search.
    """
    ttl_s = cache.ttl_for(cache_ttl_ms) if cache is not None else None
    if cache is None or ttl_s is None:
        debug("%s: cache bypassed (%s)", operation, "no cache" if cache is None else "cacheTTLms 0")
        return CacheSlot(CacheStatus.BYPASS, None, _unused)

    def key_of(store: StoreRef) -> str:
        return search_key(
            backend=BACKEND,
            store=store.name,
            store_version=store.version,
            operation=operation,
            request=options,
            context=context,
        )

    store, cached = cache.lookup(BACKEND, name, current, key_of)
    # Answers are shared by every caller, so the grant is checked before one is served.
    grant.require_store(store.name, name)
    # A hit skips the store's own allowedMetadataKeys check (search_chunks makes it on a miss), and
    # safely: the key holds the store version, the write side bumps that version whenever the store
    # definition changes, and an answer is only cached once the check passed. So a cached answer was
    # always computed under the store's current list, for this very filter.
    if cached is not None:
        debug("%s on %s: cache hit", operation, store.name)
        metrics.count("CacheHit")
        return CacheSlot(CacheStatus.HIT, cached, _unused)
    debug("%s on %s: cache miss (ttl %.0f s)", operation, store.name, ttl_s)
    metrics.count("CacheMiss")
    return CacheSlot(CacheStatus.MISS, None, lambda body: cache.put_answer(key_of(store), body, ttl_s))
