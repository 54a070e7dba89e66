"""What a caller may do: which stores, with which scopes. Pure: no I/O.

One rule, used by the HTTP API, the queue function, the ingest paths and (later) MCP alike:
- a missing scope is a 403 (`ForbiddenError`): the caller knows the operation exists;
- a store outside the grant answers exactly as an unknown store does (404), so a key cannot learn
  which other stores exist.

Stores are matched by their canonical name (for Gemini File Search, the full `fileSearchStores/...`
name), never by display name: check after the name has been resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from .exceptions import ForbiddenError, StoreNotFoundError

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)


@dataclass(frozen=True, slots=True)
class Grant:
    """A credential's rights. `stores` None means every store (`"*"` in configuration)."""

    name: str
    scopes: frozenset[Scope]
    stores: frozenset[str] | None = None

    def has_scope(self, scope: Scope) -> bool:
        """Whether the grant carries `scope`."""
        return scope in self.scopes

    def can_access(self, store: str) -> bool:
        """Whether the grant covers the store whose canonical name is `store`."""
        return self.stores is None or store in self.stores

    def require_scope(self, scope: Scope) -> None:
        """Raise ForbiddenError (403) unless the grant carries `scope`."""
        if scope not in self.scopes:
            raise ForbiddenError(scope)

    def require_store(self, store: str, requested_as: str | None = None) -> None:
        """Raise StoreNotFoundError (404, naming the store as the caller wrote it) unless granted."""
        if not self.can_access(store):
            raise StoreNotFoundError(requested_as or store)

    def require(self, scope: Scope, store: str, requested_as: str | None = None) -> None:
        """Both checks: the scope first (403), then the store (404)."""
        self.require_scope(scope)
        self.require_store(store, requested_as)


# No keys and no JWT configured (local `make serve`): everything is open.
OPEN_GRANT = Grant(name="open", scopes=frozenset(SCOPES), stores=None)
