"""What a caller may do: which stores, with which scopes. Pure: no I/O.

One rule, used by the HTTP API, the queue function, the ingest paths and (later) MCP alike:
- a missing scope is a 403 (`ForbiddenError`): the caller knows the operation exists;
- a store outside the grant answers exactly as an unknown store does (404), so a key cannot learn
  which other stores exist.

Stores are matched by their canonical name (for Gemini File Search, the full `fileSearchStores/...`
name), never by display name: check after the name has been resolved.

Scopes are independent: "write" does not imply "read" (a write-only uploader key is legitimate), nor
"admin" the others. A grant comes from an API key entry (api/keys.py), a JWT's claims
(`grant_from_claims`) or the queue's QUEUE_STORES (`parse_store_setting`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from retrieval_core.exceptions import ConfigurationError, ForbiddenError, StoreNotFoundError
from retrieval_core.ratelimit.window import RateLimit

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
ALL_STORES = "*"
# OAuth scopes of a JWT's `scope` claim: `retrieval:read` grants "read", and so on.
JWT_SCOPE_PREFIX = "retrieval:"
_LIST_SEPARATORS = re.compile(r"[\s,]+")


@dataclass(frozen=True, slots=True)
class Grant:
    """A credential's rights. `stores` None means every store (`"*"` in configuration).

    `rate_limit` None: the service default (RATE_LIMIT_REQUESTS per RATE_LIMIT_WINDOW_S).
    """

    name: str
    scopes: frozenset[Scope]
    stores: frozenset[str] | None = None
    rate_limit: RateLimit | None = None

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


def parse_stores(value: Any) -> frozenset[str] | None:
    """Store names from a list, a JSON list or a space/comma-separated string; None for `*` (every store).

    API Gateway's JWT authorizer hands an array claim over as the string `[a b]`: read that too.
    Anything else (a number, a list holding a non-string) is an empty set: it grants no store.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                value = _LIST_SEPARATORS.split(text.strip("[]"))
        else:
            value = _LIST_SEPARATORS.split(text)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return frozenset()
    names = frozenset(item.strip() for item in value if item.strip())
    return None if ALL_STORES in names else names


def grant_from_claims(claims: Mapping[str, Any], stores_claim: str) -> Grant:
    """The grant of a JWT verified by API Gateway: scopes from `scope`, stores from `stores_claim`.

    Scopes other than `retrieval:*` ones are ignored; a token without the stores claim reaches no store.
    """
    scope_claim = claims.get("scope")
    words = _LIST_SEPARATORS.split(scope_claim) if isinstance(scope_claim, str) else []
    scopes = frozenset(s for s in SCOPES if JWT_SCOPE_PREFIX + s in words)
    subject = claims.get("sub") or claims.get("client_id")
    name = f"jwt:{subject}" if isinstance(subject, str) and subject else "jwt"
    return Grant(name=name, scopes=scopes, stores=parse_stores(claims.get(stores_claim)))


def parse_store_setting(text: str, source: str) -> frozenset[str] | None:
    """A comma-separated store list from configuration (QUEUE_STORES); `*`: every store.

    Empty is refused: a setting that lets nothing through is a mistake, and `*` says "all" explicitly.
    """
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ConfigurationError(
            f"{source} is empty: list store names (comma-separated) or * for every store"
        )
    return None if ALL_STORES in names else names
