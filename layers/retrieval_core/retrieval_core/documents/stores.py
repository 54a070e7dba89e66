"""StoreOperations: a store's definition and life (PUT, GET, list, refresh, DELETE), the half of
DocumentService that names stores only. The same rules as the service's: `grant` checked the one way
(a missing scope is a 403, a store outside the grant a 404), and every change writes its audit row as
`actor` in its own transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from retrieval_core.backends.attached.stores import attach_store, refresh_store
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db import stores as store_sql
from retrieval_core.db.audit import AuditEntry
from retrieval_core.db.connection import Connection
from retrieval_core.db.errors import database_errors
from retrieval_core.db.stores import Store
from retrieval_core.documents import audit_trail
from retrieval_core.documents.chunking import Chunking
from retrieval_core.documents.cursors import (
    DEFAULT_PAGE,
    MAX_PAGE,
    check_page_limit,
    encode_cursor,
    store_cursor,
)
from retrieval_core.documents.models import Actor, StoreDefinition, StoreInfo
from retrieval_core.documents.prepare import check_store_name
from retrieval_core.documents.store_definitions import inspected, redefined, store_info
from retrieval_core.documents.writer import again_after_conflict
from retrieval_core.exceptions import ConflictError, StoreNotFoundError
from retrieval_core.grants import OPEN_GRANT, Grant


class StoreOperations:
    """Stores: scope admin to change, read to see."""

    retrieval: RetrievalService
    # The chunking of a store without its own (CHUNK_SIZE, CHUNK_OVERLAP, fixed).
    deployment_chunking: Chunking

    def put_store(
        self,
        name: str,
        definition: StoreDefinition,
        grant: Grant = OPEN_GRANT,
        actor: Actor | None = None,
    ) -> tuple[StoreInfo, bool]:
        """Create the store, or apply `definition` to it; True when created.

        The same definition again changes nothing. A change of `storage` or `text_search` is a
        ConflictError (409) naming the field; a `text_search` PostgreSQL does not know is a 422.
        `display_name` may change, but never to another store's name or display name (409).
        `resolve` and names outside the store-name rule are refused (422).
        """
        grant.require("admin", name)
        check_store_name(name)
        actor = acting(actor, grant)
        if definition.source is not None:
            return self._attach(name, definition, actor)
        return again_after_conflict(lambda: self._put_store(name, definition, actor))

    def _put_store(self, name: str, definition: StoreDefinition, actor: Actor) -> tuple[StoreInfo, bool]:
        with database_errors("writing the store"), self._connection() as conn, conn.transaction():
            store_sql.lock_store_names(conn)
            store = store_sql.find_store_named(conn, name, lock=True)
            if store is not None and store.source is not None:
                raise ConflictError.for_field(
                    "source",
                    f"store '{name}' is attached to a table; PUT it with its source block, or DELETE it",
                )
            created = store is None
            display_name = definition.display_name or (store.display_name if store else name)
            store_sql.check_names_free(conn, name, display_name, creating=created)
            text_search = store_sql.text_search_config(conn, definition.text_search)
            if store is None:
                embedder = self.retrieval.embedder
                store = store_sql.create_store(
                    conn,
                    name,
                    display_name,
                    embedder.model,
                    embedder.dimension,
                    definition.storage,
                    definition.allowed_metadata_keys,
                    text_search or "english",
                    definition.chunking.as_json() if definition.chunking is not None else None,
                )
                outcome = "created"
            else:
                store, changed = redefined(
                    conn, store, display_name, definition, text_search, self.deployment_chunking
                )
                outcome = "updated" if changed else "unchanged"
            audit_trail.record(conn, name, actor, AuditEntry("put_store", outcome))
            info = self._info(conn, store)
        return info, created

    def _attach(self, name: str, definition: StoreDefinition, actor: Actor) -> tuple[StoreInfo, bool]:
        """`put_store` of an attached store: the table of `definition.source`, inspected."""
        assert definition.source is not None
        embedder = self.retrieval.embedder
        with database_errors("attaching the store"), self._connection() as conn, conn.transaction():
            attached, created = attach_store(
                conn,
                name,
                definition.display_name,
                definition.source,
                embedder.model,
                embedder.dimension,
                definition.allowed_metadata_keys,
            )
            outcome = "created" if created else "unchanged"
            audit_trail.record(conn, name, actor, AuditEntry("attach_store", outcome))
            return self._info(conn, attached), created

    def get_store(self, name: str, grant: Grant = OPEN_GRANT) -> StoreInfo:
        """One store with its document and chunk counts; an attached one with its table inspected now."""
        grant.require("read", name)
        with database_errors("reading the store"), self._connection() as conn:
            store = self._store(conn, name)
            if store.source is not None:
                store = inspected(conn, store, self.retrieval.live_sources)
            return self._info(conn, store)

    def list_stores(
        self,
        prefix: str = "",
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
        grant: Grant = OPEN_GRANT,
    ) -> tuple[list[StoreInfo], str | None]:
        """The stores `grant` may read whose name starts with `prefix`, in name order (byte order), `limit`
        at most, with their counts; and the cursor of the next page (None on the last)."""
        grant.require_scope("read")
        check_page_limit(limit)
        after = store_cursor(cursor) if cursor else None
        with database_errors("listing stores"), self._connection() as conn:
            stores = store_sql.list_stores(conn, prefix, after, limit + 1, grant.stores)
            page = stores[:limit]
            counts = store_sql.store_counts(conn, [s.id for s in page])
        max_rows = self.retrieval.exact_search_max_rows
        infos = [store_info(s, counts.get(s.id, (0, 0)), max_rows) for s in page]
        return infos, (encode_cursor(page[-1].name) if len(stores) > limit else None)

    def every_store(
        self, prefix: str = "", grant: Grant = OPEN_GRANT, page: int = MAX_PAGE
    ) -> Iterator[StoreInfo]:
        """`list_stores` page after page, `page` stores a round trip: each store once, in name order."""
        cursor: str | None = None
        while True:
            infos, cursor = self.list_stores(prefix, page, cursor, grant)
            yield from infos
            if cursor is None:
                return

    def refresh_store(self, name: str, grant: Grant = OPEN_GRANT, actor: Actor | None = None) -> StoreInfo:
        """Inspect an attached store's table again (indexes, rows) and retire its cached answers.

        Scope admin. A store of our own has nothing to refresh: 409 (its writes retire answers themselves).
        """
        grant.require("admin", name)
        with database_errors("refreshing the store"), self._connection() as conn, conn.transaction():
            store = self._store(conn, name)
            if store.source is None:
                raise ConflictError.for_field(
                    "store", f"store '{name}' holds its own documents: its writes keep its answers current"
                )
            store = refresh_store(conn, store)
            audit_trail.record(conn, name, acting(actor, grant), AuditEntry("refresh_store", "refreshed"))
            return self._info(conn, store)

    def delete_store(self, name: str, grant: Grant = OPEN_GRANT, actor: Actor | None = None) -> None:
        """Drop the store with everything in it; its cached answers are never served again.

        One audit row for the store (its documents' rows are not written one by one)."""
        grant.require("admin", name)
        who = acting(actor, grant)
        again_after_conflict(lambda: self._delete_store(name, who))

    def _delete_store(self, name: str, actor: Actor) -> None:
        with database_errors("deleting the store"), self._connection() as conn, conn.transaction():
            store = self._store(conn, name)
            store_sql.drop_store(conn, store)
            audit_trail.record(conn, name, actor, AuditEntry("delete_store", "deleted"))

    # Helpers.

    def _connection(self) -> Any:
        return self.retrieval.database.connection()

    def _store(self, conn: Connection, name: str, lock: bool = False) -> Store:
        store = store_sql.find_store_named(conn, name, lock)
        if store is None:
            raise StoreNotFoundError(name)
        return store

    def _info(self, conn: Connection, store: Store) -> StoreInfo:
        counts = store_sql.store_counts(conn, [store.id])
        return store_info(store, counts.get(store.id, (0, 0)), self.retrieval.exact_search_max_rows)


def acting(actor: Actor | None, grant: Grant) -> Actor:
    """`actor`, or by default the grant's name with no request id (callers that know the request pass one)."""
    return actor or Actor(grant.name)
