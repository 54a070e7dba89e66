"""The SQL of reading a document's chunks back, a page at a time. Every value is a bound parameter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store


def list_chunks(
    conn: Connection, store: Store, document_id: str, after: int | None, limit: int
) -> list[tuple[Any, ...]]:
    """Up to `limit` chunks of the document whose index is above `after`, in chunk order (the primary key's
    order: one range of it per page). Rows: id, chunk_index, content, metadata."""
    return conn.execute(
        """SELECT id, chunk_index, content, metadata FROM chunks
           WHERE store_id = %s AND document_id = %s AND (%s::int IS NULL OR chunk_index > %s)
           ORDER BY chunk_index LIMIT %s""",
        (store.id, document_id, after, after, limit),
    ).fetchall()


def document_exists(conn: Connection, store: Store, document_id: str) -> bool:
    """Whether the store holds the document."""
    row = conn.execute(
        "SELECT 1 FROM documents WHERE store_id = %s AND id = %s", (store.id, document_id)
    ).fetchone()
    return row is not None


def chunks_at(conn: Connection, store: Store, keys: Sequence[tuple[str, int]]) -> list[tuple[Any, ...]]:
    """The chunks of `store` at `keys` (document id, chunk index) that exist, one probe of the primary
    key each. Rows: document_id, chunk_index, content, metadata."""
    return conn.execute(
        """SELECT c.document_id, c.chunk_index, c.content, c.metadata
           FROM unnest(%s::text[], %s::int[]) AS k (document_id, chunk_index)
               JOIN chunks c ON c.store_id = %s AND c.document_id = k.document_id
                   AND c.chunk_index = k.chunk_index""",
        ([k[0] for k in keys], [k[1] for k in keys], store.id),
    ).fetchall()
