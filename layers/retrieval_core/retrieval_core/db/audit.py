"""The SQL of the audit trail: rows written in the transaction of each change, and their retention.

Writers call `record` inside the transaction that makes the change, so a change rolled back leaves no
row. `prune` runs outside requests, at the end of the store maintenance (db/store_indexes.py: the scheduled
MigrateFunction, `retrieval index-stores`, `retrieval serve`), and deletes the rows older than the
retention in bounded batches.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from retrieval_core.db.connection import Connection

AuditAction = Literal[
    "put_store",
    "attach_store",
    "refresh_store",
    "delete_store",
    "put_document",
    "delete_document",
    "put_metadata",
]
PRUNE_BATCH = 5_000  # rows one DELETE of `prune` takes: short statements, short locks


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One row to write: what happened to which document (None: the store itself)."""

    action: AuditAction
    outcome: str
    document_id: str | None = None


def record(
    conn: Connection, store: str, credential: str, request_id: str | None, entries: Sequence[AuditEntry]
) -> None:
    """Write one row per entry, all with the same credential, store, request id and time (the
    transaction's). Call in the transaction of the change."""
    if not entries:
        return
    conn.execute(
        """INSERT INTO audit_log (credential, store, request_id, document_id, action, outcome)
           SELECT %s, %s, %s, e.document_id, e.action, e.outcome
           FROM unnest(%s::text[], %s::text[], %s::text[]) AS e(document_id, action, outcome)""",
        (
            credential,
            store,
            request_id,
            [e.document_id for e in entries],
            [e.action for e in entries],
            [e.outcome for e in entries],
        ),
    )


def prune(conn: Connection, retention_days: int, deadline: float | None = None) -> int:
    """Delete the rows older than `retention_days`, PRUNE_BATCH per statement, until none is left or
    `deadline` (time.monotonic()) has passed; how many were deleted. `conn` in autocommit mode."""
    deleted = 0
    while deadline is None or time.monotonic() < deadline:
        count = conn.execute(
            """DELETE FROM audit_log WHERE id IN (
                   SELECT id FROM audit_log WHERE at < now() - make_interval(days => %s)
                   ORDER BY at LIMIT %s)""",
            (retention_days, PRUNE_BATCH),
        ).rowcount
        deleted += count
        if count < PRUNE_BATCH:
            break
    return deleted
