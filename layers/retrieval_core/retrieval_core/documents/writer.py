"""How a write happens: embed outside any transaction, then apply under advisory locks.

A write embeds first, with no connection held, then applies its sources in one transaction that holds
its store against deletion and advisory locks on each source and on every document id (db/documents.py
`lock`), re-reading their state under them. A document whose state moved meanwhile, so that it now
needs vectors the write did not compute, sends the write round again with those embedded too; a
deadlock victim goes again as it is (`again_after_conflict`).
"""

from __future__ import annotations

import random
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeAlias, TypeVar

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.clients.deadline import request_deadline, time_for_retry
from retrieval_core.db import documents as sql
from retrieval_core.db import stores as store_sql
from retrieval_core.db.audit import AuditEntry
from retrieval_core.db.connection import Connection
from retrieval_core.db.documents import ChunkRow, NewDocument
from retrieval_core.db.errors import database_errors
from retrieval_core.db.stores import Store
from retrieval_core.documents import audit_trail
from retrieval_core.documents.attached import not_through_documents_api, writable_source, write_attached
from retrieval_core.documents.models import Actor, DocumentWrite, Sequence, SourceWrite, StoreDefinition
from retrieval_core.documents.ownership import check_ownership
from retrieval_core.documents.prepare import PreparedDocument, PreparedSource, newer_sequencer
from retrieval_core.exceptions import (
    ConcurrentlyDeletedError,
    ConflictError,
    DimensionMismatchError,
    EmbeddingModelMismatchError,
    StoreNotFoundError,
    TransactionConflictError,
)
from retrieval_core.schemas.common import WriteStatus

_ROUNDS = 3  # a write re-embeds at most this many times when its documents moved under it
# A transaction PostgreSQL rolled back for a concurrent one goes again at most this many times in all,
# after a random wait of up to CONFLICT_WAIT_S times its attempt number.
CONFLICT_ATTEMPTS = 8
CONFLICT_WAIT_S = 0.02

# Texts handed to the embedder at a time: each slice's vectors become float32 arrays at once (4 bytes a
# number, as pgvector stores them, instead of a Python float's 32), so a source of 100,000 records of
# 384 numbers holds 150 MB of vectors, not 1.2 GB. The embedder splits a slice by EMBEDDING_BATCH_SIZE.
EMBED_SLICE = 2048
# Most ids a write answer's `duplicateOf` names for one document (the oldest copies).
DUPLICATES_LISTED = 10

Vectors: TypeAlias = "dict[tuple[int, str], list[array[float]]]"
T = TypeVar("T")


def again_after_conflict(transaction: Callable[[], T]) -> T:
    """Run `transaction` again when PostgreSQL rolled it back for a concurrent one (a deadlock victim, a
    serialization failure), up to CONFLICT_ATTEMPTS times in all and while the request's deadline leaves
    time for another; then the error (409 database_deadlock or write_conflict).

    Writers lock a source, then the documents it turns out to hold, in two statements: two of them can
    meet in a cycle, and PostgreSQL aborts one, which may simply go again. The waits are short and
    random, so two victims do not meet again.
    """
    deadline = request_deadline()
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return transaction()
        except TransactionConflictError:
            delay_s = random.uniform(0, CONFLICT_WAIT_S * attempt)
            if attempt == CONFLICT_ATTEMPTS or not time_for_retry(delay_s, deadline):
                raise
            time.sleep(delay_s)
    raise AssertionError("unreachable")


@dataclass(slots=True)
class WriteItem:
    """One source of a write: prepared, with its sequence, and what the transaction made of it."""

    prepared: PreparedSource
    sequence: Sequence | None
    result: SourceWrite | None = None
    changed: bool = False


class _NeedVectors(Exception):
    """A document changed under the write and now needs vectors the write did not compute."""

    def __init__(self, keys: list[tuple[int, str]]) -> None:
        super().__init__("documents changed during the write")
        self.keys = keys


class SourceWriter:
    """Writes prepared sources through the retrieval service's database, embedder and cache."""

    def __init__(self, retrieval: RetrievalService) -> None:
        self.retrieval = retrieval

    def write(
        self,
        store: str,
        items: list[WriteItem],
        create: StoreDefinition | None,
        actor: Actor,
        into_table: bool = False,
    ) -> list[SourceWrite]:
        """Embed what the stored state lacks, then apply all items in one transaction, audited as `actor`.

        `into_table`: a writable attached store takes the write into its table (documents/attached.py);
        otherwise (batches, S3 events) an attached store refuses it (409).
        """
        vectors: Vectors = {}
        with database_errors("reading documents"), self.retrieval.database.connection() as conn:
            found = store_sql.find_store_named(conn, store)
            if found is None and create is None:
                raise StoreNotFoundError(store)
            if found is not None and found.source is not None:
                if not into_table or any(item.sequence is not None for item in items):
                    raise not_through_documents_api(found, "ingesting files (CLI, S3 events and sync)")
                writable_source(found)
            elif found is not None:
                self.check_model(found)
                ids = [d.id for item in items for d in item.prepared.documents]
                states = sql.document_states(conn, found, ids)
            else:
                states = {}
        if found is not None and found.source is not None:
            return [write_attached(self.retrieval, found.name, item.prepared, actor) for item in items]
        needed = [
            (n, doc)
            for n, item in enumerate(items)
            for doc in item.prepared.documents
            if not same_content(item.prepared, doc, states.get(doc.id))
        ]
        for _ in range(_ROUNDS):
            self._embed(store, needed, vectors)
            try:
                again_after_conflict(lambda: self._apply(store, items, create, vectors, actor))
            except _NeedVectors as exc:
                wanted = set(exc.keys)
                needed = [
                    (n, doc)
                    for n, item in enumerate(items)
                    for doc in item.prepared.documents
                    if (n, doc.id) in wanted
                ]
                continue
            return [item.result for item in items if item.result is not None]
        raise ConflictError("the documents kept changing during the write; try again")

    def _apply(
        self,
        store: str,
        items: list[WriteItem],
        create: StoreDefinition | None,
        vectors: Vectors,
        actor: Actor,
    ) -> None:
        with (
            _store_gone_is_not_found(store),
            database_errors("writing documents"),
            self.retrieval.database.connection() as conn,
            conn.transaction(),
        ):
            found = self.store_for_write(conn, store, create, actor)
            keys = [sql.source_lock_key(item.prepared.source_id) for item in items]
            keys += [d.id for item in items for d in item.prepared.documents]
            sql.lock(conn, found, keys)
            missing: list[tuple[int, str]] = []
            for n, item in enumerate(items):
                missing += self._apply_item(conn, found, n, item, vectors, actor)
            if missing:
                raise _NeedVectors(missing)
            _name_duplicates(conn, found, items)
            entries = [e for item in items if item.result for e in audit_trail.write_entries(item.result)]
            audit_trail.record(conn, found.name, actor, *entries)
            if any(item.changed for item in items):
                store_sql.bump_version(conn, found)

    def _apply_item(
        self, conn: Connection, store: Store, n: int, item: WriteItem, vectors: Vectors, actor: Actor
    ) -> list[tuple[int, str]]:
        """Apply one source under its locks; the (item, document) keys that need vectors first."""
        prepared, sequence = item.prepared, item.sequence
        if sequence is not None and not newer_sequencer(
            sequence.sequencer, sql.applied_sequencer(conn, store, sequence.key)
        ):
            item.result = SourceWrite(
                prepared.source_id, prepared.content_type, prepared.source_sha256, [], stale=True
            )
            return []
        check_ownership(conn, store, prepared)
        sidecar = sql.sidecar_metadata(conn, store, prepared.source_id)
        new_ids = {d.id for d in prepared.documents}
        previous_ids = set(sql.source_document_ids(conn, store, prepared.source_id))
        removed = sorted(previous_ids - new_ids)
        sql.lock(conn, store, removed)
        states = sql.document_states(conn, store, list(new_ids))
        missing = [
            (n, d.id)
            for d in prepared.documents
            if not same_content(prepared, d, states.get(d.id)) and (n, d.id) not in vectors
        ]
        if missing:
            return missing
        fresh = {d.id: vectors[(n, d.id)] for d in prepared.documents if (n, d.id) in vectors}
        writes = _write_documents(conn, store, prepared, states, sidecar, fresh, actor.credential)
        deleted = sql.remove_documents(conn, store, removed)
        if sequence is not None:
            sql.record_sequencer(conn, store, sequence.key, sequence.sequencer, False)
        item.result = SourceWrite(
            prepared.source_id, prepared.content_type, prepared.source_sha256, writes, sorted(deleted)
        )
        item.changed = item.result.status != "unchanged"
        return []

    def _embed(self, store: str, needed: list[tuple[int, PreparedDocument]], vectors: Vectors) -> None:
        """Vectors for every chunk of `needed`, across documents (the embedder splits provider calls
        by EMBEDDING_BATCH_SIZE)."""
        embedder = self.retrieval.embedder
        texts = [(key, text) for n, doc in needed for key in [(n, doc.id)] for text in doc.embedding_texts()]
        for key, _ in texts:
            vectors[key] = []
        for start in range(0, len(texts), EMBED_SLICE):
            part = texts[start : start + EMBED_SLICE]
            embedded = embedder.embed([t for _, t in part], "document")
            for (key, _), vector in zip(part, embedded, strict=True):
                if len(vector) != embedder.dimension:
                    raise DimensionMismatchError(store, embedder.dimension, len(vector), "ingest")
                vectors[key].append(array("f", vector))

    def store_for_write(
        self, conn: Connection, name: str, create: StoreDefinition | None, actor: Actor
    ) -> Store:
        """The store, created in the caller's transaction from `create` when it is missing (an audit row
        of `actor` then says so). It is held until the transaction ends: a concurrent DELETE of the store
        waits for the write."""
        store = store_sql.find_store_named(conn, name, lock=True)
        if store is None:
            if create is None:
                raise StoreNotFoundError(name)
            audit_trail.record(conn, name, actor, AuditEntry("put_store", "created"))
            embedder = self.retrieval.embedder
            store = store_sql.create_store(
                conn,
                name,
                create.display_name or name,
                embedder.model,
                embedder.dimension,
                create.storage,
                create.allowed_metadata_keys,
                store_sql.text_search_config(conn, create.text_search) or "english",
                create.chunking.as_json() if create.chunking is not None else None,
            )
        self.check_model(store)
        return store

    def check_model(self, store: Store) -> None:
        """Refuse a store made with another embedding model or dimension than this service's, and an
        attached store (409: read_only_store, or the ways in a writable one takes)."""
        if store.source is not None:
            raise not_through_documents_api(store, "ingesting files and sidecar metadata")
        embedder = self.retrieval.embedder
        if store.embedding_model != embedder.model:
            raise EmbeddingModelMismatchError(store.name, store.embedding_model, embedder.model)
        if store.dimension != embedder.dimension:
            raise DimensionMismatchError(store.name, store.dimension, embedder.dimension, "ingest")


@contextmanager
def _store_gone_is_not_found(store: str) -> Iterator[None]:
    """A write whose store a concurrent request deleted is answered as one to a missing store (404)."""
    try:
        yield
    except ConcurrentlyDeletedError as exc:
        raise StoreNotFoundError(store) from exc


def _write_documents(
    conn: Connection,
    store: Store,
    prepared: PreparedSource,
    states: dict[str, sql.DocumentState],
    sidecar: dict[str, Any] | None,
    vectors: dict[str, list[array[float]]],
    written_by: str,
) -> list[DocumentWrite]:
    """Rewrite the source's documents whose content changed (with `vectors`, by document id), update the
    metadata of those whose metadata alone changed, and leave the rest; what happened to each. The
    documents changed record `written_by`."""
    writes: list[DocumentWrite] = []
    rewrite: list[NewDocument] = []
    rehashed: list[str] = []
    for doc in prepared.documents:
        state = states.get(doc.id)
        metadata = prepared.document_metadata(doc, sidecar)
        chunk_metadata = doc.chunk_metadata(metadata)
        if state is None or not same_content(prepared, doc, state):
            rewrite.append(
                _new_document(prepared, doc, metadata, chunk_metadata, vectors[doc.id], written_by)
            )
            status: WriteStatus = "created" if state is None else "updated"
            writes.append(DocumentWrite(doc.id, status, len(doc.chunks)))
        elif (
            state.metadata != metadata
            or state.source != prepared.source_id
            or _layers_moved(prepared, doc, state)
        ):
            sql.update_metadata(
                conn,
                store,
                doc.id,
                prepared.source_id,
                prepared.source_sha256,
                metadata,
                chunk_metadata,
                prepared.caller_metadata,
                doc.metadata,
                written_by=written_by,
                source_key=prepared.source_key,
            )
            writes.append(DocumentWrite(doc.id, "updated", len(doc.chunks)))
        else:
            writes.append(DocumentWrite(doc.id, "unchanged", len(doc.chunks)))
            if (state.source_sha256, state.source_key) != (prepared.source_sha256, prepared.source_key):
                rehashed.append(doc.id)  # another record of its file changed, or its key was not kept
    sql.set_source_sha256(conn, store, rehashed, prepared.source_sha256, prepared.source_key)
    sql.write_documents(conn, store, rewrite)
    return writes


def _new_document(
    prepared: PreparedSource,
    doc: PreparedDocument,
    metadata: dict[str, Any],
    chunk_metadata: list[dict[str, Any]],
    vectors: list[array[float]],
    written_by: str,
) -> NewDocument:
    """The document as written anew: its chunks with their metadata and vectors."""
    chunks = [
        ChunkRow(doc.id, i, chunk.text, chunk_metadata[i], vector)
        for i, (chunk, vector) in enumerate(zip(doc.chunks, vectors, strict=True))
    ]
    return NewDocument(
        doc.id,
        prepared.source_id,
        prepared.source_sha256,
        doc.title,
        metadata,
        prepared.content_type,
        doc.content_sha256,
        prepared.fingerprint,
        chunks,
        doc.metadata,
        prepared.caller_metadata,
        written_by,
        prepared.source_key,
    )


def _name_duplicates(conn: Connection, store: Store, items: list[WriteItem]) -> None:
    """Give each document written its `duplicate_of` (`duplicates_of`). One indexed lookup for the write."""
    written = [item for item in items if item.result is not None and not item.result.stale]
    others = duplicates_of(
        conn, store, {d.id: d.content_sha256 for item in written for d in item.prepared.documents}
    )
    for item in written:
        assert item.result is not None
        documents = [
            replace(d, duplicate_of=others[d.document_id]) if others.get(d.document_id) else d
            for d in item.result.documents
        ]
        item.result = replace(item.result, documents=documents)


def duplicates_of(conn: Connection, store: Store, hashes: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """For each document id of `hashes` (id -> content_sha256), the other documents of the store with the
    same content, oldest first, at most DUPLICATES_LISTED; ids without any are left out."""
    same = sql.same_content_ids(conn, store, sorted(set(hashes.values())), DUPLICATES_LISTED + 1)
    found = {
        document_id: tuple([i for i in same.get(content, []) if i != document_id][:DUPLICATES_LISTED])
        for document_id, content in hashes.items()
    }
    return {document_id: ids for document_id, ids in found.items() if ids}


def same_content(prepared: PreparedSource, doc: PreparedDocument, state: sql.DocumentState | None) -> bool:
    """Stored with the same bytes and the same fingerprint: its chunks and vectors would not change."""
    return (
        state is not None
        and state.content_sha256 == doc.content_sha256
        and state.fingerprint == prepared.fingerprint
        and state.chunk_count == len(doc.chunks)
    )


def _layers_moved(prepared: PreparedSource, doc: PreparedDocument, state: sql.DocumentState) -> bool:
    """The same metadata made of other layers (a key moved between file and writer): record them."""
    return state.file_metadata != doc.metadata or state.caller_metadata != prepared.caller_metadata
