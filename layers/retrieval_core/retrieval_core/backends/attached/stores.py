"""Attach a store to a table, and inspect it again (refresh). The store row lives in `stores`, as ours do."""

from __future__ import annotations

from dataclasses import replace

from psycopg.types.json import Jsonb

from retrieval_core.backends.attached.catalog import inspect_indexes, inspect_source, relation_oid
from retrieval_core.backends.attached.definition import SourceRequest, same_request
from retrieval_core.backends.attached.features import relation_name
from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import (
    STORE_COLUMNS,
    Store,
    bump_version,
    check_names_free,
    find_store_named,
    lock_store_names,
    store_from_row,
)
from retrieval_core.exceptions import ConflictError


def attach_store(
    conn: Connection,
    name: str,
    display_name: str | None,
    request: SourceRequest,
    service_model: str,
    service_dimension: int,
    allowed_metadata_keys: tuple[str, ...] | None = None,
) -> tuple[Store, bool]:
    """Create store `name` over `request`'s relation (True), or find it already so attached (False).

    Nothing is created when the source does not check out (UnusableSourceError, 422) or the name is
    taken by another definition (ConflictError, 409). The table itself is only read.
    """
    with conn.transaction():
        lock_store_names(conn)
        existing = find_store_named(conn, name)
        if existing is not None:
            if existing.source is None:
                raise ConflictError.for_field(
                    "source", f"store '{name}' holds its own documents; attach the table as another store"
                )
            same = (
                same_request(existing.source, request)
                and allowed_metadata_keys == existing.allowed_metadata_keys
            )
            if not same or display_name not in (None, existing.display_name):
                raise ConflictError.for_field(
                    "source",
                    f"store '{name}' is attached to {relation_name(existing.source)} with another "
                    "definition; DELETE it and PUT it again to change it",
                )
            return existing, False
        shown = display_name or name
        check_names_free(conn, name, shown)
        source = inspect_source(conn, request, service_model, service_dimension)
        row = conn.execute(
            f"""INSERT INTO stores (
                    name, display_name, embedding_model, dimension, storage, source, text_search,
                    allowed_metadata_keys)
                VALUES (%s, %s, %s, %s, %s, %s, %s::regconfig, %s) RETURNING {STORE_COLUMNS}""",  # noqa: S608
            (
                name,
                shown,
                source.embedding_model,
                source.dimension,
                source.vector_type,
                Jsonb(source.to_json()),
                source.text_search,
                list(allowed_metadata_keys) if allowed_metadata_keys is not None else None,
            ),
        ).fetchone()
        assert row is not None
        return store_from_row(row), True


def refresh_store(conn: Connection, store: Store) -> Store:
    """Inspect the store's relation again (indexes, row count) and give it a new version, so that no
    answer cached before is served again. Its mapping stays as attached."""
    assert store.source is not None
    with conn.transaction():
        source = store.source
        oid = relation_oid(conn, source)
        checked = inspect_indexes(conn, source, oid)
        conn.execute("UPDATE stores SET source = %s WHERE id = %s", (Jsonb(checked.to_json()), store.id))
        version = bump_version(conn, store)
    return replace(store, source=checked, version=version)
