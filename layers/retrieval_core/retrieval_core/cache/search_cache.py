"""The service's cache: answers keyed on everything that shapes them, store names, store versions."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from retrieval_core.cache.cache_keys import store_name_key, store_version_key
from retrieval_core.cache.json_cache import JsonCache

# The store-name cache's TTL is one hour; store versions live as long.
STORE_NAME_TTL_S = 3600.0
MAX_SEARCH_TTL_S = 86_400.0


@dataclass(frozen=True, slots=True)
class StoreRef:
    """A resolved store name and the version its data is at."""

    name: str
    version: int


class SearchCache:
    """Cached search answers, store-name resolutions and store versions.

    `shared` says whether every process sees the same cache (DynamoDB). Only then can a
    cached store version be trusted, because only then do writers in other processes
    (the ingest CLI, other Lambda instances) update it.
    """

    def __init__(self, searches: JsonCache, stores: JsonCache, shared: bool, default_ttl_s: float) -> None:
        self.searches = searches
        self.stores = stores
        self.shared = shared
        self.default_ttl_s = default_ttl_s
        # Resolutions this process made, with the version seen last: a guess that lets the answer
        # be read in parallel with the version item. Never trusted without that version read.
        self._recent_stores: dict[tuple[str, str], tuple[float, StoreRef]] = {}
        self._executor: ThreadPoolExecutor | None = None

    def ttl_for(self, cache_ttl_ms: int | None) -> float | None:
        """Seconds to cache an answer: `cacheTTLms` (0 disables) or the default, at most 24 h."""
        ttl_s = self.default_ttl_s if cache_ttl_ms is None else cache_ttl_ms / 1000.0
        return min(ttl_s, MAX_SEARCH_TTL_S) if ttl_s > 0 else None

    def find(
        self, backend: str, name: str, key_of: Callable[[StoreRef], str]
    ) -> tuple[StoreRef | None, dict[str, Any] | None]:
        """The store `name` resolves to (with its current version) and the cached answer keyed by `key_of`.

        (None, None) when the cache cannot vouch for the store's current version; the caller
        then reads it from PostgreSQL. On a hit this costs one round trip: the version item
        and the answer item are read in parallel, the answer's key computed from the version
        this process saw last, and the answer is only used if that version is still current.
        """
        if not self.shared:
            return None, None
        guess = self._recent_stores.get((backend, name))
        if guess is not None and guess[0] < time.monotonic():
            guess = None
        if guess is None:
            resolved = self.stores.get(store_name_key(backend, name))
            if not isinstance(resolved, str):
                return None, None
            version_future = self._pool().submit(self.searches.get, store_version_key(backend, resolved))
            answer_future = None
        else:
            resolved = guess[1].name
            version_future = self._pool().submit(self.searches.get, store_version_key(backend, resolved))
            answer_future = self._pool().submit(self.get_answer, key_of(guess[1]))
        version = version_future.result()
        if not isinstance(version, int):
            return None, None
        ref = StoreRef(resolved, version)
        self._recent_stores[(backend, name)] = (time.monotonic() + STORE_NAME_TTL_S, ref)
        if answer_future is not None and guess is not None and guess[1] == ref:
            return ref, answer_future.result()
        return ref, self.get_answer(key_of(ref))

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cache")
        return self._executor

    def remember_store(self, backend: str, name: str, store: StoreRef) -> None:
        """Cache a resolution and, if none is cached yet, the version read with it."""
        if not self.shared:
            return
        self.stores.put(store_name_key(backend, name), store.name, STORE_NAME_TTL_S)
        # `add`, not `put`: a reader must never overwrite the newer version a writer just published.
        self.searches.add(store_version_key(backend, store.name), store.version, STORE_NAME_TTL_S)

    def publish_version(self, backend: str, store: str, version: int) -> None:
        """A writer committed `version`: from now on, answers cached for older versions are not read."""
        if self.shared:
            # Versions come from one sequence, so the higher one is the newer: two writers publishing
            # in the opposite order of their commits must not leave the older version current.
            self.searches.put_newer(store_version_key(backend, store), version, version, STORE_NAME_TTL_S)

    def forget_version(self, backend: str, store: str) -> None:
        """The store was dropped: readers must go back to PostgreSQL for whatever now bears its name."""
        if self.shared:
            self.searches.delete(store_version_key(backend, store))

    def get_answer(self, key: str) -> dict[str, Any] | None:
        """A cached answer."""
        value = self.searches.get(key)
        return value if isinstance(value, dict) else None

    def put_answer(self, key: str, answer: dict[str, Any], ttl_s: float) -> None:
        """Cache an answer for `ttl_s` seconds."""
        self.searches.put(key, answer, ttl_s)
