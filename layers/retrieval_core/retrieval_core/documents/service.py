"""DocumentService: stores and documents, for the HTTP routes, the S3 ingest function and the CLI (the
store operations are `stores.py`'s StoreOperations, which it extends).

Every method that names a store checks `grant` the one way (`grants.Grant.require`): a missing
scope is a 403, a store outside the grant a 404. Stores are named by their canonical name here.

Every change writes its audit rows (db/audit.py) in its own transaction, as `actor` (by default the
grant's name, with no request id).

How a write happens (embedding first, then one locked transaction) is `writer.py`; the bytes become
documents in `prepare.py`. A source sent again as it is stored is answered `unchanged` before it is parsed
(`unchanged.py`). Every write's outcome, failures included, is recorded afterwards (`ingest_status.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db import document_chunks as chunk_sql
from retrieval_core.db import document_status as status_sql
from retrieval_core.db import documents as sql
from retrieval_core.db import stores as store_sql
from retrieval_core.db.audit import AuditEntry
from retrieval_core.db.connection import Connection
from retrieval_core.db.errors import database_errors
from retrieval_core.db.stores import Store
from retrieval_core.documents import audit_trail, ingest_status
from retrieval_core.documents.attached import delete_attached, not_through_documents_api
from retrieval_core.documents.chunking import Chunking, chunking_of
from retrieval_core.documents.cursors import (
    check_page_limit,
    chunk_cursor,
    decode_cursor,
    encode_cursor,
)
from retrieval_core.documents.exceptions import ForeignDocumentError, TooManyRecordsError
from retrieval_core.documents.models import (
    Actor,
    ChunkInfo,
    DocumentInfo,
    Sequence,
    SourceInput,
    SourceWrite,
    StoreDefinition,
)
from retrieval_core.documents.ownership import own_document
from retrieval_core.documents.prepare import (
    PreparedSource,
    check_document_id,
    check_metadata,
    check_store_name,
    newer_sequencer,
    prepare_source,
    sha256_hex,
    source_key,
)
from retrieval_core.documents.source_metadata import apply_sidecar
from retrieval_core.documents.stores import StoreOperations, acting
from retrieval_core.documents.unchanged import write_if_unchanged
from retrieval_core.documents.writer import SourceWriter, WriteItem, again_after_conflict
from retrieval_core.exceptions import (
    DocumentNotFoundError,
    RetrievalError,
)
from retrieval_core.grants import OPEN_GRANT, Grant
from retrieval_core.observability.debug import DebugLog
from retrieval_core.parsers import DEFAULT_BUDGET, ParseBudget
from retrieval_core.parsers.tables import DEFAULT_TABLE_OPTIONS, TableOptions
from retrieval_core.search.concurrency import ExpensiveSlots

if TYPE_CHECKING:
    from retrieval_core.parsers.scanned_pages import OcrEngine

GROUP_TEXTS = 256  # write_sources: sources are grouped until this many texts need embedding
GROUP_SOURCES = 256


debug = DebugLog(__name__)


class DocumentService(StoreOperations):
    """Writes through the retrieval service's database, embedder and cache."""

    def __init__(
        self,
        retrieval: RetrievalService,
        chunk_size: int,
        chunk_overlap: int,
        budget: ParseBudget = DEFAULT_BUDGET,
        parse_slots: ExpensiveSlots | None = None,
        max_records: int | None = None,
        ocr: OcrEngine | None = None,
    ) -> None:
        """`budget`: what reading one source may cost; `parse_slots`: the process's parse slots, shared by
        every DocumentService of the process (a service of its own gets one); `max_records`: most
        documents one source may hold (DOCUMENT_MAX_RECORDS; None: no limit); `ocr`: what reads a PDF's
        scanned pages (OCR_ENGINE; None: they are not read)."""
        self.retrieval = retrieval
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        # What a store without its own chunking gets: the deployment's.
        self.deployment_chunking = Chunking("fixed", chunk_size, chunk_overlap)
        self.budget = budget
        self.parse_slots = parse_slots or parse_slots_of(1, 0.5)
        self.max_records = max_records
        self.ocr = ocr
        self.writer = SourceWriter(retrieval)

    # Stores the write path creates.

    def ensure_store(self, name: str, actor: Actor | None = None) -> Store:
        """The store `name`, created with the default definition if missing (S3 sync, CLI)."""
        check_store_name(name)
        embedder = self.retrieval.embedder
        with database_errors("creating the store"), self._connection() as conn, conn.transaction():
            store = store_sql.find_store_named(conn, name)
            if store is None:
                store = store_sql.create_store(conn, name, name, embedder.model, embedder.dimension)
                audit_trail.record(conn, name, acting(actor, OPEN_GRANT), AuditEntry("put_store", "created"))
        self.writer.check_model(store)
        return store

    # Documents (scope write to change, read to see).

    def write_source(
        self,
        store: str,
        source: SourceInput,
        grant: Grant = OPEN_GRANT,
        create: StoreDefinition | None = None,
        sequence: Sequence | None = None,
        actor: Actor | None = None,
        cancelled: threading.Event | None = None,
    ) -> SourceWrite:
        """Parse, chunk, embed and write one source atomically; the next search sees it, from any instance.

        A missing store is StoreNotFoundError (404), unless `create` is given: then the store is
        created with that definition in the transaction of the first write (S3 sync, CLI).
        The documents' metadata is the source's sidecar metadata (`put_source_metadata`) overlaid
        with `source.metadata`. With `sequence`, an event older than the last applied to its key
        writes nothing (`stale`).

        Unchanged content and chunking: nothing re-embedded; the same source, parse options and metadata
        again: not even parsed. A change of metadata alone updates the metadata of the documents and
        their chunks without re-embedding. Records a row source no longer holds are removed. A failure
        leaves the previous state (and no new empty store); the outcome is recorded either way.

        Reading the source keeps to the service's budget and waits for a parse slot (503 `overloaded` when
        none frees up in time); once `cancelled` is set (the client went away) it stops at its next
        checkpoint with WriteCancelledError, and nothing is written.
        """
        grant.require("write", store)
        if create is not None:
            check_store_name(store)
        who = acting(actor, grant)
        try:
            chunking = self._chunking(store, create)
            result = self._unchanged(store, source, sequence, who, chunking)
            if result is None:
                prepared = self._prepare(source, chunking, cancelled)
                item = WriteItem(prepared, sequence)
                [result] = self.writer.write(store, [item], create, who, into_table=True)
        except RetrievalError as exc:
            self._record(store, source.source_id, exc, who)
            raise
        self._record(store, source.source_id, result, who)
        debug("write %s into %s: %s", source.source_id, store, type(result).__name__)
        return result

    def write_sources(
        self,
        store: str,
        sources: Iterable[SourceInput],
        grant: Grant = OPEN_GRANT,
        create: StoreDefinition | None = None,
        actor: Actor | None = None,
    ) -> Iterator[SourceWrite | RetrievalError]:
        """`write_source` for many sources, embedding across sources in batches (CLI and sync).

        Yields, in input order, each source's result, or the error that source alone met (a parse
        error, an empty document): one bad file does not stop the others. Errors of the whole
        operation (database, embedder) are raised.
        """
        grant.require("write", store)
        if create is not None:
            check_store_name(store)
        actor = acting(actor, grant)
        chunking = self._chunking(store, create)
        group: list[tuple[str, WriteItem | SourceWrite | RetrievalError]] = []
        texts = 0
        for source in sources:
            try:
                unchanged = self._unchanged(store, source, None, actor, chunking)
                if unchanged is not None:
                    group.append((source.source_id, unchanged))
                    continue
                prepared = self._prepare(source, chunking)
            except RetrievalError as exc:
                group.append((source.source_id, exc))
                continue
            group.append((source.source_id, WriteItem(prepared, None)))
            texts += sum(len(d.chunks) for d in prepared.documents)
            if texts >= GROUP_TEXTS or len(group) >= GROUP_SOURCES:
                yield from self._write_group(store, group, create, actor)
                group, texts = [], 0
        if group:
            yield from self._write_group(store, group, create, actor)

    def put_source_metadata(
        self,
        store: str,
        source_id: str,
        metadata: dict[str, Any] | None,
        sequence: Sequence | None = None,
        create: StoreDefinition | None = None,
        actor: Actor | None = None,
    ) -> int:
        """Set (None: remove) the sidecar metadata of `source_id` and apply it to its documents
        without re-embedding; kept for a source not stored yet. Returns how many documents changed.

        With `sequence` (the sidecar object's own key and sequencer), an older event changes nothing.
        Audit rows: one per document changed, else one for the source (unchanged, or stale).
        """
        actor = acting(actor, OPEN_GRANT)
        if metadata is not None:
            check_metadata(metadata)
        if create is not None:
            check_store_name(store)
        return again_after_conflict(
            lambda: apply_sidecar(self.writer, store, source_id, metadata, sequence, create, actor)
        )

    def delete_source(
        self,
        store: str,
        source_id: str,
        grant: Grant = OPEN_GRANT,
        sequence: Sequence | None = None,
        actor: Actor | None = None,
        own_source: bool = False,
    ) -> list[str]:
        """Delete every document whose source or id is `source_id`; the ids deleted (empty: none).

        `own_source` (MCP memory_delete): only the document `source_id` that is its own source; a record
        of another source is a ForeignDocumentError (409), a row source's id deletes nothing.
        With `sequence`, a delete older than the last event applied to its key deletes nothing.
        Audit rows: one per document deleted, else one for `source_id` (not_found, or stale).
        """
        grant.require("write", store)
        who = acting(actor, grant)
        return again_after_conflict(lambda: self._delete(store, source_id, sequence, who, own_source))

    def _delete(
        self, store: str, source_id: str, sequence: Sequence | None, actor: Actor, own_source: bool = False
    ) -> list[str]:
        with database_errors("deleting documents"), self._connection() as conn, conn.transaction():
            found = self._store(conn, store, lock=True)
            if found.source is not None:
                if sequence is not None:
                    raise not_through_documents_api(found, "an S3 event")
                deleted = delete_attached(conn, found, source_id)
                audit_trail.record(conn, found.name, actor, *audit_trail.delete_entries(source_id, deleted))
                status_sql.forget(conn, found, [source_id, *deleted], bool(deleted))
                return deleted
            sql.lock(conn, found, [sql.source_lock_key(source_id)])
            if sequence is not None:
                if not newer_sequencer(sequence.sequencer, sql.applied_sequencer(conn, found, sequence.key)):
                    audit_trail.record(
                        conn, found.name, actor, AuditEntry("delete_document", "stale", source_id)
                    )
                    return []
                sql.record_sequencer(conn, found, sequence.key, sequence.sequencer, True)
            if own_source:
                ids = own_document(conn, found, source_id)
            else:
                ids = sql.source_document_ids(conn, found, source_id, or_id=True)
            sql.lock(conn, found, ids)
            sql.forget_record_sources(conn, found, ids)
            deleted = sql.remove_documents(conn, found, ids)
            audit_trail.record(conn, found.name, actor, *audit_trail.delete_entries(source_id, deleted))
            status_sql.forget(conn, found, [source_id, *deleted], bool(deleted))
            if deleted:
                store_sql.bump_version(conn, found)
            return deleted

    def get_document(self, store: str, document_id: str, grant: Grant = OPEN_GRANT) -> DocumentInfo:
        """One document; DocumentNotFoundError (404) when absent."""
        grant.require("read", store)
        with database_errors("reading the document"), self._connection() as conn:
            row = sql.get_document(conn, self._documents_of(conn, store), document_id)
        if row is None:
            raise DocumentNotFoundError(store, document_id)
        return DocumentInfo(*row)

    def list_documents(
        self,
        store: str,
        prefix: str = "",
        limit: int = 100,
        cursor: str | None = None,
        grant: Grant = OPEN_GRANT,
    ) -> tuple[list[DocumentInfo], str | None]:
        """Documents whose id starts with `prefix`, in id order, and the cursor of the next page."""
        grant.require("read", store)
        check_page_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        with database_errors("listing documents"), self._connection() as conn:
            rows = sql.list_documents(conn, self._documents_of(conn, store), prefix, after, limit + 1)
        page = [DocumentInfo(*r) for r in rows[:limit]]
        return page, (encode_cursor(page[-1].id) if len(rows) > limit else None)

    def list_chunks(
        self,
        store: str,
        document_id: str,
        limit: int = 100,
        cursor: str | None = None,
        grant: Grant = OPEN_GRANT,
    ) -> tuple[list[ChunkInfo], str | None]:
        """The document's chunks in chunk order, and the cursor of the next page; DocumentNotFoundError
        (404) when the store does not hold the document."""
        grant.require("read", store)
        check_page_limit(limit)
        after = chunk_cursor(cursor) if cursor else None
        with database_errors("listing chunks"), self._connection() as conn:
            found = self._documents_of(conn, store)
            rows = chunk_sql.list_chunks(conn, found, document_id, after, limit + 1)
            if not rows and not chunk_sql.document_exists(conn, found, document_id):
                raise DocumentNotFoundError(store, document_id)
        page = [ChunkInfo(*r) for r in rows[:limit]]
        return page, (encode_cursor(str(page[-1].chunk_index)) if len(rows) > limit else None)

    def source_hashes(
        self, store: str, grant: Grant = OPEN_GRANT, table: TableOptions = DEFAULT_TABLE_OPTIONS
    ) -> dict[str, str]:
        """SHA-256 of each stored source's bytes, by source id (sync compares files against it).

        A source whose chunks were made under other settings (parser, chunking, model, for a CSV or
        JSON Lines source `table`) maps to "", so that sync sees it as changed.
        """
        from retrieval_core.documents.prepare import fingerprint

        grant.require("read", store)
        with database_errors("reading source hashes"), self._connection() as conn:
            found = self._documents_of(conn, store)
            rows = sql.source_fingerprints(conn, found)
        chunking = chunking_of(found.chunking, self.deployment_chunking)
        hashes: dict[str, str] = {}
        for source, source_sha256, content_type, stored in rows:
            current = fingerprint(
                content_type, chunking.size, chunking.overlap, found.embedding_model, table, chunking.strategy
            )
            value = source_sha256 if source_sha256 is not None and stored == current else ""
            # Documents of one source disagreeing (a write interrupted by an older ingest): changed.
            hashes[source] = value if hashes.get(source, value) == value else ""
        return hashes

    def document_statuses(
        self,
        store: str,
        outcome: status_sql.OutcomeName,
        prefix: str = "",
        limit: int = 100,
        cursor: str | None = None,
        grant: Grant = OPEN_GRANT,
    ) -> tuple[list[status_sql.StatusRow], str | None, status_sql.Counts]:
        """Sources whose last outcome is `outcome`, id starting with `prefix`, in id order, the cursor of
        the next page, and the store's counts (ingest_status.py)."""
        grant.require("read", store)
        check_page_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        with database_errors("reading ingestion status"), self._connection() as conn:
            found = self._store(conn, store)
            rows = status_sql.list_outcomes(conn, found, outcome, prefix, after, limit + 1)
            counts = status_sql.counts(conn, found)
        page = rows[:limit]
        return page, (encode_cursor(page[-1].document_id) if len(rows) > limit else None), counts

    def ingestion_counts(self, store: str, grant: Grant = OPEN_GRANT) -> status_sql.Counts:
        """The store's ingestion counts (ingest_status.py)."""
        grant.require("read", store)
        with database_errors("reading ingestion status"), self._connection() as conn:
            return status_sql.counts(conn, self._store(conn, store))

    def read_source(self, source: SourceInput) -> PreparedSource:
        """Parse and chunk `source` as its write would, and write nothing (sync's dry run): the same budget,
        parse slot and record limit, hence the same errors; chunked as the deployment chunks."""
        return self._prepare(source, self.deployment_chunking)

    def record_outcomes(
        self, store: str, outcomes: list[status_sql.Outcome], actor: Actor | None = None
    ) -> None:
        """Record outcomes decided without a write (sync's files whose hash matched) as the writes' are."""
        ingest_status.record(self.retrieval, store, outcomes, acting(actor, OPEN_GRANT))

    # The write itself.

    def _record(self, store: str, source_id: str, result: SourceWrite | RetrievalError, actor: Actor) -> None:
        ingest_status.record(self.retrieval, store, [ingest_status.outcome_of(source_id, result)], actor)

    def _chunking(self, store: str, create: StoreDefinition | None) -> Chunking:
        """How `store` cuts its documents: its own chunking, else (a store to create) the definition's,
        else the deployment's (CHUNK_SIZE, CHUNK_OVERLAP, fixed)."""
        with database_errors("reading the store"), self._connection() as conn:
            found = store_sql.find_store_named(conn, store)
        if found is None and create is not None and create.chunking is not None:
            return create.chunking
        return chunking_of(found.chunking if found else None, self.deployment_chunking)

    def _unchanged(
        self, store: str, source: SourceInput, sequence: Sequence | None, actor: Actor, chunking: Chunking
    ) -> SourceWrite | None:
        """The `unchanged` answer when `source` is stored as it is sent (nothing parsed); None otherwise."""
        check_document_id(source.source_id)
        check_metadata(source.metadata)
        source_sha256 = sha256_hex(source.data)
        key = source_key(source, source_sha256)
        return again_after_conflict(
            lambda: write_if_unchanged(
                self.writer, store, source, key, source_sha256, chunking, self.max_records, sequence, actor
            )
        )

    def _prepare(
        self, source: SourceInput, chunking: Chunking, cancelled: threading.Event | None = None
    ) -> PreparedSource:
        model = self.retrieval.embedder.model
        with self.parse_slots.hold():
            prepared = prepare_source(
                source,
                chunking.size,
                chunking.overlap,
                model,
                self.budget,
                cancelled,
                self.ocr,
                strategy=chunking.strategy,
            )
        if self.max_records is not None and len(prepared.documents) > self.max_records:
            raise TooManyRecordsError(source.source_id, len(prepared.documents), self.max_records)
        return prepared

    def _write_group(
        self,
        store: str,
        group: list[tuple[str, WriteItem | SourceWrite | RetrievalError]],
        create: StoreDefinition | None,
        actor: Actor,
    ) -> Iterator[SourceWrite | RetrievalError]:
        """Write the group's prepared items in one write; each entry's result in order, once recorded."""
        items = [g for _, g in group if isinstance(g, WriteItem)]
        results: Iterator[SourceWrite | RetrievalError]
        try:
            results = iter(self.writer.write(store, items, create, actor) if items else [])
        except ForeignDocumentError as exc:
            # One source names another's document: write each alone, so that only it is refused.
            alone = [exc] if len(items) == 1 else [self._write_alone(store, i, create, actor) for i in items]
            results = iter(alone)
        done = [(i, next(results) if isinstance(g, WriteItem) else g) for i, g in group]
        ingest_status.record(self.retrieval, store, (ingest_status.outcome_of(i, r) for i, r in done), actor)
        for _, result in done:
            yield result

    def _write_alone(
        self, store: str, item: WriteItem, create: StoreDefinition | None, actor: Actor
    ) -> SourceWrite | RetrievalError:
        try:
            [result] = self.writer.write(store, [item], create, actor)
        except ForeignDocumentError as exc:
            return exc
        return result

    # Helpers.

    def _documents_of(self, conn: Connection, name: str) -> Store:
        """The store, for reading documents back: an attached store has none of its own (409)."""
        store = self._store(conn, name)
        if store.source is not None:
            raise not_through_documents_api(store, "reading documents back (GET, list, chunks, sync)")
        return store


def parse_slots_of(limit: int, wait_s: float) -> ExpensiveSlots:
    """At most `limit` sources read at once; a write that waits `wait_s` for a slot: 503 `overloaded`."""
    return ExpensiveSlots(
        limit,
        wait_s,
        "too many documents are being read at once (PARSE_CONCURRENCY): retry shortly",
        "PARSE_CONCURRENCY",
    )
