"""Stores backed by an existing table: attach (validated, hostile definitions refused), search, read-only.

Tables are made by plain SQL in schema `team`, the way a team's own pipeline would: 6,000 synthetic
32-dimensional rows (clusters plus noise; tenant `one` holds 1%, `ten` 10%), with an HNSW index for
cosine, with one for l2 only, and with none. Expected answers come from an exact numpy search over the
same rows.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db.connection import SingleConnection
from tests.integration.attached_support import index_recalls

STORES = "/api/v1/stores"
SEARCH = "/api/v1/chunks/similarity-search"
RETRIEVE = "/api/v1/rag/retrieve"
DIM = 32
ROWS = 6_000
K = 10


@dataclass
class Table:
    name: str  # schema-qualified
    vectors: np.ndarray
    ids: list[str]
    tenants: np.ndarray
    docs: list[str]
    queries: np.ndarray

    def exact(self, query: np.ndarray, mask: np.ndarray | None = None, k: int = K) -> list[str]:
        mask = np.ones(len(self.ids), bool) if mask is None else mask
        distances = 1.0 - self.vectors[mask] @ (query / np.linalg.norm(query))
        # Ties (none expected with random floats) would break by id, as the service does.
        chosen = np.flatnonzero(mask)[np.argsort(distances, kind="stable")[:k]]
        return [self.ids[i] for i in chosen]

    def tenant(self, name: str) -> np.ndarray:
        return np.asarray(self.tenants == name)


def _rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(30, DIM))
    vectors = centers[rng.integers(0, 30, ROWS)] + 0.6 * rng.normal(size=(ROWS, DIM))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tenants = np.array(["rest"] * ROWS, dtype=object)
    order = rng.permutation(ROWS)
    tenants[order[:60]] = "one"
    tenants[order[60:660]] = "ten"
    queries = centers[rng.integers(0, 30, 20)] + 0.6 * rng.normal(size=(20, DIM))
    return vectors.astype(np.float32), tenants, queries.astype(np.float32)


def make_table(dsn: str, table: str, index: str | None) -> Table:
    """team.<table>(item_id, body, vec vector(32), meta jsonb, doc, tenant), filled by COPY; `index` an
    HNSW operator class or None."""
    vectors, tenants, queries = _rows(seed=11)
    ids = [f"item-{i:05d}" for i in range(ROWS)]
    docs = [f"doc-{i // 20:04d}" for i in range(ROWS)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        conn.execute(f"DROP TABLE IF EXISTS team.{table}")
        conn.execute(
            f"CREATE TABLE team.{table} (item_id text PRIMARY KEY, body text NOT NULL, vec vector({DIM}),"
            " meta jsonb, doc text, tenant text, year integer)"
        )
        with conn.cursor().copy(f"COPY team.{table} FROM STDIN") as copy:
            for i in range(ROWS):
                vector = "[" + ",".join(f"{v:.8f}" for v in vectors[i]) + "]"
                meta = json.dumps({"tenant": tenants[i], "year": 2000 + i % 25})
                copy.write_row((ids[i], f"row {i}", vector, meta, docs[i], tenants[i], 2000 + i % 25))
        if index is not None:
            conn.execute(f"CREATE INDEX {table}_vec_idx ON team.{table} USING hnsw (vec {index})")
        conn.execute(f"CREATE INDEX {table}_meta_idx ON team.{table} USING gin (meta jsonb_path_ops)")
        conn.execute(f"ANALYZE team.{table}")
    # What was written, as single-precision floats read back: the numpy search sees the same numbers.
    stored = np.array([[float(f"{v:.8f}") for v in row] for row in vectors], dtype=np.float64)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    return Table(f"team.{table}", stored, ids, tenants, docs, queries)


@pytest.fixture(scope="module")
def hnsw_table(postgres_dsn: str, service: Any) -> Table:
    return make_table(postgres_dsn, "items_hnsw", "vector_cosine_ops")


@pytest.fixture(scope="module")
def plain_table(postgres_dsn: str, service: Any) -> Table:
    return make_table(postgres_dsn, "items_plain", None)


@pytest.fixture(scope="module")
def l2_table(postgres_dsn: str, service: Any) -> Table:
    return make_table(postgres_dsn, "items_l2", "vector_l2_ops")


def source_of(table: Table, **extra: Any) -> dict[str, Any]:
    columns = {
        "id": "item_id",
        "content": "body",
        "embedding": "vec",
        "metadata": "meta",
        "documentId": "doc",
    }
    return {"table": table.name, "columns": columns, **extra}


def attach(client: TestClient, source: dict[str, Any], name: str | None = None) -> tuple[str, Any]:
    name = name or f"att-{uuid.uuid4().hex[:8]}"
    response = client.put(f"{STORES}/{name}", json={"source": source})
    return name, response


def feature(body: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in body["features"] if f["feature"] == name)
    return found


def search(client: TestClient, store: str, query: np.ndarray, **body: Any) -> Any:
    payload = {"queryEmbedding": query.tolist(), "topK": K, "store": store, "cacheTTLms": 0, **body}
    return client.post(SEARCH, json=payload)


def ids_of(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["results"]]


# Definitions.


def test_attach_validates_and_reports_what_the_table_supports(client: TestClient, hnsw_table: Table) -> None:
    name, created = attach(client, source_of(hnsw_table))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["storage"] == "vector" and body["dimension"] == DIM
    assert body["embeddingModel"] == "unknown"  # 32 dimensions: not the service's model
    assert body["source"]["table"] == "team.items_hnsw" and body["source"]["rows"] == ROWS
    assert body["source"]["vectorIndex"] == "items_hnsw_vec_idx"
    assert body["source"]["metadataIndex"] == "items_hnsw_meta_idx"
    assert body["source"]["readOnly"] is True
    assert (
        feature(body, "vectorSearch")["supported"]
        and "items_hnsw_vec_idx" in feature(body, "vectorSearch")["detail"]
    )
    assert not feature(body, "textQueries")["supported"]
    assert not feature(body, "writes")["supported"]
    assert client.get(f"{STORES}/{name}").json() == body
    again = client.put(f"{STORES}/{name}", json={"source": source_of(hnsw_table)})
    assert again.status_code == 200 and again.json() == body
    listed = {s["name"]: s for s in client.get(STORES).json()["stores"]}
    assert listed[name]["source"]["table"] == "team.items_hnsw"
    assert "source" not in listed["sample"] and "features" not in listed["sample"]


@pytest.mark.parametrize(
    ("source", "field", "says"),
    [
        ({"table": "team.items_hnsw; DROP TABLE team.items_hnsw"}, "source.table", "no table or view"),
        ({"table": 'team"."items_hnsw'}, "source.table", "no table or view"),
        ({"table": "team.missing"}, "source.table", "no table or view"),
        ({"columns": {"content": 'body" FROM team.items_hnsw; --'}}, "source.columns.content", "no column"),
        ({"columns": {"content": "year"}}, "source.columns.content", "integer, not text"),
        ({"columns": {"embedding": "meta"}}, "source.columns.embedding", "must be a pgvector"),
        ({"columns": {"metadata": "body"}}, "source.columns.metadata", "must be json or jsonb"),
        ({"table": "public.chunks"}, "source.table", "the service's own tables"),
        ({"table": "pg_catalog.pg_authid"}, "source.table", "system relation"),
        ({"dimension": 384}, "source.dimension", "not 384 dimensions"),
    ],
)
def test_hostile_or_wrong_definitions_are_refused_and_create_nothing(
    client: TestClient, hnsw_table: Table, postgres_dsn: str, source: dict[str, Any], field: str, says: str
) -> None:
    base = source_of(hnsw_table)
    definition = {**base, **source, "columns": {**base["columns"], **source.get("columns", {})}}
    name, response = attach(client, definition)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unusable_source"
    assert error["details"]["errors"][0]["field"] == field and says in error["message"]
    assert client.get(f"{STORES}/{name}").status_code == 404
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM team.items_hnsw").fetchone() == (ROWS,)


def test_a_request_without_the_required_columns_names_them(client: TestClient, hnsw_table: Table) -> None:
    _, response = attach(client, {"table": hnsw_table.name, "columns": {"id": "item_id"}})
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"][0]["field"] == "source.columns.content"


def test_an_attached_store_is_read_only_and_deleting_it_keeps_the_table(
    client: TestClient, hnsw_table: Table, postgres_dsn: str
) -> None:
    name, created = attach(client, source_of(hnsw_table))
    assert created.status_code == 201
    for response in (
        client.put(f"{STORES}/{name}/documents/x", json={"text": "a new row"}),
        client.delete(f"{STORES}/{name}/documents/item-00001"),
        client.get(f"{STORES}/{name}/documents/item-00001"),
        client.get(f"{STORES}/{name}/documents"),
        client.get(f"{STORES}/{name}/chunks", params={"documentId": "item-00001"}),
    ):
        assert response.status_code == 409, response.text
        assert response.json()["error"]["code"] == "read_only_store"
        assert "team.items_hnsw" in response.json()["error"]["message"]
    plain = client.put(f"{STORES}/{name}", json={"displayName": "x"})
    assert plain.status_code == 409 and plain.json()["error"]["details"]["field"] == "source"
    other = client.put(f"{STORES}/{name}", json={"source": {**source_of(hnsw_table), "distance": "l2"}})
    assert other.status_code == 409
    assert client.put(f"{STORES}/sample", json={"source": source_of(hnsw_table)}).status_code == 409

    assert client.delete(f"{STORES}/{name}").status_code == 204
    assert client.get(f"{STORES}/{name}").status_code == 404
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM team.items_hnsw").fetchone() == (ROWS,)


# Search.


def test_the_exact_path_returns_the_ids_and_order_of_numpy(client: TestClient, plain_table: Table) -> None:
    # No index: every search is an exact scan (6,000 rows, under the default cap of 20,000).
    name, created = attach(client, source_of(plain_table))
    assert created.status_code == 201, created.text
    assert not feature(created.json(), "vectorSearch")["detail"].startswith("HNSW")
    one = plain_table.tenant("one")
    docs = ["doc-0003", "doc-0150"]
    in_docs = np.isin(np.array(plain_table.docs), docs)
    recent = plain_table.tenant("ten") & np.array([2000 + i % 25 >= 2020 for i in range(ROWS)])
    for query in plain_table.queries:
        response = search(client, name, query)
        assert ids_of(response) == plain_table.exact(query)
        scores = [r["score"] for r in response.json()["results"]]
        expected = 1.0 - plain_table.vectors @ (query / np.linalg.norm(query))
        assert scores == pytest.approx(sorted(1.0 - expected)[::-1][:K], abs=1e-5)
        assert ids_of(search(client, name, query, metadataFilter={"tenant": "one"})) == plain_table.exact(
            query, one
        )
        assert ids_of(search(client, name, query, docIds=docs)) == plain_table.exact(query, in_docs)
        expression = "tenant = 'ten' AND year >= 2020"
        assert ids_of(search(client, name, query, metadataFilter=expression)) == plain_table.exact(
            query, recent
        )
    first = search(client, name, plain_table.queries[0]).json()["results"][0]
    assert first["metadata"]["documentId"].startswith("doc-") and "chunkIndex" not in first["metadata"]
    assert first["metadata"]["tenant"] in ("one", "ten", "rest") and first["content"].startswith("row ")


TEXTS = [
    "The Kubernetes scheduler assigns pods to nodes with enough free CPU and memory.",
    "A horizontal pod autoscaler adds replicas when average CPU use stays high.",
    "Liveness probes restart a container that stops answering.",
    "PostgreSQL keeps old row versions until VACUUM removes them.",
    "An HNSW index answers nearest-neighbour queries by walking a layered graph.",
    "Sourdough bread rises slowly because wild yeast ferments the dough.",
    "The on-call engineer hands over every Monday at ten.",
    "Invoices are paid within thirty days of receipt.",
]


@pytest.fixture(scope="module")
def text_table(postgres_dsn: str, service: Any) -> str:
    """team.notes: texts embedded by the service's own model, as a pipeline using the same model would."""
    vectors = service.embedder.embed(TEXTS, "document")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        conn.execute("DROP TABLE IF EXISTS team.notes")
        conn.execute(
            f"CREATE TABLE team.notes (id bigint PRIMARY KEY, text text, embedding vector({len(vectors[0])}),"
            " topic text)"
        )
        for i, (text, vector) in enumerate(zip(TEXTS, vectors, strict=True)):
            topic = "k8s" if i < 3 else "other"
            literal = "[" + ",".join(map(str, vector)) + "]"
            conn.execute("INSERT INTO team.notes VALUES (%s, %s, %s::vector, %s)", (i, text, literal, topic))
    return "team.notes"


def test_retrieve_by_text_with_a_threshold_mmr_and_a_filter(client: TestClient, text_table: str) -> None:
    columns = {"id": "id", "content": "text", "embedding": "embedding", "metadata": ["topic"]}
    name, created = attach(client, {"table": text_table, "columns": columns})
    assert created.status_code == 201, created.text
    assert feature(created.json(), "textQueries")["supported"]
    query = {"query": "how are pods placed on nodes?", "store": name, "cacheTTLms": 0}
    found = client.post(RETRIEVE, json={**query, "grade": 0.3, "similarityTopK": 3})
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert results[0]["id"] == "0" and results[0]["content"] == TEXTS[0]
    assert all(r["score"] >= 0.3 for r in results)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    none = client.post(RETRIEVE, json={**query, "grade": 0.99})
    assert none.status_code == 200 and none.json()["results"] == []
    filtered = client.post(RETRIEVE, json={**query, "grade": 0.0, "metadataFilter": {"topic": "other"}})
    assert filtered.status_code == 200
    assert {r["metadata"]["topic"] for r in filtered.json()["results"]} == {"other"}
    mmr = client.post(RETRIEVE, json={**query, "grade": 0.0, "rerank": {"enabled": True, "strategy": "mmr"}})
    assert mmr.status_code == 200, mmr.text
    assert mmr.json()["pipeline"]["rerankStrategy"] == "mmr" and mmr.json()["results"][0]["id"] == "0"
    batch = client.post(
        f"{RETRIEVE}/batch",
        json={"requests": [{**query, "grade": 0.3}, {**query, "query": "bread", "grade": 0.2}]},
    )
    assert batch.status_code == 200, batch.text
    items = batch.json()["results"]
    assert [i["status"] for i in items] == [200, 200]
    assert items[0]["response"]["results"][0]["id"] == "0" and items[1]["response"]["results"][0]["id"] == "5"
    hybrid = client.post(RETRIEVE, json={**query, "grade": 0.0, "useHybrid": True})
    assert hybrid.status_code == 422 and "useHybrid" in hybrid.json()["error"]["message"]
    keyword = client.post(RETRIEVE, json={**query, "searchMode": "keyword"})
    assert keyword.status_code == 422
    assert keyword.json()["error"]["details"]["errors"][0]["field"] == "searchMode"
    assert "without a full-text column, so it has no keyword search" in keyword.json()["error"]["message"]


def test_text_queries_on_vectors_of_another_model_are_refused_with_the_way_out(
    client: TestClient, plain_table: Table
) -> None:
    name, _ = attach(client, source_of(plain_table))
    refused = client.post(RETRIEVE, json={"query": "anything", "store": name, "grade": 0.0})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "vector_queries_only"
    assert "similarity-search" in refused.json()["error"]["message"]


def test_through_hnsw_recall_at_10_is_high_with_the_full_k_under_a_1_percent_filter(
    client: TestClient, hnsw_table: Table, service: Any, postgres_dsn: str
) -> None:
    name, created = attach(client, source_of(hnsw_table))
    assert created.status_code == 201
    one = hnsw_table.tenant("one")
    # Exact search off: the 1% filter, too, goes through the index (iterative scan).
    database = SingleConnection(postgres_dsn, 5, 15_000)
    index_only = RetrievalService(database, service.embedder, "sample", 100, exact_search_max_rows=0)
    try:
        recall_all, recall_one, answers = index_recalls(
            index_only, name, hnsw_table.queries, hnsw_table.exact, one, K
        )
        for filtered in answers:
            assert all(hnsw_table.tenants[hnsw_table.ids.index(i)] == "one" for i in filtered)
        plan = _plan(database, name)
        # The index query alone (no exact fallback) fills the filtered answer: iterative scans did it.
        assert [_index_rows(database, name, q, {"tenant": "one"}) for q in hnsw_table.queries] == [K] * 20
    finally:
        database.close()
    assert "items_hnsw_vec_idx" in plan
    assert np.mean(recall_all) >= 0.95 and np.mean(recall_one) >= 0.95, (recall_all, recall_one)


def _index_rows(database: SingleConnection, store: str, query: np.ndarray, where: dict[str, Any]) -> int:
    from retrieval_core.backends.attached.search import nearest_query, relation_params
    from retrieval_core.db.index_knobs import IndexKnobs
    from retrieval_core.db.search_sql import set_search_options
    from retrieval_core.db.stores import find_store
    from retrieval_core.db.vectors import Vector
    from retrieval_core.filters.sql import metadata_equals

    predicate = metadata_equals(where)
    with database.connection() as conn, conn.transaction():
        found = find_store(conn, store)
        assert found is not None and found.source is not None
        set_search_options(conn, IndexKnobs(100, "relaxed_order", 20_000))
        query_sql = nearest_query(found.source, predicate.sql, False, False)
        params = {
            **relation_params(found.source),
            **predicate.params,
            "query_vector": Vector(query.tolist()),
            "limit": K,
        }
        plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query_sql.as_bytes(conn), params))
        assert "items_hnsw_vec_idx" in plan
        return len(conn.execute(query_sql, params).fetchall())


def _plan(database: SingleConnection, store: str) -> str:
    from retrieval_core.backends.attached.search import nearest_query, relation_params
    from retrieval_core.db.stores import find_store
    from retrieval_core.db.vectors import Vector
    from retrieval_core.filters.predicate import TRUE

    with database.connection() as conn, conn.transaction():
        found = find_store(conn, store)
        assert found is not None and found.source is not None
        conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
        query = nearest_query(found.source, TRUE.sql, False, False)
        params = {**relation_params(found.source), "query_vector": Vector([1.0] * DIM), "limit": K}
        return "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query.as_bytes(conn), params))


def test_an_index_for_another_operator_cannot_serve_and_the_exact_scan_answers(
    client: TestClient, l2_table: Table
) -> None:
    name, created = attach(client, source_of(l2_table))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["source"]["vectorIndex"] is None
    assert body["source"]["otherVectorIndexes"] == ["items_l2_vec_idx (vector_l2_ops)"]
    assert "another operator" in feature(body, "vectorSearch")["detail"]
    for query in l2_table.queries[:5]:
        assert ids_of(search(client, name, query)) == l2_table.exact(query)


def _client_with(own_runtime: Any, **env: str) -> Iterator[TestClient]:
    """An app on a service rebuilt with `env` (own_runtime restores the shared one afterwards)."""
    from retrieval_core.api.app import create_app

    own_runtime(**env)
    with TestClient(create_app()) as test_client:
        yield test_client


@pytest.fixture()
def capped_client(own_runtime: Any) -> Iterator[TestClient]:
    yield from _client_with(own_runtime, EXACT_SEARCH_MAX_ROWS="1000")


def test_an_exact_scan_over_the_cap_is_refused_with_its_reason(
    capped_client: TestClient, l2_table: Table
) -> None:
    name, created = attach(capped_client, source_of(l2_table))
    assert created.status_code == 201
    assert "capped at 1,000 rows" in feature(created.json(), "vectorSearch")["detail"]
    refused = search(capped_client, name, l2_table.queries[0])
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "exact_scan_refused" and error["details"]["maxRows"] == 1000
    assert "vector_l2_ops" in error["message"]
    # A filter keeping 660 rows is under the cap: answered, exactly.
    narrow = {"tenant": "ten"}
    query = l2_table.queries[0]
    expected = l2_table.exact(query, l2_table.tenant("ten"))
    assert ids_of(search(capped_client, name, query, metadataFilter=narrow)) == expected


def test_plain_columns_can_be_the_metadata(client: TestClient, plain_table: Table) -> None:
    columns = {"id": "item_id", "content": "body", "embedding": "vec", "metadata": ["tenant", "year"]}
    name, created = attach(client, {"table": plain_table.name, "columns": columns})
    assert created.status_code == 201, created.text
    assert "row by row" in feature(created.json(), "metadataFilters")["detail"]
    query = plain_table.queries[1]
    response = search(client, name, query, metadataFilter={"tenant": "one"})
    assert ids_of(response) == plain_table.exact(query, plain_table.tenant("one"))
    first = response.json()["results"][0]["metadata"]
    assert first["tenant"] == "one" and isinstance(first["year"], int)
    assert first["documentId"] == response.json()["results"][0]["id"]  # no document column: the row id


def test_refresh_retires_cached_answers_after_the_table_changes(
    client: TestClient, plain_table: Table, postgres_dsn: str
) -> None:
    # The service does not see writes to a table it does not own: a cached answer stays until refreshed.
    name, _ = attach(client, source_of(plain_table))
    query = plain_table.queries[2]
    payload = {"queryEmbedding": query.tolist(), "topK": K, "store": name}
    before = client.post(SEARCH, json=payload)
    assert before.status_code == 200 and before.headers.get("x-cache") != "HIT"
    vector = "[" + ",".join(f"{v:.8f}" for v in query / np.linalg.norm(query)) + "]"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO team.items_plain (item_id, body, vec, meta)"
            " VALUES ('new-row', 'new', %s::vector, '{}')",
            (vector,),
        )
    try:
        cached = client.post(SEARCH, json=payload)
        assert cached.json() == before.json()  # the cached answer, without the new row
        refreshed = client.post(f"{STORES}/{name}/refresh")
        assert refreshed.status_code == 200 and refreshed.json()["source"]["rows"] == ROWS + 1
        after = client.post(SEARCH, json=payload)
        assert after.json()["results"][0]["id"] == "new-row"
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM team.items_plain WHERE item_id = 'new-row'")
    own = client.post(f"{STORES}/sample/refresh")
    assert own.status_code == 409 and own.json()["error"]["code"] == "conflict"


@pytest.fixture()
def read_only_key(configure: Any) -> str:
    key = "attach-read-only-key"
    configure(API_KEY_HASHES=hashlib.sha256(key.encode()).hexdigest())
    return key


def test_attaching_and_refreshing_need_the_admin_scope(
    sample_store: Any, plain_table: Table, read_only_key: str, postgres_dsn: str
) -> None:
    from retrieval_core.api.app import create_app

    with TestClient(create_app()) as client:
        headers = {"x-api-key": read_only_key}
        name = f"att-{uuid.uuid4().hex[:8]}"
        attached = client.put(f"{STORES}/{name}", json={"source": source_of(plain_table)}, headers=headers)
        assert attached.status_code == 403 and attached.json()["error"]["code"] == "forbidden"
        assert client.post(f"{STORES}/sample/refresh", headers=headers).status_code == 403
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM stores WHERE name = %s", (name,)).fetchone() == (0,)


def test_the_cli_attaches_and_refreshes(
    service: Any, plain_table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.cli.main import main

    name = f"att-{uuid.uuid4().hex[:8]}"
    columns = ["--id", "item_id", "--content", "body", "--embedding", "vec", "--metadata", "tenant,year"]
    assert main(["stores", "attach", name, "--table", plain_table.name, *columns]) == 0
    out = capsys.readouterr().out
    assert f"attached: store '{name}' reads team.items_plain ({ROWS} rows)" in out
    assert "no   writes: read-only" in out and "exact scan" in out
    assert main(["stores", "refresh", name]) == 0
    assert f"refreshed: store '{name}'" in capsys.readouterr().out
    assert main(["stores", "list"]) == 0
    assert f"{ROWS} rows of team.items_plain (attached)" in capsys.readouterr().out
    assert main(["stores", "attach", f"{name}-x", "--table", "team.nope", *columns]) == 2
    assert "no table or view team.nope" in capsys.readouterr().err


def test_add_fulltext_alters_the_table_only_when_asked_and_hybrid_ranks_with_ts_rank_cd(
    client: TestClient, text_table: str, postgres_dsn: str, own_runtime: Any
) -> None:
    def tsv_column() -> bool:
        with psycopg.connect(postgres_dsn) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_attribute WHERE attrelid = 'team.notes'::regclass"
                " AND attname = 'retrieval_tsv' AND NOT attisdropped"
            ).fetchone()
        return row == (1,)

    columns = {"id": "id", "content": "text", "embedding": "embedding", "metadata": ["topic"]}
    # The write role owns no user table: it is told to have the owner add the column.
    _, refused = attach(client, {"table": text_table, "columns": columns, "addFulltext": True})
    assert refused.status_code == 422 and not tsv_column()
    assert refused.json()["error"]["details"]["errors"][0]["field"] == "source.addFulltext"
    assert "does not own team.notes" in refused.json()["error"]["message"]
    # Altering the table takes its owner: the service as the owner, as `retrieval serve` runs locally.
    from retrieval_core.api.app import create_app

    own_runtime(DATABASE_URL=postgres_dsn)
    with TestClient(create_app()) as owner_client:
        _add_fulltext_as_owner(owner_client, text_table, postgres_dsn, tsv_column, columns)


def _add_fulltext_as_owner(
    client: TestClient,
    text_table: str,
    postgres_dsn: str,
    tsv_column: Callable[[], bool],
    columns: dict[str, Any],
) -> None:
    # A definition that fails after the column would be added leaves the table as it was.
    _, failed = attach(
        client, {"table": text_table, "columns": {**columns, "title": "nope"}, "addFulltext": True}
    )
    assert failed.status_code == 422 and not tsv_column()
    name, created = attach(client, {"table": text_table, "columns": columns})
    assert not feature(created.json(), "hybrid")["supported"] and not tsv_column()

    name, created = attach(client, {"table": text_table, "columns": columns, "addFulltext": True})
    assert created.status_code == 201, created.text
    assert tsv_column()
    body = created.json()
    assert body["source"]["columns"]["fulltext"] == "retrieval_tsv"
    assert body["source"]["fulltextIndex"] == "notes_retrieval_tsv_gin"
    hybrid_feature = feature(body, "hybrid")
    assert hybrid_feature["supported"] and "ts_rank_cd" in hybrid_feature["detail"]
    again = client.put(
        f"{STORES}/{name}", json={"source": {"table": text_table, "columns": columns, "addFulltext": True}}
    )
    assert again.status_code == 200

    query = {"query": "sourdough yeast", "store": name, "grade": 0.0, "useHybrid": True, "cacheTTLms": 0}
    answer = client.post(RETRIEVE, json=query)
    assert answer.status_code == 200, answer.text
    pipeline = answer.json()["pipeline"]
    assert pipeline["hybrid"] is True and pipeline["keywordScorer"] == "ts_rank_cd"
    top = answer.json()["results"][0]
    assert top["id"] == "5" and top["keywordScore"] > 0
    with psycopg.connect(postgres_dsn) as conn:
        expected = conn.execute(
            "SELECT ts_rank_cd(retrieval_tsv, to_tsquery('english', 'sourdough | yeast'))"
            " FROM team.notes WHERE id = 5"
        ).fetchone()
    assert expected is not None and top["keywordScore"] == pytest.approx(expected[0])
    filtered = client.post(RETRIEVE, json={**query, "metadataFilter": {"topic": "k8s"}})
    assert {r["metadata"]["topic"] for r in filtered.json()["results"]} == {"k8s"}
    assert top["matchedTerms"] == ["Sourdough", "yeast"]

    # A keyword search alone: the same ts_rank_cd, only the rows the keyword query matches, no similarity.
    keyword_query = {"query": "sourdough yeast", "store": name, "searchMode": "keyword", "cacheTTLms": 0}
    keyword = client.post(RETRIEVE, json=keyword_query)
    assert keyword.status_code == 200, keyword.text
    assert keyword.json()["pipeline"]["keywordScorer"] == "ts_rank_cd"
    [only] = keyword.json()["results"]
    assert only["id"] == "5" and only["score"] is None
    assert only["keywordScore"] == pytest.approx(expected[0]) and only["matchedTerms"] == [
        "Sourdough",
        "yeast",
    ]
    outside = client.post(RETRIEVE, json={**keyword_query, "metadataFilter": {"topic": "k8s"}})
    assert outside.status_code == 200 and outside.json()["results"] == []


def test_add_fulltext_refuses_a_view(client: TestClient, text_table: str, postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE OR REPLACE VIEW team.notes_view AS SELECT id, text, embedding FROM team.notes")
    columns = {"id": "id", "content": "text", "embedding": "embedding"}
    _, refused = attach(client, {"table": "team.notes_view", "columns": columns, "addFulltext": True})
    assert refused.status_code == 422
    assert refused.json()["error"]["details"]["errors"][0]["field"] == "source.addFulltext"
    assert "is a view" in refused.json()["error"]["message"]


def test_a_view_the_index_cannot_serve_through_is_searched_exactly(
    client: TestClient, hnsw_table: Table, postgres_dsn: str
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE OR REPLACE VIEW team.items_distinct AS SELECT DISTINCT * FROM team.items_hnsw")
        conn.execute(
            "CREATE OR REPLACE VIEW team.items_rest AS SELECT * FROM team.items_hnsw WHERE tenant <> 'one'"
        )
    name, distinct = attach(client, {**source_of(hnsw_table), "table": "team.items_distinct"})
    assert distinct.status_code == 201, distinct.text
    assert distinct.json()["source"]["kind"] == "view" and distinct.json()["source"]["vectorIndex"] is None
    query = hnsw_table.queries[3]
    assert ids_of(search(client, name, query)) == hnsw_table.exact(query)
    _, filtered = attach(client, {**source_of(hnsw_table), "table": "team.items_rest"})
    assert filtered.json()["source"]["vectorIndex"] == "items_hnsw_vec_idx"


def test_a_halfvec_column_and_its_index_serve(
    client: TestClient, hnsw_table: Table, postgres_dsn: str
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS team.items_half")
        conn.execute(
            f"CREATE TABLE team.items_half AS SELECT item_id, body, vec::halfvec({DIM}) AS vec, meta, doc"
            " FROM team.items_hnsw"
        )
        conn.execute("ALTER TABLE team.items_half ADD PRIMARY KEY (item_id)")
        conn.execute("CREATE INDEX items_half_idx ON team.items_half USING hnsw (vec halfvec_cosine_ops)")
        conn.execute("ANALYZE team.items_half")
    name, created = attach(client, {**source_of(hnsw_table), "table": "team.items_half"})
    assert created.status_code == 201, created.text
    assert (
        created.json()["storage"] == "halfvec" and created.json()["source"]["vectorIndex"] == "items_half_idx"
    )
    recalls = []
    for query in hnsw_table.queries:
        found = ids_of(search(client, name, query, search={"efSearch": 100}))
        recalls.append(len(set(found) & set(hnsw_table.exact(query))) / K)
    # 2-byte floats: the ranking may differ from float64 numpy's only among near ties.
    assert np.mean(recalls) >= 0.95, recalls


def test_a_table_changed_after_attaching_is_reported_not_taken_for_an_outage(
    client: TestClient, hnsw_table: Table, postgres_dsn: str
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS team.items_gone")
        conn.execute("CREATE TABLE team.items_gone AS SELECT * FROM team.items_hnsw LIMIT 100")
        conn.execute("ALTER TABLE team.items_gone ALTER COLUMN vec TYPE vector")  # untyped, as langchain's
    name, created = attach(client, {**source_of(hnsw_table), "table": "team.items_gone"})
    assert created.status_code == 201, created.text
    query = hnsw_table.queries[0]
    assert search(client, name, query).status_code == 200
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO team.items_gone (item_id, body, vec) VALUES ('odd', 'x', '[1,2,3]')")
    mixed = search(client, name, query)
    assert mixed.status_code == 409 and mixed.json()["error"]["code"] == "source_unavailable"
    assert "another dimension" in mixed.json()["error"]["message"]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE team.items_gone DROP COLUMN body")
    gone = search(client, name, query)
    assert gone.status_code == 409 and gone.json()["error"]["code"] == "source_unavailable"
    assert (
        "team.items_gone, which no longer exists or lost a mapped column" in gone.json()["error"]["message"]
    )
    refused = client.post(f"{STORES}/{name}/refresh")
    assert refused.status_code == 422 and "has no column 'body'" in refused.json()["error"]["message"]
    assert client.delete(f"{STORES}/{name}").status_code == 204


def test_allowed_metadata_keys_bound_an_attached_store_and_text_search_belongs_to_the_source(
    client: TestClient, plain_table: Table
) -> None:
    name = f"att-{uuid.uuid4().hex[:8]}"
    body = {"source": source_of(plain_table), "allowedMetadataKeys": ["tenant"]}
    created = client.put(f"{STORES}/{name}", json=body)
    assert created.status_code == 201 and created.json()["allowedMetadataKeys"] == ["tenant"]
    query = plain_table.queries[0]
    assert search(client, name, query, metadataFilter={"tenant": "one"}).status_code == 200
    refused = search(client, name, query, metadataFilter={"year": 2001})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "metadata_key_not_allowed"
    assert client.put(f"{STORES}/{name}", json=body).status_code == 200
    assert client.put(f"{STORES}/{name}", json={**body, "allowedMetadataKeys": None}).status_code == 409
    mixed = client.put(f"{STORES}/{name}-t", json={**body, "textSearch": "german"})
    assert mixed.status_code == 422 and "source.textSearch" in mixed.json()["error"]["message"]


def test_a_model_reranker_reorders_attached_rows_by_their_content(
    service: Any, sample_store: Any, text_table: str
) -> None:
    from tests.fakes.rerank_scoring import overlap_score
    from tests.fakes.reranker import FakeReranker
    from tests.integration.test_advanced_retrieval import client_with_rerankers

    question = "which container restarts when a probe stops answering"
    with FakeReranker() as fake, client_with_rerankers(service, reranker_service_url=fake.url) as client:
        columns = {"id": "id", "content": "text", "embedding": "embedding"}
        name, created = attach(client, {"table": text_table, "columns": columns})
        assert created.status_code == 201, created.text
        body = {"query": question, "store": name, "grade": 0.0, "cacheTTLms": 0}
        answer = client.post(RETRIEVE, json={**body, "rerank": {"strategy": "bge", "topK": 3}})
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        assert answer.json()["pipeline"]["rerankStrategy"] == "bge" and len(results) == 3
        scores = [r["rerankScore"] for r in results]
        assert scores == sorted(scores, reverse=True)
        assert scores == pytest.approx([overlap_score(question, r["content"]) for r in results])
        assert results[0]["id"] == "2"  # the liveness probe row, by the fake's word overlap


@pytest.fixture()
def timed_client(own_runtime: Any) -> Iterator[TestClient]:
    yield from _client_with(own_runtime, SEARCH_STATEMENT_TIMEOUT_MS="500")


def test_a_slow_table_is_cut_by_the_search_statement_timeout(
    timed_client: TestClient, plain_table: Table, postgres_dsn: str
) -> None:
    # A view whose every row costs a millisecond (a team's expensive view): 6,000 rows take 6 s.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION team.slow_row() RETURNS boolean LANGUAGE sql VOLATILE"
            " AS 'SELECT pg_sleep(0.001) IS NOT NULL'"
        )
        conn.execute(
            "CREATE OR REPLACE VIEW team.items_slow AS SELECT * FROM team.items_plain"
            " WHERE item_id < 'item-01500' AND team.slow_row()"
        )
    name, created = attach(timed_client, {**source_of(plain_table), "table": "team.items_slow"})
    assert created.status_code == 201, created.text  # attaching is not bounded by the search timeout
    started = time.monotonic()
    answer = search(timed_client, name, plain_table.queries[0])
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "query_timeout"
    assert time.monotonic() - started < 1.4  # cut at 0.5 s, well before the 1.5 s the scan needs
