"""The audit rows of each kind of change, written in the change's own transaction (db/audit.py).

docs/security.md, "Audit trail", says what each action and outcome means.
"""

from __future__ import annotations

from retrieval_core.db import audit
from retrieval_core.db.audit import AuditEntry
from retrieval_core.db.connection import Connection
from retrieval_core.documents.models import Actor, SourceWrite


def record(conn: Connection, store: str, actor: Actor, *entries: AuditEntry) -> None:
    """Write `entries` as `actor`'s rows for `store` (call in the transaction of the change)."""
    audit.record(conn, store, actor.credential, actor.request_id, entries)


def write_entries(result: SourceWrite) -> list[AuditEntry]:
    """The rows of one source's write: each document's status, each record its row source no longer
    holds as deleted; a stale event (nothing applied) as one row for the source."""
    if result.stale:
        return [AuditEntry("put_document", "stale", result.source_id)]
    entries = [AuditEntry("put_document", d.status, d.document_id) for d in result.documents]
    return entries + [AuditEntry("delete_document", "deleted", r) for r in result.removed]


def delete_entries(source_id: str, deleted: list[str]) -> list[AuditEntry]:
    """One row per document deleted; one `not_found` row for `source_id` when there was none."""
    return [AuditEntry("delete_document", "deleted", d) for d in deleted] or [
        AuditEntry("delete_document", "not_found", source_id)
    ]


def metadata_entries(source_id: str, changed: list[str]) -> list[AuditEntry]:
    """One row per document a sidecar changed; one `unchanged` row for `source_id` when none changed."""
    return [AuditEntry("put_metadata", "updated", d) for d in changed] or [
        AuditEntry("put_metadata", "unchanged", source_id)
    ]
