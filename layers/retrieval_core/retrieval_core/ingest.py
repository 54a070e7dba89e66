"""The write path of documents given as text: chunk them, embed in batches, replace them atomically.

Files are read by `trees` and written through `documents.DocumentService` (`retrieval ingest`/`sync`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from retrieval_core.db import documents as document_rows
from retrieval_core.db.connection import Database
from retrieval_core.db.documents import ChunkRow, DocumentRow, existing_hashes, replace_documents
from retrieval_core.db.errors import database_errors
from retrieval_core.db.storage import Storage
from retrieval_core.db.stores import Store, create_store, find_store
from retrieval_core.documents.chunking import chunk_text
from retrieval_core.embeddings.base import Embedder
from retrieval_core.exceptions import DimensionMismatchError, EmbeddingModelMismatchError

logger = logging.getLogger(__name__)

VersionListener = Callable[[Store, int], None]


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """A document as read from disk, before chunking."""

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class IngestReport:
    """What an ingest did."""

    documents_written: int = 0
    documents_unchanged: int = 0
    documents_empty: int = 0
    chunks_written: int = 0


def _fingerprint(doc: SourceDocument, model: str, chunk_size: int, overlap: int) -> str:
    """Changes whenever the stored chunks would: text, title, metadata, model or chunking."""
    payload = json.dumps([doc.text, doc.title, doc.metadata, model, chunk_size, overlap], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def ensure_store(
    database: Database,
    embedder: Embedder,
    name: str,
    display_name: str | None = None,
    storage: Storage = "vector",
) -> Store:
    """The store called `name`, created for this embedder (with `storage`) if it does not exist."""
    from retrieval_core.documents.prepare import check_store_name

    check_store_name(name)
    with database_errors("creating the store"), database.connection() as conn:
        store = find_store(conn, name)
        if store is None:
            store = create_store(
                conn, name, display_name or name, embedder.model, embedder.dimension, storage
            )
    if store.embedding_model != embedder.model:
        raise EmbeddingModelMismatchError(store.name, store.embedding_model, embedder.model)
    return store


def ingest_documents(
    database: Database,
    embedder: Embedder,
    store: Store,
    documents: Iterable[SourceDocument],
    chunk_size: int,
    overlap: int,
    batch_chunks: int = 512,
    progress: bool = True,
    on_version: VersionListener | None = None,
) -> IngestReport:
    """Chunk, embed and write `documents`; unchanged ones are skipped. Each batch is one transaction.

    `on_version` hears the store's new version after each committed batch (cache invalidation).
    """
    from tqdm import tqdm

    report = IngestReport()
    bar = tqdm(desc=f"ingest {store.name}", unit=" chunks", disable=not progress, dynamic_ncols=True)
    pending: list[tuple[SourceDocument, str, list[str]]] = []
    pending_ids: set[str] = set()
    pending_chunks = 0

    def flush() -> None:
        nonlocal pending_chunks
        version = _write_batch(database, embedder, store, pending, report)
        if on_version is not None and version is not None:
            on_version(store, version)
        bar.update(pending_chunks)
        pending.clear()
        pending_ids.clear()
        pending_chunks = 0

    for batch in _batched(documents, 256):
        fingerprints = {d.id: _fingerprint(d, store.embedding_model, chunk_size, overlap) for d in batch}
        with database_errors("reading document hashes"), database.connection() as conn:
            stored = existing_hashes(conn, store, list(fingerprints))
        for doc in batch:
            if stored.get(doc.id) == fingerprints[doc.id]:
                report.documents_unchanged += 1
                continue
            chunks = chunk_text(doc.text, chunk_size, overlap)
            if not chunks:
                report.documents_empty += 1
                logger.warning("document %r has no text; skipped", doc.id)
                continue
            if doc.id in pending_ids:  # the same id twice in one input: the later one wins
                flush()
            pending.append((doc, fingerprints[doc.id], chunks))
            pending_ids.add(doc.id)
            pending_chunks += len(chunks)
            if pending_chunks >= batch_chunks:
                flush()
    if pending:
        flush()
    bar.close()
    return report


def _write_batch(
    database: Database,
    embedder: Embedder,
    store: Store,
    batch: list[tuple[SourceDocument, str, list[str]]],
    report: IngestReport,
) -> int | None:
    # The title is embedded with each chunk (BEIR convention) but not stored in its content.
    texts = [
        f"{doc.title}\n\n{chunk}" if doc.title else chunk for doc, _, chunks in batch for chunk in chunks
    ]
    vectors = iter(embedder.embed(texts, "document"))
    rows: list[DocumentRow] = []
    for doc, fingerprint, chunks in batch:
        chunk_rows = []
        for index, content in enumerate(chunks):
            vector = next(vectors)
            if len(vector) != store.dimension:
                raise DimensionMismatchError(store.name, store.dimension, len(vector), "ingest")
            metadata = {**doc.metadata, "title": doc.title} if doc.title else dict(doc.metadata)
            chunk_rows.append(ChunkRow(doc.id, index, content, metadata, vector))
        rows.append(DocumentRow(doc.id, doc.title, doc.metadata, fingerprint, chunk_rows))
    with database_errors("writing documents"), database.connection() as conn:
        version = replace_documents(conn, store, rows)
    report.documents_written += len(rows)
    report.chunks_written += sum(len(r.chunks) for r in rows)
    return version


def delete_documents(
    database: Database, store: Store, document_ids: list[str], on_version: VersionListener | None = None
) -> list[str]:
    """Delete documents by id; return those that existed."""
    with database_errors("deleting documents"), database.connection() as conn:
        deleted, version = document_rows.delete_documents(conn, store, document_ids)
    if on_version is not None and version is not None:
        on_version(store, version)
    return deleted


def _batched(items: Iterable[SourceDocument], size: int) -> Iterator[list[SourceDocument]]:
    batch: list[SourceDocument] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
