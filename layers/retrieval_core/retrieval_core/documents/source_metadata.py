"""Sidecar metadata applied to a source's documents without re-embedding them (S3 events, sync).

The document's metadata is layered: the file's own, then the sidecar's, then the writer's keys.
"""

from __future__ import annotations

from typing import Any

from retrieval_core.db import documents as sql
from retrieval_core.db import stores as store_sql
from retrieval_core.db.audit import AuditEntry
from retrieval_core.db.errors import database_errors
from retrieval_core.documents import audit_trail
from retrieval_core.documents.models import Actor, Sequence, StoreDefinition
from retrieval_core.documents.prepare import newer_sequencer
from retrieval_core.documents.writer import SourceWriter

_ABSENT = object()


def apply_sidecar(
    writer: SourceWriter,
    store: str,
    source_id: str,
    metadata: dict[str, Any] | None,
    sequence: Sequence | None,
    create: StoreDefinition | None,
    actor: Actor,
) -> int:
    """`DocumentService.put_source_metadata` in one transaction; how many documents changed."""
    changed: list[str] = []
    database = writer.retrieval.database
    with database_errors("writing source metadata"), database.connection() as conn, conn.transaction():
        found = writer.store_for_write(conn, store, create, actor)
        sql.lock(conn, found, [sql.source_lock_key(source_id)])
        if sequence is not None:
            if not newer_sequencer(sequence.sequencer, sql.applied_sequencer(conn, found, sequence.key)):
                audit_trail.record(conn, found.name, actor, AuditEntry("put_metadata", "stale", source_id))
                return 0
            sql.record_sequencer(conn, found, sequence.key, sequence.sequencer, metadata is None)
        previous = sql.sidecar_metadata(conn, found, source_id)
        sql.set_sidecar_metadata(conn, found, source_id, metadata)
        ids = sql.source_document_ids(conn, found, source_id)
        sql.lock(conn, found, ids)
        for state in sql.document_states(conn, found, ids).values():
            new = _with_sidecar(state, previous, metadata)
            if new == state.metadata:
                continue
            # A chunk's own keys (its block's, the title) are those the document does not hold.
            updated = [
                {**new, **{k: v for k, v in m.items() if state.metadata.get(k, _ABSENT) != v}}
                for m in sql.chunk_metadata(conn, found, state.id)
            ]
            sql.update_metadata(
                conn, found, state.id, state.source, None, new, updated, written_by=actor.credential
            )
            changed.append(state.id)
        audit_trail.record(conn, found.name, actor, *audit_trail.metadata_entries(source_id, changed))
        if changed:
            store_sql.bump_version(conn, found)
        return len(changed)


def _with_sidecar(
    state: sql.DocumentState, previous: dict[str, Any] | None, sidecar: dict[str, Any] | None
) -> dict[str, Any]:
    """The document's metadata under a new sidecar: file, then sidecar, then the writer's own keys."""
    if state.file_metadata is not None and state.caller_metadata is not None:
        return {**state.file_metadata, **(sidecar or {}), **state.caller_metadata}
    # Written before the layers were kept: what remains when the old sidecar's keys are taken away.
    base = {k: v for k, v in state.metadata.items() if k not in (previous or {})}
    return {**base, **(sidecar or {})}
