"""The write path (through `DocumentService`) and the schema, against the real embedded PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest

from retrieval_core.db.documents import ChunkRow, DocumentRow, replace_documents
from retrieval_core.db.migrations.runner import migrate
from retrieval_core.db.migrations.steps import MIGRATIONS
from retrieval_core.db.stores import count_chunks
from retrieval_core.exceptions import DimensionMismatchError, EmbeddingModelMismatchError
from tests.writing import TextDocument, document_service, ensure_store, write_documents


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
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename IN ('chunks', 'keyword_chunks')"
            )
        }
    assert versions == [v for v, _, _ in MIGRATIONS]
    assert any(
        "gin (chunk_metadata_scope(store_id, metadata) jsonb_path_ops) WITH (fastupdate=off)" in i
        for i in indexes
    )
    assert any("gin (keyword_scope(store_id, tsv)) WITH (fastupdate=off)" in i for i in indexes)


def test_a_new_store_adds_nothing_to_the_schema(service) -> None:  # type: ignore[no-untyped-def]
    def relations() -> set[str]:
        with service.database.connection() as conn:
            rows = conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
                " UNION ALL SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace"
            ).fetchall()
        return {r[0] for r in rows}

    before = relations()
    embedder = FixedEmbedder(model="idx-test")
    store = ensure_store(service, "index-check", embedder)
    write_documents(service, store, [TextDocument(id="d", text="one small document")], 200, 20, embedder)
    assert relations() == before


def test_a_rewrite_replaces_all_chunks_and_bumps_version(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service, "reingest", embedder)
    long_doc = TextDocument(id="d", text=" ".join(f"word{i}." for i in range(400)))
    write_documents(service, store, [long_doc], 200, 20, embedder)
    before = chunks_of(service, store, "d")
    assert len(before) > 5
    version_before = service.get_store("reingest").version

    write_documents(service, store, [TextDocument(id="d", text="short now")], 200, 20, embedder)
    assert chunks_of(service, store, "d") == [(0, "short now")]
    assert service.get_store("reingest").version > version_before


def test_unchanged_documents_are_not_reembedded(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service, "unchanged", embedder)
    docs = [TextDocument(id=f"d{i}", text=f"text {i}") for i in range(3)]
    write_documents(service, store, docs, 200, 20, embedder)
    calls = len(embedder.calls)
    report = write_documents(service, store, docs, 200, 20, embedder)
    assert report.documents_unchanged == 3 and report.documents_written == 0
    assert len(embedder.calls) == calls


def test_documents_without_text_are_counted_empty_and_the_others_written(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service, "empties", embedder)
    docs = [TextDocument(id="blank", text=" \n\n "), TextDocument(id="full", text="some text")]
    report = write_documents(service, store, docs, 200, 20, embedder)
    assert (report.documents_written, report.documents_empty, report.chunks_written) == (1, 1, 1)
    assert chunks_of(service, store, "blank") == []
    assert chunks_of(service, store, "full") == [(0, "some text")]


def test_what_shapes_the_chunks_is_fingerprinted(service) -> None:  # type: ignore[no-untyped-def]
    # Another chunking or title re-embeds; the same text under the same settings does not.
    embedder = FixedEmbedder()
    store = ensure_store(service, "fingerprints", embedder)
    doc = TextDocument(id="d", text=" ".join(f"word{i}." for i in range(100)))
    write_documents(service, store, [doc], 200, 20, embedder)
    calls = len(embedder.calls)
    assert write_documents(service, store, [doc], 200, 20, embedder).documents_unchanged == 1
    assert len(embedder.calls) == calls
    rechunked = write_documents(service, store, [doc], 300, 20, embedder)
    assert rechunked.documents_written == 1 and len(embedder.calls) == calls + 1
    assert len(chunks_of(service, store, "d")) == rechunked.chunks_written
    titled = TextDocument(id="d", text=doc.text, title="A title")
    assert write_documents(service, store, [titled], 300, 20, embedder).documents_written == 1
    assert len(embedder.calls) == calls + 2


def test_same_id_twice_in_one_input_keeps_the_later(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service, "dupes", embedder)
    docs = [TextDocument(id="x", text="first"), TextDocument(id="x", text="second")]
    write_documents(service, store, docs, 200, 20, embedder)
    assert chunks_of(service, store, "x") == [(0, "second")]


def test_failed_write_leaves_previous_version_intact(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service, "atomic", embedder)
    write_documents(service, store, [TextDocument(id="a", text="old text")], 200, 20, embedder)
    broken = FixedEmbedder(returns=5)  # the provider answers with the wrong dimension
    with pytest.raises(DimensionMismatchError, match="5 dimensions but store 'atomic' declares 8"):
        write_documents(service, store, [TextDocument(id="a", text="new text")], 200, 20, broken)
    assert chunks_of(service, store, "a") == [(0, "old text")]


def test_writing_with_another_model_is_refused(service) -> None:  # type: ignore[no-untyped-def]
    ensure_store(service, "model-pinned", FixedEmbedder(model="model-a"))
    with pytest.raises(EmbeddingModelMismatchError, match="model-a"):
        ensure_store(service, "model-pinned", FixedEmbedder(model="model-b"))


def test_delete_removes_documents_and_their_chunks(service) -> None:  # type: ignore[no-untyped-def]
    embedder = FixedEmbedder()
    store = ensure_store(service, "deletes", embedder)
    docs = [TextDocument(id=i, text=f"text {i}") for i in ("keep", "drop")]
    write_documents(service, store, docs, 200, 20, embedder)
    documents = document_service(service, embedder)
    assert [documents.delete_source(store.name, i) for i in ("drop", "missing")] == [["drop"], []]
    assert chunks_of(service, store, "drop") == []
    assert chunks_of(service, store, "keep") == [(0, "text keep")]
    with service.database.connection() as conn:
        assert count_chunks(conn, store) == 1


def test_database_rejects_a_vector_of_the_wrong_dimension(service) -> None:  # type: ignore[no-untyped-def]
    # Even a writer that bypassed our checks cannot store a wrong-length vector: a trigger refuses it.
    store = ensure_store(service, "db-guard", FixedEmbedder())
    row = DocumentRow("d", "", {}, "h", [ChunkRow("d", 0, "x", {}, [0.1] * 3)])
    with (
        pytest.raises(psycopg.errors.DataException, match="store db-guard expected 8 dimensions, not 3"),
        service.database.connection() as conn,
    ):
        replace_documents(conn, store, [row])
