"""The SQL of store definitions: create, find, list, change, drop, version. Values are bound parameters.

Creating or dropping a store is a row of `stores`, never DDL: the keyword and metadata indexes are
shared by every store (migration 12), and the HNSW indexes of large stores are built and dropped by
db/store_indexes.py, outside requests. A store's id and dimension are composed into that index's DDL
with `sql.Literal`: both come from our own `stores` table, never from a request.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from retrieval_core.db.attached_source import AttachedSource
from retrieval_core.db.connection import Connection
from retrieval_core.db.storage import STORAGE_TYPES, Storage
from retrieval_core.exceptions import ConflictError, InvalidRequestError, StoreNotFoundError


@dataclass(frozen=True, slots=True)
class Store:
    """A row of `stores`."""

    id: int
    name: str
    display_name: str
    embedding_model: str
    dimension: int
    version: int
    storage: Storage = "vector"
    # The store definition's own allow-list of metadata keys (None: every key the service allows).
    allowed_metadata_keys: tuple[str, ...] | None = None
    # How many chunks the store holds (kept by triggers on chunks; read with the row).
    chunk_count: int = 0
    # The PostgreSQL text search configuration of its keyword index (fixed at creation).
    text_search: str = "english"
    # Every chunk has its BM25 weights (false only until the backfill of migration 7 has passed).
    keyword_ready: bool = True
    # An attached store: the table or view it reads instead of chunks (migration 10); None: its own chunks.
    source: AttachedSource | None = None
    # It has an HNSW index of its own (db/store_indexes.py builds them for large stores); without one,
    # its nearest chunks come from an exact scan.
    vector_index: bool = False
    # The shared keyword and metadata indexes are valid (false only while an upgraded database builds
    # them: searches then read the per-store indexes the database still has).
    scoped_indexes: bool = True
    # The store's own chunking as (strategy, size, overlap) (stored as JSON, migration 19); None: the
    # deployment's. A tuple, so that the row stays hashable (search plans are cached by it).
    chunking: tuple[str, int, int] | None = None


# The row of `stores`, then INDEX_COLUMNS: whether the store's HNSW index exists (a name lookup in the
# catalog's cache; an index a failed concurrent build left invalid is one the planner skips, so the
# search is exact all the same), and shared_indexes_ready(), a constant (migration 14).
ROW_COLUMNS = (
    "id, name, display_name, embedding_model, dimension, version, storage, allowed_metadata_keys,"
    " chunk_count, text_search::text, keyword_ready, source, chunking"
)
INDEX_COLUMNS = (
    "to_regclass('chunks_embedding_hnsw_store_' || id) IS NOT NULL AS vector_index,"
    " shared_indexes_ready() AS scoped_indexes"
)
STORE_COLUMNS = f"{ROW_COLUMNS}, {INDEX_COLUMNS}"
# The store named `%(n)s`, by name first, else by display name (the unique index on name and
# `stores_display_name`, migration 13).
STORE_BY_NAME = (
    "FROM stores WHERE name = %(n)s OR display_name = %(n)s ORDER BY name = %(n)s DESC, id LIMIT 1"
)


def store_from_row(row: tuple[Any, ...]) -> Store:
    (
        id_,
        name,
        display_name,
        model,
        dimension,
        version,
        storage,
        allowed,
        chunk_count,
        text_search,
        ready,
        source,
        chunking,
        vector_index,
        scoped_indexes,
    ) = row
    keys = tuple(allowed) if allowed is not None else None
    return Store(
        id_,
        name,
        display_name,
        model,
        dimension,
        version,
        storage,
        keys,
        int(chunk_count),
        text_search,
        ready,
        AttachedSource.from_json(source) if source is not None else None,
        bool(vector_index),
        bool(scoped_indexes),
        (chunking["strategy"], int(chunking["size"]), int(chunking["overlap"])) if chunking else None,
    )


def find_store(conn: Connection, name: str) -> Store | None:
    """The store called `name`, or whose display name is `name`."""
    row = conn.execute(
        f"SELECT {STORE_COLUMNS} {STORE_BY_NAME}",
        {"n": name},
    ).fetchone()
    return store_from_row(row) if row else None


def list_stores(
    conn: Connection, prefix: str, after: str | None, limit: int, names: Collection[str] | None = None
) -> list[Store]:
    """Up to `limit` stores whose name starts with `prefix` and sorts after `after`, in byte order of the
    name; with `names`, only stores of those names (a grant's)."""
    query, params = store_page_query(prefix, after, limit, names)
    return [store_from_row(r) for r in conn.execute(query, params)]


def store_page_query(
    prefix: str, after: str | None, limit: int, names: Collection[str] | None = None
) -> tuple[sql.Composed, dict[str, Any]]:
    """The statement of `list_stores` and its parameters.

    Byte order (COLLATE "C") is the order of the index `stores_name_bytes` (migration 13), in which a
    prefix is the range [prefix, prefix_end(prefix)): one range scan of that index reads the page.
    Each condition is there only when it restricts, so that a prepared (generic) plan keeps its bounds.
    """
    conditions: list[sql.Composable] = []
    params: dict[str, Any] = {"limit": limit}
    end = prefix_end(prefix)
    if prefix:
        conditions.append(sql.SQL('name COLLATE "C" >= %(prefix)s'))
        params["prefix"] = prefix
    if end is not None:
        conditions.append(sql.SQL('name COLLATE "C" < %(end)s'))
        params["end"] = end
    if after is not None:
        conditions.append(sql.SQL('name COLLATE "C" > %(after)s'))
        params["after"] = after
    if names is not None:
        conditions.append(sql.SQL("name = ANY(%(names)s)"))
        params["names"] = sorted(names)
    where = sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions) if conditions else sql.SQL("")
    query = sql.SQL('SELECT {columns} FROM stores{where} ORDER BY name COLLATE "C" LIMIT %(limit)s').format(
        columns=sql.SQL(STORE_COLUMNS), where=where
    )
    return query, params


# The largest code point. Python orders str, and PostgreSQL UTF-8 text under COLLATE "C", by code point.
_LAST_CHARACTER = chr(0x10FFFF)


def prefix_end(prefix: str) -> str | None:
    """The least string after every string that starts with `prefix`, in code point order; None when
    there is none (an empty prefix, or one of U+10FFFF only)."""
    kept = prefix.rstrip(_LAST_CHARACTER)
    if not kept:
        return None
    following = ord(kept[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # UTF-8 cannot encode a surrogate
        following = 0xE000
    return kept[:-1] + chr(following)


def embedding_expression(store: Store) -> sql.Composed:
    """`embedding::vector(dim)` or `embedding::halfvec(dim)`: what the store's index is built on.

    Queries must order by exactly this expression for the planner to use the index.
    """
    if store.storage not in STORAGE_TYPES:
        raise ValueError(f"unknown storage {store.storage!r}")
    return sql.SQL("embedding::{type}({dim})").format(
        type=sql.SQL(store.storage), dim=sql.Literal(store.dimension)
    )


def create_store(
    conn: Connection,
    name: str,
    display_name: str,
    embedding_model: str,
    dimension: int,
    storage: Storage = "vector",
    allowed_metadata_keys: Sequence[str] | None = None,
    text_search: str = "english",
    chunking: dict[str, Any] | None = None,
) -> Store:
    """Create a store (one row, no DDL); return the existing one if it already exists.

    Every creator comes here, so the rule of `check_names_free` holds for all of them (409 naming the
    clash). `text_search` must name a configuration PostgreSQL has (`text_search_config` checks that).
    """
    keys = list(allowed_metadata_keys) if allowed_metadata_keys is not None else None
    with conn.transaction():
        lock_store_names(conn)
        existing = find_store_named(conn, name)
        if existing is not None:
            return existing
        check_names_free(conn, name, display_name)
        row = conn.execute(
            f"""INSERT INTO stores (name, display_name, embedding_model, dimension, storage,
                    allowed_metadata_keys, text_search, chunking)
                VALUES (%s, %s, %s, %s, %s, %s, %s::regconfig, %s) ON CONFLICT (name) DO NOTHING
                RETURNING {STORE_COLUMNS}""",  # noqa: S608
            (
                name,
                display_name,
                embedding_model,
                dimension,
                storage,
                keys,
                text_search,
                Jsonb(chunking) if chunking is not None else None,
            ),
        ).fetchone()
        if row is None:
            existing = find_store(conn, name)
            assert existing is not None
            return existing
        return store_from_row(row)


# A configuration name, optionally schema-qualified, as an unquoted identifier.
_CONFIG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}(\.[A-Za-z_][A-Za-z0-9_$]{0,62})?\Z")


def text_search_config(conn: Connection, name: str | None) -> str | None:
    """The canonical name of the text search configuration `name` (None for None).

    Raises InvalidRequestError (422, field textSearch) when PostgreSQL has no such configuration.
    """
    if name is None:
        return None
    row = None
    if _CONFIG_NAME.match(name):
        # Unquoted identifiers fold to lower case, as in SQL; without a schema, the one on the search path.
        schema, _, config = name.lower().rpartition(".")
        row = conn.execute(
            """SELECT c.oid::regconfig::text FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace
               WHERE c.cfgname = %s AND (n.nspname = %s OR (%s = '' AND pg_ts_config_is_visible(c.oid)))""",
            (config, schema, schema),
        ).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute("SELECT cfgname FROM pg_ts_config ORDER BY cfgname")]
        raise InvalidRequestError.for_field(
            "textSearch",
            f"'{name}' is not a text search configuration of this PostgreSQL; it has: {', '.join(known)}",
            "unknown_text_search",
        )
    return str(row[0])


def create_index_statement(store: Store) -> sql.Composed:
    """CREATE INDEX CONCURRENTLY of the store's partial HNSW index (cosine distance on
    `embedding_expression`); outside a transaction."""
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY {index} ON chunks USING hnsw (({expr}) {ops}) WHERE store_id = {store_id}"
    ).format(
        index=sql.Identifier(index_name(store.id)),
        expr=embedding_expression(store),
        ops=sql.SQL(f"{store.storage}_cosine_ops"),
        store_id=sql.Literal(store.id),
    )


# The name of a store's HNSW index: `chunks_embedding_hnsw_store_<id>` (STORE_COLUMNS reads it too).
HNSW_INDEX_PREFIX = "chunks_embedding_hnsw_store_"


def index_name(store_id: int) -> str:
    """Name of the HNSW index of the store whose id is `store_id`."""
    return f"{HNSW_INDEX_PREFIX}{store_id}"


def drop_store(conn: Connection, store: Store) -> None:
    """Delete a store with all its documents and chunks (its HNSW index, if any, goes with the next
    maintenance run: DROP INDEX would lock `chunks` for every store), once the writes under way ended.
    StoreNotFoundError when a concurrent request deleted it first."""
    lock_store(conn, store, exclusive=True)
    if conn.execute("DELETE FROM stores WHERE id = %s RETURNING id", (store.id,)).fetchone() is None:
        raise StoreNotFoundError(store.name)


def bump_version(conn: Connection, store: Store) -> int:
    """Mark the store as changed, so answers cached for an older version are never served."""
    row = conn.execute(
        "UPDATE stores SET version = nextval('store_versions'), updated_at = now()"
        " WHERE id = %s RETURNING version",
        (store.id,),
    ).fetchone()
    if row is None:  # deleted meanwhile (not under `find_store_named(lock=True)`, which keeps it)
        raise StoreNotFoundError(store.name)
    return int(row[0])


def count_chunks(conn: Connection, store: Store) -> int:
    """How many chunks the store holds."""
    row = conn.execute("SELECT count(*) FROM chunks WHERE store_id = %s", (store.id,)).fetchone()
    return int(row[0]) if row else 0


# pg_advisory_xact_lock key serialising changes of store names and display names (any constant).
_STORE_NAMES_LOCK = 7_351_902_115


def find_store_named(conn: Connection, name: str, lock: bool = False) -> Store | None:
    """The store whose canonical name is exactly `name` (display names are not looked at).

    `lock`: hold it against deletion until the transaction ends (`lock_store`, shared): a concurrent
    DELETE of the store waits for the transaction instead of deleting what it writes into, and a store
    deleted before the lock was granted is not found. Writers of a store's documents, sources and
    definition take it first.
    """
    while True:
        row = conn.execute(f"SELECT {STORE_COLUMNS} FROM stores WHERE name = %s", (name,)).fetchone()  # noqa: S608
        if row is None or not lock:
            return store_from_row(row) if row else None
        store = store_from_row(row)
        lock_store(conn, store, exclusive=False)
        again = conn.execute(f"SELECT {STORE_COLUMNS} FROM stores WHERE name = %s", (name,)).fetchone()  # noqa: S608
        if again is None or again[0] == store.id:
            return store_from_row(again) if again else None
        # Deleted and created again while the lock was awaited: lock the new one.


# The advisory-lock key (with the store's id) of a store against its deletion. Document and source keys
# (db/documents.py `lock`) are 0 to 255: never this one.
_STORE_LOCK = -1


def lock_store(conn: Connection, store: Store, exclusive: bool) -> None:
    """Hold the store until the transaction ends: shared by its writers, exclusive by its deletion.

    An advisory lock, not a row lock: PostgreSQL queues a lock request behind a waiting one it conflicts
    with, so a DELETE waits for the writes under way, not for every write still to come.
    """
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    conn.execute(f"SELECT {function}(%s, %s)", (store.id, _STORE_LOCK))


def lock_store_names(conn: Connection) -> None:
    """Serialise name and display-name changes until the transaction ends (two PUTs cannot both win)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_STORE_NAMES_LOCK,))


def check_names_free(conn: Connection, name: str, display_name: str, creating: bool = True) -> None:
    """Refuse (ConflictError, 409) names that would make a name designate two stores.

    Lookups take a store's name before its display name, so a display name equal to another store's
    name or display name, or a name equal to another store's display name, would hide one store behind
    another. Call with `lock_store_names` held, so two concurrent creators cannot both pass.
    `creating`: False when `name` exists already (only its new display name is then checked).
    """
    if creating and name_taken(conn, name, except_store=name):
        raise ConflictError.for_field("name", f"'{name}' is already the display name of another store")
    if name_taken(conn, display_name, except_store=name):
        raise ConflictError.for_field(
            "displayName", f"'{display_name}' is already the name or display name of another store"
        )


# Served by the unique index on name and `stores_display_name` (migration 13), OR-ed as bitmaps.
NAME_TAKEN = (
    "SELECT 1 FROM stores WHERE (name = %(n)s OR display_name = %(n)s) AND name <> %(except)s LIMIT 1"
)


def name_taken(conn: Connection, name: str, except_store: str) -> bool:
    """Whether a store other than `except_store` is called `name` or shows it as its display name."""
    return conn.execute(NAME_TAKEN, {"n": name, "except": except_store}).fetchone() is not None


def update_store(
    conn: Connection,
    store: Store,
    display_name: str,
    allowed_metadata_keys: Sequence[str] | None,
    chunking: dict[str, Any] | None = None,
) -> Store:
    """Set the store's display name, allowed metadata keys and, when given, its own chunking."""
    keys = list(allowed_metadata_keys) if allowed_metadata_keys is not None else None
    row = conn.execute(
        f"""UPDATE stores SET display_name = %s, allowed_metadata_keys = %s,
                chunking = coalesce(%s, chunking), updated_at = now()
            WHERE id = %s RETURNING {STORE_COLUMNS}""",  # noqa: S608
        (display_name, keys, Jsonb(chunking) if chunking is not None else None, store.id),
    ).fetchone()
    if row is None:
        raise StoreNotFoundError(store.name)
    return store_from_row(row)


def store_counts(conn: Connection, store_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(documents, chunks) of each store in `store_ids` (stores without documents are absent)."""
    rows = conn.execute(
        """SELECT store_id, count(*), coalesce(sum(chunk_count), 0) FROM documents
           WHERE store_id = ANY(%s::int[]) GROUP BY store_id""",
        (list(store_ids),),
    ).fetchall()
    return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}
