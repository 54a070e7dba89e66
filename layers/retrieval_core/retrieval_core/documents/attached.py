"""Documents of a writable attached store: written into the user's table (docs/existing-tables.md).

Only the documents API's own routes write here (PUT/POST and DELETE of a document, and the MCP tools,
which call them). A document is embedded first, with no connection held, then replaced in one
transaction under its advisory lock: its rows deleted, one row per chunk inserted (attached/writes.py),
the store's version bumped so that cached answers are not served again. Ways in that need the service's
own document table (listing and reading documents back, S3 events and sync, CLI ingest, sidecar
metadata) are refused with a 409 naming what works.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from psycopg import errors

from retrieval_core.backends.attached.exceptions import ReadOnlyStoreError, SourceUnavailableError
from retrieval_core.backends.attached.features import relation_name
from retrieval_core.backends.attached.writes import ChunkRow, delete_document, insert_document
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db import documents as sql
from retrieval_core.db import stores as store_sql
from retrieval_core.db.attached_source import AttachedSource
from retrieval_core.db.audit import AuditEntry
from retrieval_core.db.connection import Connection
from retrieval_core.db.errors import database_errors
from retrieval_core.db.stores import Store
from retrieval_core.documents import audit_trail
from retrieval_core.documents.models import Actor, DocumentWrite, SourceWrite
from retrieval_core.documents.prepare import PreparedSource
from retrieval_core.exceptions import (
    ConflictError,
    DimensionMismatchError,
    EmbeddingModelMismatchError,
    InvalidRequestError,
    StoreNotFoundError,
)
from retrieval_core.schemas.common import WriteStatus


def writable_source(store: Store) -> AttachedSource:
    """The attached store's source when the documents API may write it; 409 read_only_store otherwise."""
    source = store.source
    assert source is not None
    if source.read_only:
        raise ReadOnlyStoreError(store.name, relation_name(source))
    return source


def not_through_documents_api(store: Store, what: str) -> ConflictError:
    """The 409 for `what` on an attached store: only the documents API's writes reach its table."""
    assert store.source is not None
    if store.source.read_only:
        return ReadOnlyStoreError(store.name, relation_name(store.source))
    return ConflictError(
        f"store '{store.name}' writes into {relation_name(store.source)} through PUT and DELETE of a "
        f"document only: {what} needs the service's own document table (search the store to read its rows)",
        {"store": store.name, "source": relation_name(store.source)},
    )


def write_attached(
    retrieval: RetrievalService, name: str, prepared: PreparedSource, actor: Actor
) -> SourceWrite:
    """Replace the document of `prepared` in the store's table; search sees it as soon as this returns.

    The transaction writes `actor`'s audit row (the table has no column for who wrote a row)."""
    if len(prepared.documents) != 1 or prepared.documents[0].id != prepared.source_id:
        raise InvalidRequestError.for_field(
            "contentType",
            f"a row source ({prepared.content_type}, one document per record) needs the service's own "
            "document table to track its records; write each record as a document of its own",
            "unsupported",
        )
    document = prepared.documents[0]
    embedder = retrieval.embedder
    vectors = embedder.embed(document.embedding_texts(), "document")
    metadata = document.chunk_metadata(prepared.document_metadata(document, None))
    rows = [
        ChunkRow(chunk.text, vector, metadata[i], document.title)
        for i, (chunk, vector) in enumerate(zip(document.chunks, vectors, strict=True))
    ]
    with database_errors("writing documents"), retrieval.database.connection() as conn, conn.transaction():
        store = _store(conn, name)
        source = writable_source(store)
        if source.embedding_model != embedder.model:
            raise EmbeddingModelMismatchError(store.name, source.embedding_model, embedder.model)
        for row in rows:
            if len(row.embedding) != source.dimension:
                raise DimensionMismatchError(store.name, source.dimension, len(row.embedding), "ingest")
        sql.lock(conn, store, [document.id])
        with _table_errors(store, source):
            replaced = delete_document(conn, source, document.id)
            insert_document(conn, source, document.id, rows)
        status: WriteStatus = "updated" if replaced else "created"
        audit_trail.record(conn, store.name, actor, AuditEntry("put_document", status, document.id))
        store_sql.bump_version(conn, store)
    return SourceWrite(
        prepared.source_id,
        prepared.content_type,
        prepared.source_sha256,
        [DocumentWrite(document.id, status, len(rows))],
    )


def delete_attached(conn: Connection, store: Store, document_id: str) -> list[str]:
    """Delete the document's rows in the caller's transaction: [document_id], or [] when the table holds
    none; the store gets a new version when one was deleted."""
    source = writable_source(store)
    sql.lock(conn, store, [document_id])
    with _table_errors(store, source):
        deleted = delete_document(conn, source, document_id)
    if not deleted:
        return []
    store_sql.bump_version(conn, store)
    return [document_id]


def _store(conn: Connection, name: str) -> Store:
    store = store_sql.find_store_named(conn, name)
    if store is None:
        raise StoreNotFoundError(name)
    if store.source is None:
        raise ConflictError.for_field("store", f"store '{name}' holds its own documents now; write again")
    return store


@contextmanager
def _table_errors(store: Store, source: AttachedSource) -> Iterator[None]:
    """The user's table refusing a row, said as such (never the driver's message: it quotes values)."""
    relation = relation_name(source)
    try:
        yield
    except (errors.UndefinedTable, errors.UndefinedColumn, errors.InsufficientPrivilege) as exc:
        reason = f"can no longer be written as attached (SQLSTATE {exc.sqlstate}): attach it again"
        raise SourceUnavailableError(store.name, relation, reason) from exc
    except errors.UniqueViolation as exc:
        raise ConflictError(
            f"{relation} already holds a row with an id this document's rows take (written by another "
            f"writer?): the ids are documentId#chunkIndex, see source.columns.id",
            {"store": store.name, "source": relation},
        ) from exc
    except errors.IntegrityError as exc:
        raise ConflictError(
            f"{relation} refused the document's rows (a constraint of the table, SQLSTATE {exc.sqlstate})",
            {"store": store.name, "source": relation},
        ) from exc
    except errors.DataError as exc:
        raise InvalidRequestError.for_field(
            "documentId",
            f"a value of this document does not fit its column in {relation} (such as a document id that is "
            f"not of the document id column's type; SQLSTATE {exc.sqlstate})",
            "value_error",
        ) from exc
