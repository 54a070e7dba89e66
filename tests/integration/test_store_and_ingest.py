"""Write path and schema against the real embedded PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest

from retrieval_core import ingest
from retrieval_core.db.documents import ChunkRow, DocumentRow, replace_documents
from retrieval_core.db.migrations.runner import migrate
from retrieval_core.db.migrations.steps import MIGRATIONS
from retrieval_core.db.stores import count_chunks
from retrieval_core.exceptions import DimensionMismatchError, EmbeddingModelMismatchError
from retrieval_core.ingest import SourceDocument, ensure_store, ingest_documents


class FixedEmbedder:
    """A deterministic embedder for write-path tests that do not need meaning."""

    def __init__(self, model: str = "fixed-test", dimension: int = 8, returns: int | None = None) -> None:
        self.model = model
        self.dimension = dimension
        self.returns = returns or dimension
        self.calls: list[int] = []

    def embed(self, texts, kind):  # type: ignore[no-untyped-def]
        self.calls.append(len(texts))
        return [[float((hash(t) >> i) & 1) + 0.1 for i in range(self.returns)] for t in texts]


def chunks_of(service, store, doc_id: str) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    with service.database.connection() as conn:
        return conn.execute(
            "SELECT chunk_index, content FROM chunks WHERE store_id = %s AND document_id = %s"
            " ORDER BY chunk_index",
            (store.id, doc_id),
        ).fetchall()


def test_migrations_are_idempotent_and_versioned(service, postgres_dsn: str) -> None:  # type: ignore[no-untyped-def]
    assert migrate(postgres_dsn) == []
    with psycopg.connect(postgres_dsn) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        indexes = {r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'chunks'")}
    assert versions == [v for v, _, _ in MIGRATIONS]
    assert any("gin (metadata jsonb_path_ops)" in i for i in indexes)
    assert any("gin (tsv)" in i for i in indexes)


def test_new_store_gets_a_partial_hnsw_cosine_index(service) -> None:  # type: ignore[no-untyped-def]
    store = ensure_store(service.database, FixedEmbedder(model="idx-test"), "index-check")
    with service.database.connection() as conn:
        (definition,) = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            (f"chunks_embedding_hnsw_store_{store.id}",),
        ).fetchone()
    assert "hnsw" in definition and "vector_cosine_ops" in definition
    assert "vector(8)" in definition and f"store_id = {store.id}" in definition


def test_reingest_replaces_all_chunks_and_bumps_version(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service.database, embedder, "reingest")
    long_doc = SourceDocument(id="d", text=" ".join(f"word{i}." for i in range(400)))
    ingest_documents(service.database, embedder, store, [long_doc], 200, 20, progress=False)
    before = chunks_of(service, store, "d")
    assert len(before) > 5
    version_before = service.get_store("reingest").version

    ingest_documents(
        service.database, embedder, store, [SourceDocument(id="d", text="short now")], 200, 20, progress=False
    )
    assert chunks_of(service, store, "d") == [(0, "short now")]
    assert service.get_store("reingest").version > version_before


def test_unchanged_documents_are_not_reembedded(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service.database, embedder, "unchanged")
    docs = [SourceDocument(id=f"d{i}", text=f"text {i}") for i in range(3)]
    ingest_documents(service.database, embedder, store, docs, 200, 20, progress=False)
    calls = len(embedder.calls)
    report = ingest_documents(service.database, embedder, store, docs, 200, 20, progress=False)
    assert report.documents_unchanged == 3 and report.documents_written == 0
    assert len(embedder.calls) == calls


def test_same_id_twice_in_one_input_keeps_the_later(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service.database, embedder, "dupes")
    docs = [SourceDocument(id="x", text="first"), SourceDocument(id="x", text="second")]
    ingest_documents(service.database, embedder, store, docs, 200, 20, progress=False)
    assert chunks_of(service, store, "x") == [(0, "second")]


def test_failed_ingest_leaves_previous_version_intact(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service.database, embedder, "atomic")
    ingest_documents(
        service.database, embedder, store, [SourceDocument(id="a", text="old text")], 200, 20, progress=False
    )
    broken = FixedEmbedder(returns=5)  # the provider answers with the wrong dimension
    with pytest.raises(DimensionMismatchError, match="5 dimensions but store 'atomic' declares 8"):
        ingest_documents(
            service.database,
            broken,
            store,
            [SourceDocument(id="a", text="new text")],
            200,
            20,
            progress=False,
        )
    assert chunks_of(service, store, "a") == [(0, "old text")]


def test_ingest_with_another_model_is_refused(service) -> None:  # type: ignore[no-untyped-def]
    ensure_store(service.database, FixedEmbedder(model="model-a"), "model-pinned")
    with pytest.raises(EmbeddingModelMismatchError, match="model-a"):
        ensure_store(service.database, FixedEmbedder(model="model-b"), "model-pinned")


def test_delete_removes_documents_and_their_chunks(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service.database, embedder, "deletes")
    docs = [SourceDocument(id=i, text=f"text {i}") for i in ("keep", "drop")]
    ingest_documents(service.database, embedder, store, docs, 200, 20, progress=False)
    assert ingest.delete_documents(service.database, store, ["drop", "missing"]) == ["drop"]
    assert chunks_of(service, store, "drop") == []
    assert chunks_of(service, store, "keep") == [(0, "text keep")]
    with service.database.connection() as conn:
        assert count_chunks(conn, store) == 1


def test_database_rejects_a_vector_of_the_wrong_dimension(service) -> None:  # type: ignore[no-untyped-def]
    # Even a writer that bypassed our checks cannot store a wrong-length vector: the index cast refuses it.
    store = ensure_store(service.database, FixedEmbedder(), "db-guard")
    row = DocumentRow("d", "", {}, "h", [ChunkRow("d", 0, "x", {}, [0.1] * 3)])
    with (
        pytest.raises(psycopg.errors.DataException, match="expected 8 dimensions"),
        service.database.connection() as conn,
    ):
        replace_documents(conn, store, [row])
