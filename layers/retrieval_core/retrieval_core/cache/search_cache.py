"""The service's cache: answers keyed on everything that shapes them, and Gemini store-name resolutions."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from retrieval_core.cache.json_cache import CacheStatus, JsonCache

# Gemini File Search store names are resolved once an hour (backends/gemini/resolve.py).
STORE_NAME_TTL_S = 3600.0
MAX_SEARCH_TTL_S = 86_400.0
# Stores whose last-seen version a process keeps as its guess (a few hundred bytes each).
RECENT_STORES_MAX = 1_024


@dataclass(frozen=True, slots=True)
class StoreRef:
    """A resolved store name and the version its data is at."""

    name: str
    version: int


@dataclass(frozen=True, slots=True)
class CacheSlot:
    """One request's place in the cache: its answer on a hit, else `put` to cache the answer computed."""

    status: CacheStatus
    cached: dict[str, Any] | None
    put: Callable[[dict[str, Any]], None]


class SearchCache:
    """Cached search answers, and the store-name resolutions of Gemini File Search.

    An answer's key holds the store's version, and that version is read from PostgreSQL on every
    request (`lookup`): a write gives the store a new version in the transaction that commits it,
    so no instance serves an answer of an older version once the write has answered, whatever
    the cache is doing (failing, slow, paused, or holding items of older versions).

    `shared` says whether the cache is a round trip away (DynamoDB, shared by every process): then
    the answer is read in parallel with the version.
    """

    def __init__(self, searches: JsonCache, stores: JsonCache, shared: bool, default_ttl_s: float) -> None:
        self.searches = searches
        self.stores = stores
        self.shared = shared
        self.default_ttl_s = default_ttl_s
        # The version this process saw last, per store name: a guess that lets the answer be read in
        # parallel with the version. Never trusted: the answer is only used if the guess was right.
        self._recent_stores: OrderedDict[tuple[str, str], StoreRef] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def ttl_for(self, cache_ttl_ms: int | None) -> float | None:
        """Seconds to cache an answer: `cacheTTLms` (0 disables) or the default, at most 24 h."""
        ttl_s = self.default_ttl_s if cache_ttl_ms is None else cache_ttl_ms / 1000.0
        return min(ttl_s, MAX_SEARCH_TTL_S) if ttl_s > 0 else None

    def lookup(
        self,
        backend: str,
        name: str,
        current: Callable[[], StoreRef],
        key_of: Callable[[StoreRef], str],
    ) -> tuple[StoreRef, dict[str, Any] | None]:
        """The store `name` resolves to, at its current version, and the answer cached for it (or None).

        `current` reads the store from PostgreSQL; its errors (unknown store, database down)
        propagate. With a shared cache and a version seen before, the answer item is read in
        parallel with it, under the version seen last; on a hit that is one round trip.
        """
        guess = self._recent_stores.get((backend, name))
        early = None
        if self.shared and guess is not None:
            early = self._pool().submit(self.get_answer, key_of(guess))
        store = current()
        self._remember(backend, name, store)
        if early is not None and guess == store:
            return store, early.result()
        return store, self.get_answer(key_of(store))

    def _remember(self, backend: str, name: str, store: StoreRef) -> None:
        with self._recent_lock:
            self._recent_stores[(backend, name)] = store
            self._recent_stores.move_to_end((backend, name))
            if len(self._recent_stores) > RECENT_STORES_MAX:
                self._recent_stores.popitem(last=False)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cache")
        return self._executor

    def get_answer(self, key: str) -> dict[str, Any] | None:
        """A cached answer."""
        value = self.searches.get(key)
        return value if isinstance(value, dict) else None

    def put_answer(self, key: str, answer: dict[str, Any], ttl_s: float) -> None:
        """Cache an answer for `ttl_s` seconds."""
        self.searches.put(key, answer, ttl_s)
