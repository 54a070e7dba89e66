"""Store-name resolution, for Gemini File Search stores and for our pgvector stores.

1. the cache; 2. an exact match on the full name; 3. every store (all pages), matched by display name;
4. a match on `fileSearchStores/{name}`; 5. the fallback `fileSearchStores/{name}`.

Names come before display names, as on every other path (retrieve, search, documents, CLI, queue):
looking at display names first would let a display name equal to another store's name make resolve
and retrieve answer different stores. pgvector stores are looked up with the same SQL as retrieve
(`db.stores.find_store`) and have no `fileSearchStores/` namespace, so for them steps 4 and 5 do not
apply: a name nothing matches is a 404. Resolutions are cached for an hour, except the fallback (see
docs/gemini.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from retrieval_core.backends.gemini.debug import debug
from retrieval_core.cache.cache_keys import store_name_key
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.cache.search_cache import STORE_NAME_TTL_S
from retrieval_core.exceptions import StoreNotFoundError
from retrieval_core.schemas.common import GEMINI_STORE_PREFIX
from retrieval_core.schemas.knowledge import Backend, ResolvedStore


@dataclass(frozen=True, slots=True)
class StoreEntry:
    """One listed store: its full resource name and its display name."""

    name: str
    display_name: str | None


def match_store(name: str, stores: Sequence[StoreEntry], backend: Backend) -> ResolvedStore | None:
    """Steps 2 to 5 over a complete listing. Pure. None: nothing matched (pgvector only)."""
    for store in stores:
        if store.name == name:
            return ResolvedStore(
                name=store.name, display_name=store.display_name, resolved_by="name", backend=backend
            )
    for store in stores:
        if store.display_name is not None and store.display_name == name:
            return ResolvedStore(
                name=store.name, display_name=store.display_name, resolved_by="displayName", backend=backend
            )
    if backend != "gemini":
        return None
    pattern = GEMINI_STORE_PREFIX + name
    for store in stores:
        if store.name == pattern:
            return ResolvedStore(
                name=store.name, display_name=store.display_name, resolved_by="pattern", backend=backend
            )
    # A full name is not prefixed again (fileSearchStores/fileSearchStores/x would name nothing).
    fallback = name if name.startswith(GEMINI_STORE_PREFIX) else pattern
    return ResolvedStore(name=fallback, display_name=None, resolved_by="fallback", backend=backend)


class StoreResolver:
    """Resolves display names, short names and full names of one backend's stores, through the cache."""

    def __init__(
        self, backend: Backend, candidates: Callable[[str], list[StoreEntry]], cache: JsonCache
    ) -> None:
        """`candidates(name)`: the stores `name` may designate (Gemini: all of them; pgvector: the one
        `find_store` gives, so both backends apply `match_store`'s order)."""
        self.backend = backend
        self._candidates = candidates
        self._cache = cache

    def resolve(self, name: str) -> ResolvedStore:
        """The store `name` designates, and how it was found; StoreNotFoundError when none (pgvector)."""
        key = self.cache_key(name)
        cached = self._cache.get(key)
        if isinstance(cached, dict) and isinstance(cached.get("name"), str):
            debug("resolve %r (%s): cache hit -> %s (key %s)", name, self.backend, cached["name"], key)
            display = cached.get("displayName")
            return ResolvedStore(
                name=cached["name"],
                display_name=display if isinstance(display, str) else None,
                resolved_by="cache",
                backend=self.backend,
            )
        debug("resolve %r (%s): cache miss (key %s); listing stores", name, self.backend, key)
        stores = self._candidates(name)
        debug("resolve %r (%s): %d stores listed", name, self.backend, len(stores))
        resolved = match_store(name, stores, self.backend)
        if resolved is None:
            debug("resolve %r (%s): no store matches", name, self.backend)
            raise StoreNotFoundError(name)
        debug("resolve %r (%s): %s by %s", name, self.backend, resolved.name, resolved.resolved_by)
        # A fallback names a store the listing did not hold: caching it for an hour would hide a store
        # created meanwhile behind a wrong name, so only listed stores are cached.
        if resolved.resolved_by != "fallback":
            value = {"name": resolved.name, "displayName": resolved.display_name}
            self._cache.put(key, value, STORE_NAME_TTL_S)
        return resolved

    def cache_key(self, name: str) -> str:
        """The cache key of one resolution (apart from the pgvector search path's keys)."""
        return store_name_key(f"resolve:{self.backend}", name)
