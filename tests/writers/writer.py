"""Write a table the way a team using langchain-postgres or LlamaIndex does: run in .venv-clients.

    python tests/writers/writer.py LIBRARY ACTION --dsn DSN --rows ROWS.npz [--start N --stop M]

LIBRARY: langchain-v1 (PGVector, the collection `docs` of langchain_pg_embedding; langchain-v1-typed: the
same with embedding_length, in schema lc_typed), langchain-v2 (PGVectorStore on table `lc2_docs`),
llamaindex (PGVectorStore on `data_docs`), and -hybrid variants of the last two with their full-text
columns (`lc2_hybrid`, `data_hybrid`). ACTION: `create` makes the table through the library and writes
rows [start, stop) of ROWS.npz (arrays ids, vectors, tenants, docs, optionally texts);
`add` writes more rows into it; `index` creates the HNSW index as the library (or its docs) does; `read`
prints, as JSON, the library's own top 3 for the first vector of ROWS.npz (id, text, metadata). Every
vector is given: the libraries' embedders are never asked to embed. The test runs this as a subprocess
with tests/writers/guard on PYTHONPATH (no network but loopback).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

DIM = 384
COLLECTION = "docs"
TYPED_SCHEMA = "lc_typed"
LC2_TABLE = "lc2_docs"
LC2_HYBRID_TABLE = "lc2_hybrid"
LLAMA_TABLE = "docs"  # LlamaIndex prefixes it: data_docs
LLAMA_HYBRID_TABLE = "hybrid"
OTHER_ROWS = 200
READ_K = 3


class GivenEmbeddings(Embeddings):
    """The rows come with their vectors; being asked to embed is a mistake in this script."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("the writer gives every vector explicitly")

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("the writer gives every vector explicitly")


class Batch:
    """Rows [start, stop) of the test's data file."""

    def __init__(self, path: str, start: int, stop: int | None) -> None:
        data = np.load(path)
        part = slice(start, stop)
        self.ids = [str(i) for i in data["ids"][part]]
        self.vectors = [[float(v) for v in row] for row in data["vectors"][part].astype(np.float32)]
        self.tenants = [str(t) for t in data["tenants"][part]]
        self.docs = [str(d) for d in data["docs"][part]]
        if "texts" in data:
            self.texts = [str(t) for t in data["texts"][part]]
        else:
            self.texts = [f"text {i}" for i in range(start, start + len(self.ids))]


def sqlalchemy_url(dsn: str, driver: str = "psycopg") -> str:
    """The test's libpq URI as SQLAlchemy's URL for `driver` (psycopg 3 serves sync and async alike)."""
    return dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


def langchain_v1(
    action: str, dsn: str, batch: Batch, typed: bool = False, collection_name: str = COLLECTION
) -> None:
    """PGVector (v1). Untyped: the defaults a team gets (jsonb metadata; no embedding_length, so an untyped
    `vector` column). Typed: embedding_length=384, which PGVector's docstring asks for an index; in schema
    lc_typed, through the connection's search_path (PGVector's table names are fixed; public holds the
    untyped one)."""
    from langchain_postgres import PGVector
    from sqlalchemy import create_engine, text

    engine_args: dict[str, Any] = {}
    if typed:
        with create_engine(sqlalchemy_url(dsn)).begin() as conn:
            conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {TYPED_SCHEMA}"))
        engine_args = {"connect_args": {"options": f"-c search_path={TYPED_SCHEMA},public"}}

    def store(collection: str) -> PGVector:
        return PGVector(
            GivenEmbeddings(),
            connection=sqlalchemy_url(dsn),
            collection_name=collection,
            embedding_length=DIM if typed else None,
            engine_args=engine_args,
        )

    docs = store(collection_name)
    if typed:
        # PGVector creates its tables unless one is visible on the search_path: a public one would be used.
        with docs.session_maker() as session:
            found = session.execute(text(f"SELECT to_regclass('{TYPED_SCHEMA}.langchain_pg_embedding')"))
            if found.scalar() is None:
                raise RuntimeError("public.langchain_pg_embedding exists: write the typed layout first")
    if action == "read":
        found = docs.similarity_search_with_score_by_vector(batch.vectors[0], k=READ_K)
        print_read([(d.id, d.page_content, d.metadata) for d, _ in found])
        return
    if action == "index":
        # PGVector has no call that creates an index. An untyped column is indexed through a cast, as
        # pgvector's README indexes one; a typed column plainly.
        column = "embedding" if typed else f"(embedding::vector({DIM}))"
        with docs.session_maker() as session:
            session.execute(
                text(
                    "CREATE INDEX langchain_pg_embedding_hnsw ON langchain_pg_embedding"
                    f" USING hnsw ({column} vector_cosine_ops)"
                )
            )
            session.commit()
        return
    metadatas = [{"tenant": t, "source": d} for t, d in zip(batch.tenants, batch.docs, strict=True)]
    docs.add_embeddings(batch.texts, batch.vectors, metadatas, batch.ids)
    if action == "create":
        # Another collection in the same table, which the store attached to `docs` must never return.
        n = min(OTHER_ROWS, len(batch.ids))
        ids = [f"other-{i}" for i in range(n)]
        store("other").add_embeddings(["other"] * n, batch.vectors[:n], [{"tenant": "one"}] * n, ids)


def langchain_v2(action: str, dsn: str, batch: Batch, hybrid: bool = False, table: str = "") -> None:
    """PGVectorStore (v2) on lc2_docs; hybrid: on lc2_hybrid, with HybridSearchConfig's content_tsv column,
    which the store fills on every write, and its GIN index."""
    from langchain_postgres import PGEngine, PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig
    from langchain_postgres.v2.indexes import HNSWIndex

    table = table or (LC2_HYBRID_TABLE if hybrid else LC2_TABLE)
    config = HybridSearchConfig() if hybrid else None
    engine = PGEngine.from_connection_string(url=sqlalchemy_url(dsn))
    if action == "create":
        engine.init_vectorstore_table(table, DIM, hybrid_search_config=config)
    store = PGVectorStore.create_sync(engine, GivenEmbeddings(), table, hybrid_search_config=config)
    if action == "read":
        found = store.similarity_search_by_vector(batch.vectors[0], k=READ_K)
        print_read([(d.id, d.page_content, d.metadata) for d in found])
        return
    if action == "index":
        store.apply_vector_index(HNSWIndex())  # <table>langchainvectorindex, vector_cosine_ops
        return
    metadatas = [{"tenant": t, "source": d} for t, d in zip(batch.tenants, batch.docs, strict=True)]
    store.add_embeddings(batch.texts, batch.vectors, metadatas, batch.ids)
    if hybrid and action == "create":
        store.apply_hybrid_search_index()


def llamaindex(action: str, dsn: str, batch: Batch, hybrid: bool = False, table: str = "") -> None:
    """PGVectorStore on data_docs; hybrid: hybrid_search=True on data_hybrid, whose text_search_tsv column
    PostgreSQL computes from the text (english)."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.vector_stores.postgres import PGVectorStore

    # LlamaIndex's docs create the index through hnsw_kwargs, when the store sets up its table.
    hnsw: dict[str, Any] | None = None
    if action == "index":
        hnsw = {
            "hnsw_m": 16,
            "hnsw_ef_construction": 64,
            "hnsw_ef_search": 40,
            "hnsw_dist_method": "vector_cosine_ops",
        }
    # LlamaIndex's own drivers (from_params' defaults): psycopg2, and asyncpg (not used here). With psycopg 3
    # its query fails: it binds hnsw.ef_search as a parameter of SET, which server-side binding refuses.
    store = PGVectorStore.from_params(
        connection_string=sqlalchemy_url(dsn, "psycopg2"),
        async_connection_string=sqlalchemy_url(dsn, "asyncpg"),
        table_name=table or (LLAMA_HYBRID_TABLE if hybrid else LLAMA_TABLE),
        embed_dim=DIM,
        hnsw_kwargs=hnsw,
        hybrid_search=hybrid,
        text_search_config="english",
    )
    if action == "read":
        result = store.query(VectorStoreQuery(query_embedding=batch.vectors[0], similarity_top_k=READ_K))
        # Rows without LlamaIndex's _node_content are read by its fallback: metadata as stored, and no
        # relationships (node.ref_doc_id None); its delete(ref_doc_id) and filters read metadata_ itself.
        print_read([(n.node_id, n.get_content(), n.metadata) for n in result.nodes or []])
        return
    if action == "index":
        # The store sets itself up (CREATE INDEX IF NOT EXISTS) on its first use: here a query.
        store.query(VectorStoreQuery(query_embedding=[1.0] + [0.0] * (DIM - 1), similarity_top_k=1))
        return
    nodes = [
        TextNode(
            id_=node_id,
            text=text,
            embedding=vector,
            metadata={"tenant": tenant},
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)},
        )
        for node_id, text, vector, tenant, doc in zip(
            batch.ids, batch.texts, batch.vectors, batch.tenants, batch.docs, strict=True
        )
    ]
    store.add(nodes)


def print_read(found: list[tuple[Any, str, dict[str, Any]]]) -> None:
    """What the library's own search returned, best first, as JSON on stdout: id, text, metadata."""
    print(json.dumps([{"id": str(i), "text": text, "metadata": metadata} for i, text, metadata in found]))


WRITERS: dict[str, Callable[[str, str, Batch], None]] = {
    "langchain-v1": langchain_v1,
    "langchain-v1-typed": partial(langchain_v1, typed=True),
    "langchain-v2": langchain_v2,
    "langchain-v2-hybrid": partial(langchain_v2, hybrid=True),
    "llamaindex": llamaindex,
    "llamaindex-hybrid": partial(llamaindex, hybrid=True),
    # Tables of their own for stores the service writes (test_the_libraries_read_what_a_writable_store_wrote).
    "langchain-v1-ours": partial(langchain_v1, collection_name="ours"),
    "langchain-v2-ours": partial(langchain_v2, table="lc2_ours"),
    "llamaindex-ours": partial(llamaindex, table="ours"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("library", choices=sorted(WRITERS))
    parser.add_argument("action", choices=["create", "add", "index", "read"])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--rows", required=True, help="the .npz file of the test's rows")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--stop", type=int, default=None)
    args = parser.parse_args()
    WRITERS[args.library](args.action, args.dsn, Batch(args.rows, args.start, args.stop))


if __name__ == "__main__":
    main()
