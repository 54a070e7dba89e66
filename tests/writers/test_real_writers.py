"""Attached stores with the real writers: tables written by langchain-postgres and LlamaIndex themselves.

Each library, in .venv-clients (ci/writers.txt) and with no network but loopback (guard/sitecustomize.py),
writes 3,000 synthetic rows (384 dimensions, tenant `one` on 1% of them, ten rows per document) through
its public API into the embedded PostgreSQL of this session: writer.py, run as a subprocess. The table is
then attached with its preset over HTTP. With no vector index every search is an exact scan: ids and
order must equal an exact numpy search over the same rows, unfiltered, under the 1% tenant filter and
under a document filter. The library then creates its HNSW index, the store is refreshed, and recall@10
through the index alone must be at least 0.95, unfiltered and under the 1% filter with the full k.
Last, the library adds rows: a cached answer stays as it was until POST .../refresh, after which the
new rows are found. Separately, the full-text columns of LlamaIndex's hybrid_search=True table and of
langchain-postgres v2's HybridSearchConfig table serve hybrid search when mapped as columns.fulltext.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.integration.attached_support import assert_index_recall
from tests.integration.test_attached_presets import DIM, ROWS, K, Rows, synthetic
from tests.roles import grant_tables_to_service_roles

STORES = "/api/v1/stores"
SEARCH = "/api/v1/chunks/similarity-search"
WRITERS = Path(__file__).resolve().parent
REFUSED = "writers guard: network refused"
NEW_ROWS = 5


@dataclass(frozen=True)
class Library:
    name: str  # writer.py's LIBRARY
    source: dict[str, Any]  # the store's `source` block
    index_name: str  # the HNSW index the library creates
    doc_key: str  # the metadata key holding a row's document

    def ids(self, count: int) -> list[str]:
        if self.name == "llamaindex":
            return [f"node-{i:05d}" for i in range(count)]
        return [str(uuid.UUID(int=i + 1)) for i in range(count)]  # v2 ids must be uuids


LIBRARIES = [
    # embedding_length set: a typed vector(384) column, indexed plainly. First: with a
    # public.langchain_pg_embedding on its search_path, PGVector would write into that one.
    Library(
        "langchain-v1-typed",
        {"preset": "langchain-postgres", "collection": "docs", "table": "lc_typed.langchain_pg_embedding"},
        "langchain_pg_embedding_hnsw",
        "source",
    ),
    Library(
        "langchain-v1",
        {"preset": "langchain-postgres", "collection": "docs"},
        "langchain_pg_embedding_hnsw",
        "source",
    ),
    # PGVectorStore names its index <table> + "langchainvectorindex", with no underscore between.
    Library(
        "langchain-v2",
        {"preset": "langchain-postgres-v2", "table": "lc2_docs"},
        "lc2_docslangchainvectorindex",
        "source",
    ),
    Library(
        "llamaindex", {"preset": "llamaindex", "table": "data_docs"}, "data_docs_embedding_idx", "ref_doc_id"
    ),
]


def writer_env() -> dict[str, str]:
    """A bare environment: the guard on PYTHONPATH, the hubs offline, LangSmith tracing off."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(WRITERS / "guard"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "LANGCHAIN_TRACING_V2": "false",
    }


def run_python(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, *args], env=writer_env(), capture_output=True, text=True, timeout=300, check=False
    )


def granted(dsn: str, source: dict[str, Any], writable: bool = False) -> None:
    """What the owner of a library's tables grants the service's roles (docs/security.md, "Attached
    tables"): the service signs in as its write role, as the deployed documents function does."""
    import psycopg

    schema, _, table = (source.get("table") or "langchain_pg_embedding").rpartition(".")
    tables = [table, "langchain_pg_collection"] if source["preset"] == "langchain-postgres" else [table]
    with psycopg.connect(dsn, autocommit=True) as conn:
        grant_tables_to_service_roles(conn, schema or "public", tables, writable)


def write(
    python: str, library: Library, action: str, dsn: str, data: Path, start: int = 0, stop: int = 0
) -> None:
    """Run writer.py; it must succeed without any connection refused by the guard (even a caught one)."""
    done = run_python(
        python,
        str(WRITERS / "writer.py"),
        library.name,
        action,
        "--dsn",
        dsn,
        "--rows",
        str(data),
        "--start",
        str(start),
        "--stop",
        str(stop),
    )
    assert done.returncode == 0 and REFUSED not in done.stderr, done.stderr[-4000:]


def test_the_writers_venv_has_no_network_and_llamaindex_finds_its_data_offline(writers_python: str) -> None:
    refused = run_python(
        writers_python, "-c", "import socket; socket.create_connection(('192.0.2.1', 443), 2)"
    )
    assert refused.returncode != 0 and REFUSED in refused.stderr
    looked_up = run_python(writers_python, "-c", "import socket; socket.getaddrinfo('pypi.org', 443)")
    assert looked_up.returncode != 0 and REFUSED in looked_up.stderr
    # LlamaIndex loads NLTK stopwords and a tiktoken encoding on first use; its wheel ships both.
    offline = run_python(
        writers_python,
        "-c",
        "import langchain_postgres, llama_index.vector_stores.postgres\n"
        "from llama_index.core.utils import get_tokenizer, globals_helper\n"
        "assert get_tokenizer()('hello world') and 'the' in globals_helper.stopwords",
    )
    assert offline.returncode == 0 and REFUSED not in offline.stderr, offline.stderr[-4000:]


def search(client: TestClient, store: str, query: np.ndarray, **body: Any) -> list[dict[str, Any]]:
    payload = {"queryEmbedding": query.tolist(), "topK": K, "store": store, "cacheTTLms": 0, **body}
    response = client.post(SEARCH, json=payload)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def rows_file(path: Path, rows: Rows, new_ids: list[str]) -> Path:
    """The rows the writer writes: the table's, then NEW_ROWS equal to the first queries (tenant `one`)."""
    new = rows.queries[:NEW_ROWS] / np.linalg.norm(rows.queries[:NEW_ROWS], axis=1, keepdims=True)
    np.savez(
        path,
        ids=np.array(rows.ids + new_ids),
        vectors=np.vstack([rows.vectors, new]).astype(np.float32),
        tenants=np.concatenate([rows.tenants, ["one"] * NEW_ROWS]).astype(str),
        docs=np.array(rows.docs + ["doc-new"] * NEW_ROWS),
    )
    return path


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda library: library.name)
def test_a_table_the_library_wrote_is_served_exactly_then_through_its_index_then_after_its_writes(
    client: TestClient, library: Library, writers_python: str, postgres_dsn: str, service: Any, tmp_path: Path
) -> None:
    ids = library.ids(ROWS + NEW_ROWS)
    rows = synthetic(ids[:ROWS])
    data = rows_file(tmp_path / "rows.npz", rows, ids[ROWS:])
    write(writers_python, library, "create", postgres_dsn, data, 0, ROWS)
    granted(postgres_dsn, library.source)

    name = f"{library.name}-{uuid.uuid4().hex[:6]}"
    created = client.put(f"{STORES}/{name}", json={"source": library.source})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["source"]["rows"] == ROWS and body["source"]["vectorIndex"] is None
    assert body["dimension"] == DIM and body["embeddingModel"] == service.embedder.model

    # No vector index yet: the exact scan answers, with numpy's ids and order.
    one = np.asarray(rows.tenants == "one")
    document = rows.docs[ids.index(rows.exact(rows.queries[0])[0])]
    in_document = np.array(rows.docs) == document
    for query in rows.queries:
        results = search(client, name, query)
        assert [r["id"] for r in results] == rows.exact(query)
        assert all(r["content"] == f"text {ids.index(r['id'])}" for r in results)
        assert all(r["metadata"]["tenant"] in {"one", "rest"} for r in results)
        tenant_one = search(client, name, query, metadataFilter={"tenant": "one"})
        assert [r["id"] for r in tenant_one] == rows.exact(query, one)
        in_doc = search(client, name, query, metadataFilter={library.doc_key: document})
        assert [r["id"] for r in in_doc] == rows.exact(query, in_document)

    # The library's own HNSW index, then a refresh: the index serves.
    write(writers_python, library, "index", postgres_dsn, data)
    refreshed = client.post(f"{STORES}/{name}/refresh")
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["source"]["vectorIndex"] == library.index_name

    assert_index_recall(postgres_dsn, service.embedder, name, rows.queries, rows.exact, one, K)

    # The library adds rows equal to the first queries: cached answers stay until the store is refreshed.
    cached = {"queryEmbedding": rows.queries[0].tolist(), "topK": K, "store": name}
    before = client.post(SEARCH, json=cached)
    assert before.status_code == 200
    write(writers_python, library, "add", postgres_dsn, data, ROWS, ROWS + NEW_ROWS)
    assert client.post(SEARCH, json=cached).json() == before.json()
    refreshed = client.post(f"{STORES}/{name}/refresh")
    assert refreshed.status_code == 200 and refreshed.json()["source"]["rows"] == ROWS + NEW_ROWS
    assert client.post(SEARCH, json=cached).json()["results"][0]["id"] == ids[ROWS]
    for i in range(NEW_ROWS):
        found = search(client, name, rows.queries[i], metadataFilter={"tenant": "one"})
        assert found[0]["id"] == ids[ROWS + i]


# Their HNSW index is not part of this test: index_name is left empty.
HYBRID_LIBRARIES = [
    Library(
        "langchain-v2-hybrid",
        {"preset": "langchain-postgres-v2", "table": "lc2_hybrid", "columns": {"fulltext": "content_tsv"}},
        "",
        "source",
    ),
    Library(
        "llamaindex-hybrid",
        {"preset": "llamaindex", "table": "data_hybrid", "columns": {"fulltext": "text_search_tsv"}},
        "",
        "ref_doc_id",
    ),
]
WORDS = [
    "apple",
    "brick",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "glade",
    "sourdough",
    "harbor",
    "iris",
    "jade",
    "kelp",
    "lumen",
    "moss",
    "nectar",
]


@pytest.mark.parametrize("library", HYBRID_LIBRARIES, ids=lambda library: library.name)
def test_hybrid_search_reads_the_full_text_column_the_library_keeps(
    client: TestClient, library: Library, writers_python: str, postgres_dsn: str, service: Any, tmp_path: Path
) -> None:
    # Every row has the query's own vector: the vector side ties, so the keyword side alone orders them.
    count = 60
    ids = library.ids(count)
    texts = [f"note {i} about {WORDS[i % len(WORDS)]}" for i in range(count)]
    (vector,) = service.embedder.embed(["sourdough"], "query")
    data = tmp_path / "rows.npz"
    np.savez(
        data,
        ids=np.array(ids),
        vectors=np.tile(np.asarray(vector, np.float32), (count, 1)),
        tenants=np.array(["rest"] * count),
        docs=np.array([f"doc-{i // 10}" for i in range(count)]),
        texts=np.array(texts),
    )
    write(writers_python, library, "create", postgres_dsn, data, 0, count)
    granted(postgres_dsn, library.source)

    name = f"{library.name}-{uuid.uuid4().hex[:6]}"
    created = client.put(f"{STORES}/{name}", json={"source": library.source})
    assert created.status_code == 201, created.text
    source = created.json()["source"]
    assert source["columns"]["fulltext"] == library.source["columns"]["fulltext"]
    assert source["fulltextIndex"] is not None  # both libraries make a GIN index on it

    query = {"query": "sourdough", "store": name, "grade": 0.0, "useHybrid": True, "fusion": "weighted"}
    answer = client.post("/api/v1/rag/retrieve", json={**query, "similarityTopK": 10, "cacheTTLms": 0})
    assert answer.status_code == 200, answer.text
    assert answer.json()["pipeline"]["keywordScorer"] == "ts_rank_cd"
    results = answer.json()["results"]
    hits = {ids[i] for i, text in enumerate(texts) if text.endswith(" sourdough")}
    assert len(hits) == 4 and {r["id"] for r in results[: len(hits)]} == hits
    assert all(r["keywordScore"] > 0 for r in results[: len(hits)])
    assert all(r["keywordScore"] is None for r in results[len(hits) :])


GUIDE = "Rotate the signing keys every ninety days and keep the old key for one more day."
# A library's table the service writes (source.writable), and where its reader finds the document id.
OURS = [
    ("langchain-v1-ours", {"preset": "langchain-postgres", "collection": "ours"}, "documentId"),
    ("langchain-v2-ours", {"preset": "langchain-postgres-v2", "table": "lc2_ours"}, "documentId"),
    ("llamaindex-ours", {"preset": "llamaindex", "table": "data_ours"}, "ref_doc_id"),
]


@pytest.mark.parametrize(("writer", "source", "doc_key"), OURS, ids=[o[0] for o in OURS])
def test_the_libraries_read_what_a_writable_store_wrote(
    client: TestClient,
    writers_python: str,
    postgres_dsn: str,
    service: Any,
    tmp_path: Path,
    writer: str,
    source: dict[str, Any],
    doc_key: str,
) -> None:
    # The library makes its table with 20 rows of its own; the service then writes a document into it
    # through the documents API, and the library's own search must return that row, text and document id.
    library = Library(writer, source, "", doc_key)
    count = 20
    vectors = np.random.default_rng(7).normal(size=(count, DIM)).astype(np.float32)
    data = tmp_path / "rows.npz"
    np.savez(
        data,
        # Ids of their own: langchain's add_embeddings upserts by id, so the ids of the other tests' rows
        # would move those rows instead of adding these to the new collection.
        ids=np.array([str(uuid.UUID(int=1_000_000 + i)) for i in range(count)]),
        vectors=vectors,
        tenants=np.array(["rest"] * count),
        docs=np.array([f"doc-{i}" for i in range(count)]),
    )
    write(writers_python, library, "create", postgres_dsn, data, 0, count)
    granted(postgres_dsn, source, writable=True)
    name = f"{writer}-{uuid.uuid4().hex[:6]}"
    created = client.put(f"{STORES}/{name}", json={"source": {**source, "writable": True}})
    assert created.status_code == 201, created.text
    written = client.put(f"{STORES}/{name}/documents/guide", json={"text": GUIDE})
    assert written.status_code in (200, 201), written.text

    (vector,) = service.embedder.embed([GUIDE], "document")
    query = tmp_path / "query.npz"
    np.savez(
        query,
        ids=np.array(["q"]),
        vectors=np.asarray([vector], np.float32),
        tenants=np.array(["q"]),
        docs=np.array(["q"]),
    )

    def library_reads() -> list[dict[str, Any]]:
        done = run_python(
            writers_python,
            str(WRITERS / "writer.py"),
            writer,
            "read",
            "--dsn",
            postgres_dsn,
            "--rows",
            str(query),
        )
        assert done.returncode == 0 and REFUSED not in done.stderr, done.stderr[-4000:]
        found: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
        return found

    top = library_reads()[0]
    assert top["text"] == GUIDE and top["metadata"][doc_key] == "guide", top
    assert client.delete(f"{STORES}/{name}/documents/guide").status_code == 204
    assert all(row["text"] != GUIDE for row in library_reads())
