"""Answer `unchanged` before parsing: a source sent again as it was stored costs a hash and a few reads.

A write's source key (prepare.source_key: its bytes' hash, declared content type, file name and parse
options) is compared with the stored documents of that source before anything is parsed. When every one
of them was stored under that key and the service's current fingerprint, and the metadata the write would
give each (file, sidecar, caller) is what it holds, nothing would change: the write is answered
`unchanged` (audited and sequenced as any write) without parsing, chunking or embedding. Anything else,
a metadata change included, goes the whole way (`prepare.py`, `writer.py`), which applies it.
"""

from __future__ import annotations

from retrieval_core.db import documents as sql
from retrieval_core.db import stores as store_sql
from retrieval_core.db.documents import DocumentState
from retrieval_core.db.errors import database_errors
from retrieval_core.documents import audit_trail
from retrieval_core.documents.chunking import Chunking
from retrieval_core.documents.models import Actor, DocumentWrite, Sequence, SourceInput, SourceWrite
from retrieval_core.documents.prepare import fingerprint, newer_sequencer
from retrieval_core.documents.writer import SourceWriter, duplicates_of


def write_if_unchanged(
    writer: SourceWriter,
    store: str,
    source: SourceInput,
    key: str,
    source_sha256: str,
    chunking: Chunking,
    max_records: int | None,
    sequence: Sequence | None,
    actor: Actor,
) -> SourceWrite | None:
    """The `unchanged` answer when `source` would change nothing, decided in one short transaction under
    the source's locks (with `sequence`, recorded as applied); None when it must be parsed and written,
    and for an event older than the last applied (the whole way answers it `stale`).

    `key` is `prepare.source_key(source)`, `chunking` the store's.
    """
    database = writer.retrieval.database
    with database_errors("reading documents"), database.connection() as conn, conn.transaction():
        found = store_sql.find_store_named(conn, store, lock=True)
        if found is None or found.source is not None:
            return None  # created by the write, or an attached store's table: the whole way
        writer.check_model(found)
        sql.lock(conn, found, [sql.source_lock_key(source.source_id)])
        if sequence is not None and not newer_sequencer(
            sequence.sequencer, sql.applied_sequencer(conn, found, sequence.key)
        ):
            return None  # the whole way answers it as stale, as it always did
        ids = sql.source_document_ids(conn, found, source.source_id)
        if not ids or (max_records is not None and len(ids) > max_records):
            return None
        sql.lock(conn, found, ids)
        states = sql.document_states(conn, found, ids)
        sidecar = sql.sidecar_metadata(conn, found, source.source_id)
        model = writer.retrieval.embedder.model
        if not all(_would_stay(state, source, key, sidecar, chunking, model) for state in states.values()):
            return None
        if sequence is not None:
            sql.record_sequencer(conn, found, sequence.key, sequence.sequencer, False)
        others = duplicates_of(conn, found, {i: state.content_sha256 for i, state in states.items()})
        first = next(iter(states.values()))
        result = SourceWrite(
            source.source_id,
            first.content_type,
            source_sha256,
            [
                DocumentWrite(i, "unchanged", states[i].chunk_count, duplicate_of=others.get(i, ()))
                for i in sorted(states)
            ],
        )
        audit_trail.record(conn, found.name, actor, *audit_trail.write_entries(result))
        return result


def _would_stay(
    state: DocumentState,
    source: SourceInput,
    key: str,
    sidecar: dict[str, object] | None,
    chunking: Chunking,
    model: str,
) -> bool:
    """Whether writing `source` again would leave this document of it exactly as stored."""
    if state.source_key != key or state.file_metadata is None or state.caller_metadata is None:
        return False
    fingerprinted = fingerprint(
        state.content_type, chunking.size, chunking.overlap, model, source.table, chunking.strategy
    )
    if state.fingerprint != fingerprinted:
        return False
    metadata = {**state.file_metadata, **(sidecar or {}), **source.metadata}
    return state.caller_metadata == source.metadata and state.metadata == metadata
