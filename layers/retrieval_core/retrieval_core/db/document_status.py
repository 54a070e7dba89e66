"""The SQL of each source's last outcome (`document_status`) and each store's counts (`ingestion_counts`).

Rows are keyed by store id, shared by every store (migration 17). Every value is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store

OutcomeName = Literal["ok", "failed", "skipped"]
Change = Literal["created", "updated", "unchanged"]
COUNTED = ("scanned", "added", "updated", "unchanged", "deleted", "failed", "skipped")
# The count an ok outcome adds to, by its change (failed and skipped count as themselves).
_COUNTED_AS = {"created": "added", "updated": "updated", "unchanged": "unchanged"}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the last write of a source came to: ok with its change, or failed or skipped with the error's
    code and message."""

    document_id: str
    outcome: OutcomeName
    change: Change | None = None  # ok only
    code: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class StatusRow:
    """A source's last outcome as stored."""

    document_id: str
    outcome: OutcomeName
    change: Change | None
    code: str | None
    message: str | None
    written_by: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class Counts:
    """A store's cumulative counts of sources, and how many sources' last outcome is each outcome now."""

    scanned: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    skipped: int = 0
    since: datetime | None = None
    last_at: datetime | None = None
    now_ok: int = 0
    now_failed: int = 0
    now_skipped: int = 0


def record_outcomes(conn: Connection, store: Store, outcomes: Sequence[Outcome], written_by: str) -> None:
    """Upsert each source's last outcome and add them to the store's counts (rows in id order, then the
    counts' row: two transactions recording at once take their locks in the same order)."""
    if not outcomes:
        return
    latest = {o.document_id: o for o in outcomes}
    with conn.cursor() as cur:
        cur.executemany(
            """INSERT INTO document_status (store_id, document_id, outcome, change, code, message, written_by)
               VALUES (%s, %s, %s, %s, %s, %s, %s)
               ON CONFLICT (store_id, document_id) DO UPDATE SET outcome = EXCLUDED.outcome,
                   change = EXCLUDED.change, code = EXCLUDED.code, message = EXCLUDED.message,
                   written_by = EXCLUDED.written_by, at = now()""",
            [
                (store.id, o.document_id, o.outcome, o.change, o.code, o.message, written_by)
                for _, o in sorted(latest.items())
            ],
        )
    added = {name: 0 for name in COUNTED}
    for o in outcomes:
        added["scanned"] += 1
        added[_COUNTED_AS.get(o.change or "", o.outcome)] += 1
    _add_counts(conn, store, added)


def forget(conn: Connection, store: Store, document_ids: Sequence[str], deleted: bool) -> None:
    """Remove the outcomes of deleted sources (and records); `deleted` counts one deletion."""
    conn.execute(
        "DELETE FROM document_status WHERE store_id = %s AND document_id = ANY(%s::text[])",
        (store.id, sorted(set(document_ids))),
    )
    if deleted:
        _add_counts(conn, store, {"deleted": 1})


def _add_counts(conn: Connection, store: Store, added: dict[str, int]) -> None:
    names = [n for n in COUNTED if added.get(n)]
    if not names:
        return
    # The column names come from COUNTED, never from input; the values are parameters.
    columns = ", ".join(names)
    updates = ", ".join(f"{n} = ingestion_counts.{n} + EXCLUDED.{n}" for n in names)
    placeholders = ", ".join(["%s"] * len(names))
    conn.execute(
        f"""INSERT INTO ingestion_counts (store_id, {columns}) VALUES (%s, {placeholders})
            ON CONFLICT (store_id) DO UPDATE SET {updates}, last_at = now()""",  # noqa: S608
        (store.id, *(added[n] for n in names)),
    )


def list_outcomes(
    conn: Connection, store: Store, outcome: OutcomeName, prefix: str, after: str | None, limit: int
) -> list[StatusRow]:
    """Up to `limit` sources whose last outcome is `outcome`, id starting with `prefix`, after `after`,
    in byte order."""
    rows = conn.execute(
        """SELECT document_id, outcome, change, code, message, written_by, at FROM document_status
           WHERE store_id = %s AND outcome = %s AND starts_with(document_id, %s)
               AND (%s::text IS NULL OR document_id COLLATE "C" > %s)
           ORDER BY document_id COLLATE "C" LIMIT %s""",
        (store.id, outcome, prefix, after, after, limit),
    ).fetchall()
    return [StatusRow(*r) for r in rows]


def counts(conn: Connection, store: Store) -> Counts:
    """The store's counts (zeros when nothing was written since migration 17)."""
    row: Any = conn.execute(
        f"""SELECT {", ".join(COUNTED)}, since, last_at FROM ingestion_counts WHERE store_id = %s""",  # noqa: S608
        (store.id,),
    ).fetchone()
    now = dict(
        conn.execute(
            "SELECT outcome, count(*) FROM document_status WHERE store_id = %s GROUP BY outcome", (store.id,)
        ).fetchall()
    )
    current = {
        "now_ok": now.get("ok", 0),
        "now_failed": now.get("failed", 0),
        "now_skipped": now.get("skipped", 0),
    }
    if row is None:
        return Counts(**current)
    return Counts(*row, **current)
