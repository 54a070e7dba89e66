"""The service's cache: answers keyed on everything that shapes them, store names, store versions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .json_cache import JsonCache
from .keys import store_name_key, store_version_key

# Seed 000 fixes the store-name cache's TTL at one hour; store versions live as long.
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

    def ttl_for(self, cache_ttl_ms: int | None) -> float | None:
        """Seconds to cache an answer: `cacheTTLms` (0 disables) or the default, at most 24 h."""
        ttl_s = self.default_ttl_s if cache_ttl_ms is None else cache_ttl_ms / 1000.0
        return min(ttl_s, MAX_SEARCH_TTL_S) if ttl_s > 0 else None

    def cached_store(self, backend: str, name: str) -> StoreRef | None:
        """The store `name` resolves to and its version, when both are cached and trustworthy."""
        if not self.shared:
            return None
        resolved = self.stores.get(store_name_key(backend, name))
        if not isinstance(resolved, str):
            return None
        version = self.searches.get(store_version_key(backend, resolved))
        return StoreRef(resolved, version) if isinstance(version, int) else None

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
            self.searches.put(store_version_key(backend, store), version, STORE_NAME_TTL_S)

    def get_answer(self, key: str) -> dict[str, Any] | None:
        """A cached answer."""
        value = self.searches.get(key)
        return value if isinstance(value, dict) else None

    def put_answer(self, key: str, answer: dict[str, Any], ttl_s: float) -> None:
        """Cache an answer for `ttl_s` seconds."""
        self.searches.put(key, answer, ttl_s)
