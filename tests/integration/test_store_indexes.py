"""Store index maintenance: the largest stores get an HNSW index of their own, outside requests, up to a cap.

Each test has a PostgreSQL of its own: maintenance looks at every store of a database, and the shared test
database holds other modules' stores and indexes. Documents are written through the production writer
with given vectors; answers are checked against brute force in numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from retrieval_core.cli.main import main
from retrieval_core.db.stores import index_name
from tests.roles import owner_settings, write_role_dsn
from tests.writing import GivenVectors, TextDocument, ensure_store, write_documents

SEARCH = "/api/v1/chunks/similarity-search"
DIM = 8
K = 5


@pytest.fixture()
def runtime(own_runtime: Any, private_postgres: Any) -> Iterator[tuple[Any, str]]:
    """The service on a database of its own, as the write role (the owner's DSN is the second item, for
    `_index_stores`): stores of 50 chunks or more get an index, one store at most."""
    from retrieval_core.container import get_service

    dsn = str(private_postgres.get_uri())
    own_runtime(
        DATABASE_URL=write_role_dsn(dsn),
        AUTO_MIGRATE="false",
        STORE_INDEX_MIN_CHUNKS="50",
        STORE_INDEXES_MAX="1",
    )
    yield get_service(), dsn


def _vectors(seed: int, n: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _write(service: Any, name: str, vectors: np.ndarray, start: int = 0) -> GivenVectors:
    texts = [f"{name} chunk {start + i}" for i in range(len(vectors))]
    embedder = GivenVectors("given", DIM, dict(zip(texts, vectors.tolist(), strict=True)))
    ensure_store(service, name, embedder)
    documents = [TextDocument(id=f"d{start + i}", text=t) for i, t in enumerate(texts)]
    write_documents(service, name, documents, 200, 0, embedder)
    return embedder


def _search(client: TestClient, store: str, query: np.ndarray) -> list[str]:
    response = client.post(
        SEARCH, json={"queryEmbedding": query.tolist(), "store": store, "topK": K, "cacheTTLms": 0}
    )
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["results"]]


def _exact(vectors: np.ndarray, query: np.ndarray, start: int = 0) -> list[str]:
    order = np.argsort(-(vectors @ query), kind="stable")[:K]
    return [f"d{start + i}#0" for i in order]


def _indexed(dsn: str) -> dict[int, bool]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname LIKE 'chunks_embedding_hnsw_store_%'"
        ).fetchall()
    return {int(name.rsplit("_", 1)[1]): valid for name, valid in rows}


def _index_stores(capsys: pytest.CaptureFixture[str], dsn: str) -> str:
    """`retrieval index-stores` as the owner of `dsn`'s database."""
    with owner_settings(dsn):
        assert main(["index-stores"]) == 0
    return capsys.readouterr().out


def test_the_largest_store_gets_its_index_outside_requests_and_searches_stay_exact(
    runtime: tuple[Any, str], capsys: pytest.CaptureFixture[str]
) -> None:
    service, dsn = runtime
    big, middle, small = _vectors(1, 120), _vectors(2, 80), _vectors(3, 10)
    for name, vectors in (("big", big), ("middle", middle), ("small", small)):
        _write(service, name, vectors)
    ids = {name: service.get_store(name).id for name in ("big", "middle", "small")}
    queries = _vectors(9, 10)
    with TestClient(_app()) as client:
        # No store has an index yet: every search is an exact scan.
        assert _indexed(dsn) == {}
        assert all(_search(client, "big", q) == _exact(big, q) for q in queries)

        out = _index_stores(capsys, dsn)
        assert "build HNSW index of store big (120 chunks)" in out and "1 steps done, 0 failed" in out
        assert _indexed(dsn) == {ids["big"]: True}
        assert service.get_store("big").vector_index and not service.get_store("middle").vector_index
        assert _plan_reads(dsn, ids["big"], index_name(ids["big"]))
        assert all(_search(client, "big", q) == _exact(big, q) for q in queries)
        assert _index_stores(capsys, dsn) == ""  # nothing left to do

        # middle grows past big: the one index moves to it (dropped first, so the cap always holds).
        more = _vectors(4, 60)
        _write(service, "middle", more, start=80)
        out = _index_stores(capsys, dsn)
        assert out.index(f"drop index {index_name(ids['big'])}") < out.index(
            "build HNSW index of store middle"
        )
        assert _indexed(dsn) == {ids["middle"]: True}
        every = np.vstack([middle, more])
        assert all(_search(client, "middle", q) == _exact(every, q) for q in queries)
        assert all(_search(client, "big", q) == _exact(big, q) for q in queries)  # exact again

        # A dropped store's index goes with the next run (a request never runs DDL).
        assert client.delete("/api/v1/stores/middle").status_code == 204
        assert _indexed(dsn) == {ids["middle"]: True}
        out = _index_stores(capsys, dsn)
        assert f"drop index {index_name(ids['middle'])}" in out
        assert _indexed(dsn) == {ids["big"]: True}


def test_a_failed_build_is_dropped_and_built_again_and_runs_never_overlap(
    runtime: tuple[Any, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.db.store_indexes import IndexPolicy, maintain_database

    service, dsn = runtime
    _write(service, "big", _vectors(1, 60))
    store_id = service.get_store("big").id
    _index_stores(capsys, dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # What a concurrent build cut off (a deadline, a failure) leaves behind: an index marked invalid.
        conn.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", (index_name(store_id),)
        )
    assert not _plan_reads(dsn, store_id, index_name(store_id))  # the planner skips it: searched exactly
    out = _index_stores(capsys, dsn)
    assert f"drop index {index_name(store_id)}" in out and "build HNSW index of store big" in out
    assert _indexed(dsn) == {store_id: True}

    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(7351902116)")  # a run under way elsewhere
        run = maintain_database(dsn, IndexPolicy(min_chunks=1, most=5), connect_timeout_s=5)
    assert run.busy and run.done == []


def _plan_reads(dsn: str, store_id: int, index: str) -> bool:
    from pgvector.psycopg import register_vector

    from retrieval_core.db import search_sql
    from retrieval_core.db.index_knobs import IndexKnobs
    from retrieval_core.filters.predicate import TRUE

    with psycopg.connect(dsn) as conn, conn.transaction():
        register_vector(conn)
        store = _store_by_id(conn, store_id)
        search_sql.set_search_options(conn, IndexKnobs(40, "relaxed_order", 20_000))
        query = search_sql.nearest_chunks_query(store, TRUE)
        params = search_sql.search_params(store, [0.1] * DIM, K, TRUE)
        plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query.as_bytes(conn), params))
    return index in plan


def _store_by_id(conn: Any, store_id: int) -> Any:
    from retrieval_core.db.stores import STORE_COLUMNS, store_from_row

    row = conn.execute(f"SELECT {STORE_COLUMNS} FROM stores WHERE id = %s", (store_id,)).fetchone()
    return store_from_row(row)


def _app() -> Any:
    from retrieval_core.api.app import create_app

    return create_app()
