"""The presets and a view, on tables made with the DDL the libraries run (their real writers are not installed
here: langchain-postgres pins pgvector<0.4; tests with the real writers remain to be written).

Each layout is created empty of vector indexes and filled with the same 3,000 synthetic rows (384
dimensions, tenant `one` on 1% of them). Attached as it is, every search is an exact scan: ids and order
must equal an exact numpy search, with and without filters. Then the layout's own HNSW index is created,
the store refreshed, and recall@10 through the index must be at least 0.95, unfiltered and under the 1%
filter, with the full k.

DDL sources (read from the libraries' code): langchain-postgres 0.0.x `vectorstores.py` (SQLAlchemy models
CollectionStore / EmbeddingStore, the GIN index ix_cmetadata_gin), langchain-postgres v2 `engine.py`
`ainit_vectorstore_table` and `async_vectorstore.py` `aapply_vector_index`, llama-index-vector-stores-postgres
`base.py` `get_data_model` and `_create_hnsw_index`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.integration.attached_support import assert_index_recall
from tests.roles import grant_to_service_roles

STORES = "/api/v1/stores"
SEARCH = "/api/v1/chunks/similarity-search"
DIM = 384
ROWS = 3_000
K = 10


@dataclass
class Rows:
    ids: list[str]
    vectors: np.ndarray  # as stored (single precision), unit length
    tenants: np.ndarray
    docs: list[str]
    queries: np.ndarray

    def exact(self, query: np.ndarray, mask: np.ndarray | None = None) -> list[str]:
        mask = np.ones(len(self.ids), bool) if mask is None else mask
        distances = 1.0 - self.vectors[mask] @ (query / np.linalg.norm(query))
        return [self.ids[i] for i in np.flatnonzero(mask)[np.argsort(distances, kind="stable")[:K]]]


def synthetic(ids: list[str]) -> Rows:
    rng = np.random.default_rng(21)
    centers = rng.normal(size=(40, DIM))
    vectors = centers[rng.integers(0, 40, ROWS)] + 0.7 * rng.normal(size=(ROWS, DIM))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    tenants = np.array(["rest"] * ROWS, dtype=object)
    tenants[rng.permutation(ROWS)[:30]] = "one"
    queries = (centers[rng.integers(0, 40, 20)] + 0.7 * rng.normal(size=(20, DIM))).astype(np.float32)
    docs = [f"doc-{i // 10:04d}" for i in range(ROWS)]
    stored = vectors.astype(np.float64)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    return Rows(ids, stored, tenants, docs, queries)


def literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(v)) for v in vector.astype(np.float32)) + "]"


@dataclass
class Layout:
    name: str
    rows: Rows
    source: dict[str, Any]
    index_ddl: str  # the HNSW index the library (or its docs) creates
    index_name: str
    metadata_check: Callable[[dict[str, Any]], bool]


def langchain_v1(conn: psycopg.Connection[Any]) -> Layout:
    """langchain-postgres PGVector (v1): two tables, collections in one embedding table, untyped vector."""
    conn.execute("DROP SCHEMA IF EXISTS lc CASCADE")
    conn.execute("CREATE SCHEMA lc")
    conn.execute(
        """CREATE TABLE lc.langchain_pg_collection (
               uuid UUID NOT NULL, name VARCHAR NOT NULL, cmetadata JSON,
               PRIMARY KEY (uuid), UNIQUE (name));
           CREATE TABLE lc.langchain_pg_embedding (
               id VARCHAR NOT NULL, collection_id UUID, embedding VECTOR, document VARCHAR, cmetadata JSONB,
               PRIMARY KEY (id),
               FOREIGN KEY(collection_id) REFERENCES lc.langchain_pg_collection (uuid) ON DELETE CASCADE);
           CREATE INDEX ix_cmetadata_gin ON lc.langchain_pg_embedding USING gin (cmetadata jsonb_path_ops);
           CREATE UNIQUE INDEX ix_langchain_pg_embedding_id ON lc.langchain_pg_embedding (id);"""
    )
    docs_id, other_id = uuid.uuid4(), uuid.uuid4()
    conn.execute(
        "INSERT INTO lc.langchain_pg_collection VALUES (%s, 'docs', '{}'), (%s, 'other', '{}')",
        (docs_id, other_id),
    )
    rows = synthetic([str(uuid.UUID(int=i + 1)) for i in range(ROWS)])
    with conn.cursor().copy("COPY lc.langchain_pg_embedding FROM STDIN") as copy:
        for i, row_id in enumerate(rows.ids):
            meta = {"tenant": rows.tenants[i], "source": rows.docs[i]}
            copy.write_row((row_id, docs_id, literal(rows.vectors[i]), f"text {i}", json.dumps(meta)))
        # Another collection in the same table: never part of the store.
        for i in range(200):
            meta = {"tenant": "one"}
            copy.write_row((f"other-{i}", other_id, literal(rows.vectors[i]), "other", json.dumps(meta)))
    return Layout(
        "langchain-postgres",
        rows,
        {"preset": "langchain-postgres", "collection": "docs", "table": "lc.langchain_pg_embedding"},
        # An untyped column takes an expression index on its cast (langchain-postgres documents this).
        "CREATE INDEX lc_hnsw ON lc.langchain_pg_embedding"
        " USING hnsw ((embedding::vector(384)) vector_cosine_ops)",
        "lc_hnsw",
        lambda metadata: "tenant" in metadata and metadata["documentId"] == metadata["_id"],
    )


def langchain_v2(conn: psycopg.Connection[Any]) -> Layout:
    """langchain-postgres PGVectorStore (v2): one table per store, UUID ids, json metadata."""
    conn.execute("DROP SCHEMA IF EXISTS lc2 CASCADE")
    conn.execute("CREATE SCHEMA lc2")
    conn.execute(
        """CREATE TABLE "lc2"."docs"(
            "langchain_id" UUID PRIMARY KEY,
            "content" TEXT NOT NULL,
            "embedding" vector(384) NOT NULL,
            "langchain_metadata" JSON
        );"""
    )
    rows = synthetic([str(uuid.UUID(int=10_000 + i)) for i in range(ROWS)])
    with conn.cursor().copy("COPY lc2.docs FROM STDIN") as copy:
        for i, row_id in enumerate(rows.ids):
            meta = {"tenant": rows.tenants[i]}
            copy.write_row((row_id, f"text {i}", literal(rows.vectors[i]), json.dumps(meta)))
    return Layout(
        "langchain-postgres-v2",
        rows,
        {"preset": "langchain-postgres-v2", "table": "lc2.docs"},
        'CREATE INDEX docs_langchainvectorindex ON "lc2"."docs" USING hnsw (embedding vector_cosine_ops)',
        "docs_langchainvectorindex",
        lambda metadata: set(metadata) == {"tenant", "documentId", "_id"},
    )


def llamaindex(conn: psycopg.Connection[Any]) -> Layout:
    """LlamaIndex PGVectorStore: data_<table_name>, bigserial id, node ids, json metadata_."""
    conn.execute("DROP SCHEMA IF EXISTS li CASCADE")
    conn.execute("CREATE SCHEMA li")
    conn.execute(
        """CREATE TABLE li.data_docs (
               id BIGSERIAL NOT NULL, index_id VARCHAR NOT NULL, text VARCHAR NOT NULL, metadata_ JSON,
               node_id VARCHAR, embedding VECTOR(384), PRIMARY KEY (id))"""
    )
    rows = synthetic([f"node-{i:05d}" for i in range(ROWS)])
    with conn.cursor().copy(
        "COPY li.data_docs (index_id, text, metadata_, node_id, embedding) FROM STDIN"
    ) as copy:
        for i, row_id in enumerate(rows.ids):
            meta = {"tenant": rows.tenants[i], "doc_id": rows.docs[i], "ref_doc_id": rows.docs[i]}
            copy.write_row(("index-1", f"text {i}", json.dumps(meta), row_id, literal(rows.vectors[i])))
    return Layout(
        "llamaindex",
        rows,
        {"preset": "llamaindex", "table": "li.data_docs"},
        "CREATE INDEX IF NOT EXISTS data_docs_embedding_idx ON li.data_docs"
        " USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
        "data_docs_embedding_idx",
        lambda metadata: metadata["ref_doc_id"].startswith("doc-"),
    )


def shared_tables_view(conn: psycopg.Connection[Any]) -> Layout:
    """A shared database of documents, chunks and embeddings tables, served through one view."""
    conn.execute("DROP SCHEMA IF EXISTS shared CASCADE")
    conn.execute("CREATE SCHEMA shared")
    conn.execute(
        """CREATE TABLE shared.documents (
               id uuid PRIMARY KEY, file_name text NOT NULL, content_type text NOT NULL, title text NOT NULL);
           CREATE TABLE shared.chunks (
               id uuid PRIMARY KEY, document_id uuid NOT NULL REFERENCES shared.documents ON DELETE CASCADE,
               chunk_index integer NOT NULL, page_number integer, content text NOT NULL,
               tenant text NOT NULL);
           CREATE TABLE shared.embeddings (
               chunk_id uuid PRIMARY KEY REFERENCES shared.chunks ON DELETE CASCADE,
               embedding vector(384) NOT NULL);
           CREATE VIEW shared.rag_chunks AS
               SELECT c.id, c.content, e.embedding, c.document_id, d.title,
                      jsonb_build_object('fileName', d.file_name, 'chunkIndex', c.chunk_index,
                                         'pageNumber', c.page_number, 'contentType', d.content_type,
                                         'tenant', c.tenant) AS metadata
               FROM shared.chunks c
               JOIN shared.embeddings e ON e.chunk_id = c.id
               JOIN shared.documents d ON d.id = c.document_id;"""
    )
    rows = synthetic([str(uuid.UUID(int=20_000 + i)) for i in range(ROWS)])
    documents = {doc: uuid.uuid4() for doc in dict.fromkeys(rows.docs)}
    with conn.cursor().copy("COPY shared.documents FROM STDIN") as copy:
        for name, document_id in documents.items():
            copy.write_row((document_id, f"{name}.pdf", "application/pdf", f"Title of {name}"))
    with conn.cursor().copy("COPY shared.chunks FROM STDIN") as copy:
        for i, row_id in enumerate(rows.ids):
            copy.write_row((row_id, documents[rows.docs[i]], i % 10, 1 + i % 7, f"text {i}", rows.tenants[i]))
    with conn.cursor().copy("COPY shared.embeddings FROM STDIN") as copy:
        for i, row_id in enumerate(rows.ids):
            copy.write_row((row_id, literal(rows.vectors[i])))
    rows.docs = [str(documents[d]) for d in rows.docs]
    columns = {
        "id": "id",
        "content": "content",
        "embedding": "embedding",
        "metadata": "metadata",
        "documentId": "document_id",
        "title": "title",
    }
    return Layout(
        "seed-002-view",
        rows,
        {"table": "shared.rag_chunks", "columns": columns},
        "CREATE INDEX embeddings_hnsw ON shared.embeddings USING hnsw (embedding vector_cosine_ops)",
        "embeddings_hnsw",
        lambda metadata: (
            {"fileName", "chunkIndex", "pageNumber", "contentType", "documentId", "title"} <= set(metadata)
        ),
    )


LAYOUTS = [langchain_v1, langchain_v2, llamaindex, shared_tables_view]


@pytest.fixture(scope="module", params=LAYOUTS, ids=lambda f: f.__name__)
def layout(request: pytest.FixtureRequest, postgres_dsn: str, service: Any) -> Layout:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        made: Layout = request.param(conn)
        grant_to_service_roles(conn, made.source["table"].split(".")[0])
        conn.execute("ANALYZE")
    return made


def search(client: TestClient, store: str, query: np.ndarray, **body: Any) -> list[dict[str, Any]]:
    payload = {"queryEmbedding": query.tolist(), "topK": K, "store": store, "cacheTTLms": 0, **body}
    response = client.post(SEARCH, json=payload)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_a_layout_is_served_exactly_then_through_its_index(
    client: TestClient, layout: Layout, postgres_dsn: str, service: Any
) -> None:
    name = f"{layout.name}-{uuid.uuid4().hex[:6]}"
    created = client.put(f"{STORES}/{name}", json={"source": layout.source})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["source"]["rows"] == ROWS and body["source"]["vectorIndex"] is None
    assert body["dimension"] == DIM and body["embeddingModel"] == service.embedder.model
    rows = layout.rows
    one = np.asarray(rows.tenants == "one")
    # docIds match the document id column, or the row id where a layout has none (the presets).
    by_document = "documentId" in layout.source.get("columns", {})
    keys = rows.docs if by_document else rows.ids
    some_docs = sorted(set(keys))[:3] if by_document else rows.ids[::500]
    in_docs = np.isin(np.array(keys), some_docs)

    # No vector index yet: the exact scan answers, with numpy's ids and order.
    for query in rows.queries:
        results = search(client, name, query)
        assert [r["id"] for r in results] == rows.exact(query)
        assert all(layout.metadata_check({**r["metadata"], "_id": r["id"]}) for r in results)
        assert [r["id"] for r in search(client, name, query, metadataFilter={"tenant": "one"})] == rows.exact(
            query, one
        )
        assert [r["id"] for r in search(client, name, query, docIds=some_docs)] == rows.exact(query, in_docs)

    # The layout's own index, then a refresh: the index serves.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(layout.index_ddl)
        conn.execute("ANALYZE")
    refreshed = client.post(f"{STORES}/{name}/refresh")
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["source"]["vectorIndex"] == layout.index_name

    assert_index_recall(postgres_dsn, service.embedder, name, rows.queries, rows.exact, one, K)
