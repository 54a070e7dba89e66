"""stores.chunk_count follows every write of chunks: the exact-or-index choice reads it.

The subject is db/'s own bookkeeping, so the tests call its write functions directly."""

from __future__ import annotations

from typing import Any

from retrieval_core.db.documents import ChunkRow, DocumentRow, delete_documents, replace_documents
from retrieval_core.db.stores import count_chunks, create_store, drop_store, find_store

DIM = 4


def _document(name: str, chunks: int) -> DocumentRow:
    rows = [ChunkRow(name, i, f"{name} part {i}", {}, [1.0, float(i), 0.0, 0.5]) for i in range(chunks)]
    return DocumentRow(name, name, {}, "-", rows)


def _count(conn: Any, name: str) -> int:
    store = find_store(conn, name)
    assert store is not None
    assert store.chunk_count == count_chunks(conn, store)  # the kept count is the true one
    return store.chunk_count


def test_the_chunk_count_follows_writes_replacements_deletes_and_other_stores(service: Any) -> None:
    with service.database.connection() as conn:
        for name in ("counted-a", "counted-b"):
            existing = find_store(conn, name)
            if existing is not None:
                drop_store(conn, existing)
        a = create_store(conn, "counted-a", "counted-a", "synthetic", DIM)
        b = create_store(conn, "counted-b", "counted-b", "synthetic", DIM)
        assert _count(conn, "counted-a") == 0

        replace_documents(conn, a, [_document("one", 3), _document("two", 5)])
        replace_documents(conn, b, [_document("one", 7)])
        assert (_count(conn, "counted-a"), _count(conn, "counted-b")) == (8, 7)

        replace_documents(conn, a, [_document("two", 2)])  # a document re-written shorter
        assert _count(conn, "counted-a") == 5
        delete_documents(conn, a, ["one"])  # its chunks go by cascade
        assert (_count(conn, "counted-a"), _count(conn, "counted-b")) == (2, 7)

        replace_documents(conn, a, [_document("three", 4)])
        assert _count(conn, "counted-a") == 6

        drop_store(conn, a)
        assert _count(conn, "counted-b") == 7
        drop_store(conn, b)


def test_a_rolled_back_write_leaves_the_count_as_it_was(service: Any) -> None:
    with service.database.connection() as conn:
        existing = find_store(conn, "counted-c")
        if existing is not None:
            drop_store(conn, existing)
        store = create_store(conn, "counted-c", "counted-c", "synthetic", DIM)
        replace_documents(conn, store, [_document("one", 3)])
        try:
            with conn.transaction():
                replace_documents(conn, store, [_document("two", 9)])
                raise RuntimeError("the writer failed after its chunks went in")
        except RuntimeError:
            pass
        assert _count(conn, "counted-c") == 3
        drop_store(conn, store)
