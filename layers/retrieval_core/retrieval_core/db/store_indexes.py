"""The indexes no migration builds: large stores' HNSW indexes, and an upgraded database's shared ones.

Creating a store is one row (db/stores.py). What a store's search needs beyond the shared indexes is
an HNSW index of its own once it is large: `maintain` builds one for each of the `most` largest stores
holding at least `min_chunks` chunks, and drops the others (smaller stores are searched exactly). On a
database that had chunks when migration 12 ran, it also builds the two shared indexes and then drops
what each store had of its own: the partial GIN indexes and the keyword search functions.

Everything is one statement at a time, outside transactions, CONCURRENTLY: no tenant's reads or writes
wait for it, and a run cut short (a time budget, a failure) leaves nothing half-done that the next run
does not finish: it plans again from the catalog. A failed concurrent build leaves an invalid index,
which the next run drops and builds again. Runs take a session advisory lock: one at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from psycopg import sql

from retrieval_core.db import audit
from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import (
    HNSW_INDEX_PREFIX,
    STORE_COLUMNS,
    Store,
    create_index_statement,
    store_from_row,
)
from retrieval_core.settings import Settings

logger = logging.getLogger(__name__)

# The shared, store-scoped indexes of migration 12, by name.
# fastupdate off: a pending list would be read by every store's searches (migration 14 says why).
SHARED_INDEXES = {
    "keyword_chunks_scope_gin": (
        "ON keyword_chunks USING gin (keyword_scope(store_id, tsv)) WITH (fastupdate = off)"
    ),
    "chunks_metadata_scope_gin": (
        "ON chunks USING gin (chunk_metadata_scope(store_id, metadata) jsonb_path_ops)"
        " WITH (fastupdate = off)"
    ),
}
# What stores had of their own before migration 12 (with the plain metadata index they made redundant).
_LEGACY_INDEXES = ("chunks_metadata_gin_store_%", "keyword_chunks_tsv_gin_store_%", "chunks_metadata_gin")
_LEGACY_FUNCTIONS = ("keyword_hits_store_%", "create_keyword_search")
# What tells searches that the shared indexes serve them (migration 14).
_READY = sql.SQL(
    "CREATE OR REPLACE FUNCTION shared_indexes_ready() RETURNS boolean"
    " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT true'"
)
# pg_try_advisory_lock key of a maintenance run (any constant).
_MAINTENANCE_LOCK = 7_351_902_116


@dataclass(frozen=True)
class IndexPolicy:
    """Which stores get an HNSW index: the `most` largest of those holding `min_chunks` or more (both from
    the settings: `from_settings`)."""

    min_chunks: int
    most: int

    @classmethod
    def from_settings(cls, settings: Settings) -> IndexPolicy:
        """STORE_INDEX_MIN_CHUNKS and STORE_INDEXES_MAX."""
        return cls(settings.store_index_min_chunks, settings.store_indexes_max)


@dataclass(frozen=True)
class Step:
    """One statement of a run, and what it does in words."""

    action: str
    statement: sql.Composed


@dataclass
class MaintenanceRun:
    """What a run did: the steps done, those that failed (with why), and those left for the next run."""

    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    busy: bool = False  # another run held the lock: this one did nothing
    audit_rows_deleted: int = 0  # the audit trail's retention, run after the index steps


def planned_steps(conn: Connection, policy: IndexPolicy) -> list[Step]:
    """What the catalog says is left to do, in the order to do it."""
    indexes = _indexes(conn)
    steps = _shared_steps(conn, indexes)
    if not steps:
        steps += _legacy_steps(conn, indexes)
    return steps + _hnsw_steps(conn, indexes, policy)


def maintain(
    conn: Connection,
    policy: IndexPolicy,
    deadline: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> MaintenanceRun:
    """Carry out `planned_steps` on `conn` (autocommit, used by nothing else meanwhile) until none is left
    or `deadline` (time.monotonic()) passes; each statement may run until the deadline. A step that fails
    is logged and not tried again in this run."""
    run = MaintenanceRun()
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (_MAINTENANCE_LOCK,)).fetchone()
    if row is None or not row[0]:
        run.busy = True
        return run
    try:
        _carry_out(conn, policy, deadline, progress or (lambda _: None), run)
    finally:
        conn.execute("RESET statement_timeout")
        conn.execute("SELECT pg_advisory_unlock(%s)", (_MAINTENANCE_LOCK,))
    return run


def _carry_out(
    conn: Connection,
    policy: IndexPolicy,
    deadline: float | None,
    progress: Callable[[str], None],
    run: MaintenanceRun,
) -> None:
    tried: set[str] = set()
    while True:
        steps = [s for s in planned_steps(conn, policy) if s.action not in tried]
        if not steps:
            return
        left_s = None if deadline is None else deadline - time.monotonic()
        if left_s is not None and left_s <= 1:
            run.left = [s.action for s in steps]
            return
        step = steps[0]
        tried.add(step.action)
        # 0 is no limit; else the statement is cancelled at the deadline (an index build left invalid).
        timeout_ms = "0" if left_s is None else str(int(left_s * 1000))
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout_ms,))
        progress(step.action)
        started = time.monotonic()
        try:
            conn.execute(step.statement)
        except Exception as exc:  # noqa: BLE001 - one failed step must not stop the others
            logger.warning("store index maintenance: %s failed: %s", step.action, exc)
            run.failed.append(f"{step.action}: {exc}")
            continue
        logger.info("store index maintenance: %s (%.1f s)", step.action, time.monotonic() - started)
        run.done.append(step.action)


def _indexes(conn: Connection) -> dict[str, bool]:
    """Every index of chunks and keyword_chunks in the current schema, with whether it is valid."""
    rows = conn.execute(
        """SELECT c.relname, i.indisvalid FROM pg_index i
           JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
           WHERE t.relnamespace = current_schema()::regnamespace
               AND t.relname IN ('chunks', 'keyword_chunks')"""
    ).fetchall()
    return {str(name): bool(valid) for name, valid in rows}


def _drop_index(name: str) -> Step:
    return Step(
        f"drop index {name}",
        sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)),
    )


def _shared_steps(conn: Connection, indexes: dict[str, bool]) -> list[Step]:
    """Builds of the shared indexes; once both are valid, the function telling searches so (migration 14)."""
    steps = []
    if all(indexes.get(name) for name in SHARED_INDEXES):
        row = conn.execute("SELECT shared_indexes_ready()").fetchone()
        if row is None or not row[0]:
            steps.append(Step("mark the shared indexes ready", _READY.format()))
        return steps
    for name, definition in SHARED_INDEXES.items():
        if indexes.get(name) is False:
            steps.append(_drop_index(name))
        if not indexes.get(name):
            # `definition` is fixed text of this module.
            statement = sql.SQL("CREATE INDEX CONCURRENTLY {} " + definition).format(sql.Identifier(name))
            steps.append(Step(f"build shared index {name}", statement))
    return steps


def _legacy_steps(conn: Connection, indexes: dict[str, bool]) -> list[Step]:
    """Drops of what stores had of their own before the shared indexes (run once those are valid)."""
    steps = [
        _drop_index(name)
        for name in sorted(indexes)
        if any(_like(name, pattern) for pattern in _LEGACY_INDEXES)
    ]
    functions = conn.execute(
        """SELECT p.oid::regprocedure::text FROM pg_proc p
           WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE ANY(%s)
           ORDER BY 1""",
        (list(_LEGACY_FUNCTIONS),),
    ).fetchall()
    for (signature,) in functions:
        # A regprocedure's text is a quoted, argument-typed name from the catalog, not caller input.
        statement = sql.SQL("DROP FUNCTION IF EXISTS " + signature)
        steps.append(Step(f"drop function {signature}", statement.format()))
    return steps


def _like(name: str, pattern: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("%") else name == pattern


def _hnsw_steps(conn: Connection, indexes: dict[str, bool], policy: IndexPolicy) -> list[Step]:
    """Drops of invalid and unwanted HNSW indexes first (the count never passes `policy.most`), then builds
    for the wanted stores without one, the largest first."""
    wanted = indexed_stores(conn, policy)
    have = {int(name[len(HNSW_INDEX_PREFIX) :]): valid for name, valid in indexes.items() if _is_hnsw(name)}
    drops = [_drop_index(f"{HNSW_INDEX_PREFIX}{i}") for i in sorted(have) if not have[i] or i not in wanted]
    builds = [
        Step(
            f"build HNSW index of store {store.name} ({store.chunk_count} chunks)",
            create_index_statement(store),
        )
        for store in wanted.values()
        if not have.get(store.id)
    ]
    return drops + builds


def _is_hnsw(name: str) -> bool:
    return name.startswith(HNSW_INDEX_PREFIX) and name[len(HNSW_INDEX_PREFIX) :].isdigit()


def indexed_stores(conn: Connection, policy: IndexPolicy) -> dict[int, Store]:
    """The stores that should have an HNSW index, by id, largest first."""
    rows = conn.execute(
        f"""SELECT {STORE_COLUMNS} FROM stores
            WHERE source IS NULL AND chunk_count >= %s ORDER BY chunk_count DESC, id LIMIT %s""",  # noqa: S608
        (max(policy.min_chunks, 1), max(policy.most, 0)),
    ).fetchall()
    stores = [store_from_row(r) for r in rows]
    return {store.id: store for store in stores}


def maintain_database(
    conninfo: str,
    policy: IndexPolicy,
    connect_timeout_s: int,
    time_budget_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    audit_retention_days: int | None = None,
) -> MaintenanceRun:
    """`maintain` on a connection of its own to `conninfo`, for at most `time_budget_s` (None: no limit);
    then, with `audit_retention_days`, delete the older audit rows (db/audit.py), given at least a second
    even when the index steps took the whole budget."""
    import psycopg

    deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=connect_timeout_s) as conn:
        run = maintain(conn, policy, deadline, progress)
        if audit_retention_days is not None:
            prune_by = None if deadline is None else max(deadline, time.monotonic() + 1.0)
            run.audit_rows_deleted = audit.prune(conn, audit_retention_days, prune_by)
        return run
