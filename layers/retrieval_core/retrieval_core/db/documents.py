"""The SQL of documents and chunks: writes, reads, locks, sources. Every value is a bound parameter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Cursor
from psycopg.types.json import Jsonb

from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store, bump_version
from retrieval_core.db.vectors import Vector


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A chunk ready to write."""

    document_id: str
    chunk_index: int
    content: str
    metadata: dict[str, Any]
    embedding: Sequence[float]


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """A document and all of its chunks; written together or not at all."""

    id: str
    title: str
    metadata: dict[str, Any]
    content_sha256: str
    chunks: list[ChunkRow]


def existing_hashes(conn: Connection, store: Store, document_ids: Sequence[str]) -> dict[str, str]:
    """Content hashes of those of `document_ids` already stored."""
    rows = conn.execute(
        "SELECT id, content_sha256 FROM documents WHERE store_id = %s AND id = ANY(%s::text[])",
        (store.id, list(document_ids)),
    )
    return dict(rows.fetchall())


def replace_documents(conn: Connection, store: Store, documents: Sequence[DocumentRow]) -> int | None:
    """Write `documents` in one transaction: each one's old chunks go and its new ones come at once.

    Returns the store's new version (None when there was nothing to write).
    """
    if not documents:
        return None
    with conn.transaction():
        ids = [d.id for d in documents]
        lock(conn, store, ids)
        conn.execute(
            "DELETE FROM chunks WHERE store_id = %s AND document_id = ANY(%s::text[])", (store.id, ids)
        )
        with conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO documents (store_id, id, source, title, metadata, content_sha256, chunk_count)
                   VALUES (%s, %s, %s, %s, %s, %s, %s)
                   ON CONFLICT (store_id, id) DO UPDATE SET title = EXCLUDED.title,
                       metadata = EXCLUDED.metadata, content_sha256 = EXCLUDED.content_sha256,
                       chunk_count = EXCLUDED.chunk_count, updated_at = now(), source = EXCLUDED.source,
                       source_sha256 = NULL, fingerprint = '', content_type = 'text/plain'""",
                [
                    (store.id, d.id, d.id, d.title, Jsonb(d.metadata), d.content_sha256, len(d.chunks))
                    for d in documents
                ],
            )
            copy_chunks(cur, store, [chunk for d in documents for chunk in d.chunks])
        return bump_version(conn, store)


# Rows per COPY statement. Each statement inserts into the HNSW index and runs the keyword index's
# trigger for its rows (about 1 ms a chunk on 2 cores), and DB_STATEMENT_TIMEOUT_MS bounds a statement,
# not a transaction: a JSONL file of 10,000 records is one source, written in one transaction, but never
# in one statement that could outlast the timeout.
COPY_ROWS = 500


def copy_chunks(cur: Cursor[Any], store: Store, chunks: Sequence[ChunkRow]) -> None:
    """COPY `chunks` into the store, COPY_ROWS per statement (metadata as Jsonb, never a JSON string)."""
    for start in range(0, len(chunks), COPY_ROWS):
        with cur.copy(
            "COPY chunks (store_id, document_id, chunk_index, content, metadata, embedding) FROM STDIN"
        ) as copy:
            for chunk in chunks[start : start + COPY_ROWS]:
                copy.write_row(
                    (
                        store.id,
                        chunk.document_id,
                        chunk.chunk_index,
                        chunk.content,
                        Jsonb(chunk.metadata),
                        Vector(list(chunk.embedding)),
                    )
                )


def delete_documents(
    conn: Connection, store: Store, document_ids: Sequence[str]
) -> tuple[list[str], int | None]:
    """Delete documents and their chunks; return the ids that existed and the store's new version."""
    with conn.transaction():
        rows = conn.execute(
            "DELETE FROM documents WHERE store_id = %s AND id = ANY(%s::text[]) RETURNING id",
            (store.id, list(document_ids)),
        ).fetchall()
        version = bump_version(conn, store) if rows else None
    return [r[0] for r in rows], version


def source_lock_key(source: str) -> str:
    """The advisory-lock key of a source (documents are locked by their own ids)."""
    return f"source:{source}"


# Document ids and source keys share this many advisory locks per store (a power of two): a write takes
# at most this many, however many records its sources hold. One lock per document filled PostgreSQL's
# lock table (max_locks_per_transaction x max_connections, 6,400 by default) at about 20,000 records.
LOCK_SLOTS = 256


def lock(conn: Connection, store: Store, keys: Sequence[str]) -> None:
    """Take the transaction-scoped advisory locks of `keys` (document ids, `source_lock_key`s).

    A key's lock is one of the store's LOCK_SLOTS, by the hash of the key: two writers of one document
    or source always meet on its lock; writers of different ones that share a slot only take turns.
    Every writer takes its locks in one statement, in slot order, so two writers never wait on each
    other in a cycle.
    """
    conn.execute(
        """SELECT pg_advisory_xact_lock(%s, k)
           FROM (SELECT DISTINCT hashtext(key) & %s AS k FROM unnest(%s::text[]) AS key) AS keys
           ORDER BY k""",
        (store.id, LOCK_SLOTS - 1, list(keys)),
    )


@dataclass(frozen=True, slots=True)
class DocumentState:
    """What is stored of a document, enough to decide whether a write changes it."""

    id: str
    source: str
    title: str
    metadata: dict[str, Any]
    content_type: str
    content_sha256: str
    fingerprint: str
    chunk_count: int
    source_sha256: str | None
    # The layers `metadata` was made of (None: written before migration 5).
    file_metadata: dict[str, Any] | None
    caller_metadata: dict[str, Any] | None
    # prepare.source_key of the write that stored it (None: written before migration 17).
    source_key: str | None = None


_STATE_COLUMNS = (
    "id, source, title, metadata, content_type, content_sha256, fingerprint, chunk_count, source_sha256,"
    " file_metadata, caller_metadata, source_key"
)


def document_states(conn: Connection, store: Store, document_ids: Sequence[str]) -> dict[str, DocumentState]:
    """The stored state of those of `document_ids` that exist."""
    rows = conn.execute(
        f"SELECT {_STATE_COLUMNS} FROM documents WHERE store_id = %s AND id = ANY(%s::text[])",  # noqa: S608
        (store.id, list(document_ids)),
    ).fetchall()
    return {r[0]: DocumentState(*r) for r in rows}


def source_document_ids(conn: Connection, store: Store, source: str, or_id: bool = False) -> list[str]:
    """Ids of the documents read from `source` (and, with `or_id`, the document whose id is `source`)."""
    rows = conn.execute(
        "SELECT id FROM documents WHERE store_id = %s AND (source = %s OR (%s AND id = %s))",
        (store.id, source, or_id, source),
    ).fetchall()
    return [r[0] for r in rows]


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document to (re)write with all of its chunks."""

    id: str
    source: str
    source_sha256: str
    title: str
    metadata: dict[str, Any]
    content_type: str
    content_sha256: str
    fingerprint: str
    chunks: list[ChunkRow]
    file_metadata: dict[str, Any]
    caller_metadata: dict[str, Any]
    written_by: str | None = None  # the credential writing it (the audit trail's name for it)
    source_key: str | None = None  # prepare.source_key of the write


def write_documents(conn: Connection, store: Store, documents: Sequence[NewDocument]) -> None:
    """Upsert `documents` and replace their chunks (call in a transaction holding their locks)."""
    if not documents:
        return
    ids = [d.id for d in documents]
    conn.execute("DELETE FROM chunks WHERE store_id = %s AND document_id = ANY(%s::text[])", (store.id, ids))
    with conn.cursor() as cur:
        cur.executemany(
            """INSERT INTO documents (store_id, id, source, source_sha256, title, metadata, content_type,
                   content_sha256, fingerprint, chunk_count, file_metadata, caller_metadata, written_by,
                   source_key)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
               ON CONFLICT (store_id, id) DO UPDATE SET source = EXCLUDED.source,
                   source_sha256 = EXCLUDED.source_sha256, title = EXCLUDED.title,
                   metadata = EXCLUDED.metadata, content_type = EXCLUDED.content_type,
                   content_sha256 = EXCLUDED.content_sha256, fingerprint = EXCLUDED.fingerprint,
                   chunk_count = EXCLUDED.chunk_count, file_metadata = EXCLUDED.file_metadata,
                   caller_metadata = EXCLUDED.caller_metadata, written_by = EXCLUDED.written_by,
                   source_key = EXCLUDED.source_key, updated_at = now()""",
            [
                (
                    store.id,
                    d.id,
                    d.source,
                    d.source_sha256,
                    d.title,
                    Jsonb(d.metadata),
                    d.content_type,
                    d.content_sha256,
                    d.fingerprint,
                    len(d.chunks),
                    Jsonb(d.file_metadata),
                    Jsonb(d.caller_metadata),
                    d.written_by,
                    d.source_key,
                )
                for d in documents
            ],
        )
        copy_chunks(cur, store, [chunk for d in documents for chunk in d.chunks])


def update_metadata(
    conn: Connection,
    store: Store,
    document_id: str,
    source: str,
    source_sha256: str | None,
    metadata: dict[str, Any],
    chunk_metadata: Sequence[dict[str, Any]],
    caller_metadata: dict[str, Any] | None = None,
    file_metadata: dict[str, Any] | None = None,
    *,
    written_by: str,
    source_key: str | None = None,
) -> None:
    """Set a document's metadata and its chunks' (`chunk_metadata[i]` for chunk i); no re-embedding.

    None for `source_sha256`, `caller_metadata`, `file_metadata` or `source_key` keeps the stored value;
    `written_by` is the credential making the change.
    """
    conn.execute(
        """UPDATE documents SET metadata = %s, source = %s, source_sha256 = coalesce(%s, source_sha256),
               caller_metadata = coalesce(%s, caller_metadata), file_metadata = coalesce(%s, file_metadata),
               source_key = coalesce(%s, source_key), written_by = %s, updated_at = now()
           WHERE store_id = %s AND id = %s""",
        (
            Jsonb(metadata),
            source,
            source_sha256,
            Jsonb(caller_metadata) if caller_metadata is not None else None,
            Jsonb(file_metadata) if file_metadata is not None else None,
            source_key,
            written_by,
            store.id,
            document_id,
        ),
    )
    conn.execute(
        """UPDATE chunks AS c SET metadata = v.metadata
           FROM unnest(%s::int[], %s::jsonb[]) AS v(chunk_index, metadata)
           WHERE c.store_id = %s AND c.document_id = %s AND c.chunk_index = v.chunk_index""",
        (list(range(len(chunk_metadata))), [Jsonb(m) for m in chunk_metadata], store.id, document_id),
    )


def set_source_sha256(
    conn: Connection, store: Store, document_ids: Sequence[str], source_sha256: str, source_key: str
) -> None:
    """Record the hash and key of the source the (unchanged) documents were read from again."""
    if document_ids:
        conn.execute(
            """UPDATE documents SET source_sha256 = %s, source_key = %s
               WHERE store_id = %s AND id = ANY(%s::text[])""",
            (source_sha256, source_key, store.id, list(document_ids)),
        )


def chunk_metadata(conn: Connection, store: Store, document_id: str) -> list[dict[str, Any]]:
    """The metadata of each of the document's chunks, in chunk order."""
    rows = conn.execute(
        "SELECT metadata FROM chunks WHERE store_id = %s AND document_id = %s ORDER BY chunk_index",
        (store.id, document_id),
    ).fetchall()
    return [dict(r[0]) for r in rows]


def forget_record_sources(conn: Connection, store: Store, document_ids: Sequence[str]) -> None:
    """Forget the source key of the row sources some of `document_ids` are records of: the same file sent
    again is then parsed, and brings back the records deleted on their own."""
    if document_ids:
        conn.execute(
            """UPDATE documents SET source_key = NULL WHERE store_id = %s AND source_key IS NOT NULL
                   AND source IN (SELECT source FROM documents
                                  WHERE store_id = %s AND id = ANY(%s::text[]) AND source <> id)""",
            (store.id, store.id, list(document_ids)),
        )


def remove_documents(conn: Connection, store: Store, document_ids: Sequence[str]) -> list[str]:
    """Delete documents and their chunks (call in a transaction holding their locks); the ids that existed."""
    if not document_ids:
        return []
    rows = conn.execute(
        "DELETE FROM documents WHERE store_id = %s AND id = ANY(%s::text[]) RETURNING id",
        (store.id, list(document_ids)),
    ).fetchall()
    return [r[0] for r in rows]


def sidecar_metadata(conn: Connection, store: Store, source: str) -> dict[str, Any] | None:
    """The metadata a sidecar gave `source`, if any."""
    row = conn.execute(
        "SELECT metadata FROM source_metadata WHERE store_id = %s AND source = %s", (store.id, source)
    ).fetchone()
    return dict(row[0]) if row else None


def set_sidecar_metadata(
    conn: Connection, store: Store, source: str, metadata: dict[str, Any] | None
) -> None:
    """Upsert (None: delete) the sidecar metadata of `source`."""
    if metadata is None:
        conn.execute("DELETE FROM source_metadata WHERE store_id = %s AND source = %s", (store.id, source))
        return
    conn.execute(
        """INSERT INTO source_metadata (store_id, source, metadata) VALUES (%s, %s, %s)
           ON CONFLICT (store_id, source) DO UPDATE SET metadata = EXCLUDED.metadata""",
        (store.id, source, Jsonb(metadata)),
    )


def applied_sequencer(conn: Connection, store: Store, key: str) -> str | None:
    """The sequencer of the last event applied to object `key`."""
    row = conn.execute(
        "SELECT sequencer FROM source_sequences WHERE store_id = %s AND object_key = %s", (store.id, key)
    ).fetchone()
    return str(row[0]) if row else None


def record_sequencer(conn: Connection, store: Store, key: str, sequencer: str, deleted: bool) -> None:
    """Remember the event applied to object `key`."""
    conn.execute(
        """INSERT INTO source_sequences (store_id, object_key, sequencer, deleted) VALUES (%s, %s, %s, %s)
           ON CONFLICT (store_id, object_key) DO UPDATE SET sequencer = EXCLUDED.sequencer,
               deleted = EXCLUDED.deleted, applied_at = now()""",
        (store.id, key, sequencer, deleted),
    )


_INFO_COLUMNS = (
    "id, source, title, metadata, content_type, content_sha256, chunk_count, created_at, updated_at,"
    " written_by"
)


def get_document(conn: Connection, store: Store, document_id: str) -> tuple[Any, ...] | None:
    """The row of one document (columns as `list_documents`), or None."""
    return conn.execute(
        f"SELECT {_INFO_COLUMNS} FROM documents WHERE store_id = %s AND id = %s",  # noqa: S608
        (store.id, document_id),
    ).fetchone()


def list_documents(
    conn: Connection, store: Store, prefix: str, after: str | None, limit: int
) -> list[tuple[Any, ...]]:
    """Up to `limit` documents whose id starts with `prefix` and sorts after `after`, in byte order.

    Rows: id, source, title, metadata, content_type, content_sha256, chunk_count, created_at, updated_at,
    written_by.
    """
    return conn.execute(
        f"""SELECT {_INFO_COLUMNS} FROM documents
            WHERE store_id = %s AND starts_with(id, %s) AND (%s::text IS NULL OR id COLLATE "C" > %s)
            ORDER BY id COLLATE "C" LIMIT %s""",  # noqa: S608
        (store.id, prefix, after, after, limit),
    ).fetchall()


def source_fingerprints(conn: Connection, store: Store) -> list[tuple[str, str | None, str, str]]:
    """(source, source_sha256, content_type, fingerprint) of every document of the store."""
    rows = conn.execute(
        "SELECT source, source_sha256, content_type, fingerprint FROM documents WHERE store_id = %s",
        (store.id,),
    ).fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in rows]
