"""A filter's SQL over `chunks`: which form of the predicate a store's indexes serve, and its parameters.

A store's metadata lookups read the GIN index shared by every store on
`chunk_metadata_scope(store_id, metadata)` (migration 12). While an upgraded database still builds it
(`Store.scoped_indexes` false), the plain form matches the store's old partial index instead.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store
from retrieval_core.filters.predicate import Predicate


def where_sql(store: Store, where: Predicate) -> str:
    """The predicate's SQL for a statement that finds the filter's rows through the shared metadata index
    (an exact scan, a count): its store-scoped form, where that index serves it. A statement checking
    the filter row by row (an HNSW scan, a keyword candidate) takes `where.sql`, which the planner
    estimates from the column's statistics."""
    return where.chunk_sql if store.scoped_indexes else where.sql


def where_params(store: Store, where: Predicate) -> dict[str, Any]:
    """The predicate's parameters, with the store id its scoped form names (`metadata_scope`)."""
    if store.scoped_indexes and where.scoped_sql is not None:
        return {**where.params, "metadata_scope": store.id}
    return where.params


def filters_clause(where_sql: str) -> sql.Composable:
    """` AND (<predicate>)`, or nothing for no predicate."""
    return sql.SQL(" AND ({})").format(sql.SQL(where_sql)) if where_sql else sql.SQL("")


def allow_bitmap_scans(conn: Connection) -> None:
    """Let the exact query reach its rows through the filter's index (SET LOCAL)."""
    conn.execute("SELECT set_config('enable_bitmapscan', 'on', true)")
