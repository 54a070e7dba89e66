"""Filtered ANN returns k: iterative HNSW scans, the exact path for selective filters, the index knobs.

Its subject is the SQL plan over a large synthetic corpus written by db/ directly: a store of 6,000
synthetic 32-dimensional chunks (clusters plus noise), its HNSW index built after the load (about 1.7 s
a store; through tests/writing.py, which inserts into the existing index row by row and takes
per-document metadata only, about 15 s a store, several times the whole module's time);
tenant `one` holds 1% of the chunks, tenant `ten` 10%. A second store of the same chunks also names
each chunk's tenant in a list and a title, and only tenant `one` has a `marker`, so that every
filter operator can select exactly tenant `one`. The expected answers are computed by brute force
in numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from retrieval_core.api.app import create_app
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db import chunk_filters, search_sql
from retrieval_core.db.connection import SingleConnection
from retrieval_core.db.documents import ChunkRow, DocumentRow, replace_documents
from retrieval_core.db.index_knobs import IndexKnobs
from retrieval_core.db.storage import Storage
from retrieval_core.db.stores import (
    Store,
    create_index_statement,
    create_store,
    drop_store,
    find_store,
    index_name,
)
from retrieval_core.filters.sql import metadata_equals, metadata_predicate
from retrieval_core.grants import OPEN_GRANT
from retrieval_core.schemas.search_options import SearchKnobs
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest
from retrieval_core.search.plan import FilterSizes, exact_scan_limit

SEARCH = "/api/v1/chunks/similarity-search"
DIM = 32
ROWS = 6_000
CHUNKS_PER_DOCUMENT = 20
K = 10
TENANTS = {"one": 0.01, "ten": 0.10}


@dataclass
class Corpus:
    store: Store
    vectors: np.ndarray  # unit rows, in chunk-id order
    ids: list[str]
    tenants: np.ndarray
    queries: np.ndarray

    def exact_top_k(self, query: np.ndarray, tenant: str | None, k: int = K) -> list[str]:
        mask = np.ones(len(self.ids), bool) if tenant is None else self.tenants == tenant
        distances = 1.0 - self.vectors[mask] @ (query / np.linalg.norm(query))
        chosen = np.flatnonzero(mask)[np.argsort(distances, kind="stable")[:k]]
        return [self.ids[i] for i in chosen]


def _synthetic(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(30, DIM))
    vectors = centers[rng.integers(0, 30, ROWS)] + 0.6 * rng.normal(size=(ROWS, DIM))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tenants = np.array(["rest"] * ROWS, dtype=object)
    order = rng.permutation(ROWS)
    start = 0
    for name, share in TENANTS.items():
        count = int(ROWS * share)
        tenants[order[start : start + count]] = name
        start += count
    queries = centers[rng.integers(0, 30, 20)] + 0.6 * rng.normal(size=(20, DIM))
    return vectors.astype(np.float32), tenants, queries.astype(np.float32)


def _tenant(tenant: str) -> dict[str, Any]:
    return {"tenant": tenant}


def _operator_metadata(tenant: str) -> dict[str, Any]:
    marker = {"marker": 1} if tenant == "one" else {}
    return {"tenant": tenant, "tags": [tenant, "all"], "title": f"{tenant.upper()} chunk", **marker}


# Every new operator, in both forms, selecting tenant `one` (1% of the store); and whether the store's
# GIN index on metadata can answer it (docs/api.md "Metadata filters" says the same).
ONE_PERCENT: dict[str, tuple[str, dict[str, Any], bool]] = {
    "startsWith": ("title STARTS WITH 'ONE '", {"startsWith": {"key": "title", "value": "ONE "}}, False),
    "stringContains": ("title CONTAINS 'ONE'", {"stringContains": {"key": "title", "value": "ONE"}}, False),
    "listContains": ("tags HAS 'one'", {"listContains": {"key": "tags", "value": "one"}}, True),
    "equalsIgnoreCase": (
        "lower(tenant) = 'ONE'",
        {"equalsIgnoreCase": {"key": "tenant", "value": "ONE"}},
        False,
    ),
    "exists": ("EXISTS(marker)", {"exists": {"key": "marker"}}, False),
    "notIn": ("tenant NOT IN ('rest', 'ten')", {"notIn": {"key": "tenant", "value": ["rest", "ten"]}}, False),
    "in": ("tenant IN ('one')", {"in": {"key": "tenant", "value": ["one"]}}, True),
    "equals": ("tenant = 'one'", {"equals": {"key": "tenant", "value": "one"}}, True),
    # One indexed part is enough: the index narrows the rows the other part is checked on.
    "andAll": (
        "tenant = 'one' AND title STARTS WITH 'ONE '",
        {
            "andAll": [
                {"equals": {"key": "tenant", "value": "one"}},
                {"startsWith": {"key": "title", "value": "ONE "}},
            ]
        },
        True,
    ),
}
# Each operator alone. (The conjunction above the planner estimates at a few rows, and it reads them
# through the GIN index and sorts them exactly even when the service asks for the HNSW index.)
ONE_PERCENT_FILTERS = [
    pytest.param(form, indexed, id=f"{name}-{kind}")
    for name, (expression, tree, indexed) in ONE_PERCENT.items()
    if name != "andAll"
    for kind, form in (("expression", expression), ("tree", tree))
]


def _write_store(
    service: Any,
    owner_dsn: str,
    name: str,
    storage: Storage,
    metadata: Callable[[str], dict[str, Any]] = _tenant,
) -> Corpus:
    vectors, tenants, queries = _synthetic(seed=7)
    documents = []
    ids = []
    for d in range(ROWS // CHUNKS_PER_DOCUMENT):
        chunks = []
        for c in range(CHUNKS_PER_DOCUMENT):
            i = d * CHUNKS_PER_DOCUMENT + c
            chunks.append(ChunkRow(f"d{d:04d}", c, f"chunk {i}", metadata(tenants[i]), vectors[i].tolist()))
            ids.append(f"d{d:04d}#{c}")
        documents.append(DocumentRow(f"d{d:04d}", "", {}, "-", chunks))
    with service.database.connection() as conn:
        existing = find_store(conn, name)
        if existing is not None:
            drop_store(conn, existing)
        store = create_store(conn, name, name, "synthetic", DIM, storage)
        replace_documents(conn, store, documents)
    # What the store index maintenance builds for a store this large (db/store_indexes.py), as the owner.
    with psycopg.connect(owner_dsn, autocommit=True) as owner:
        owner.execute(create_index_statement(store))
        owner.execute("ANALYZE chunks")
    with service.database.connection() as conn:
        written = find_store(conn, name)  # with its version and chunk count after the writes
    assert written is not None
    return Corpus(written, vectors, ids, tenants, queries)


@pytest.fixture(scope="module")
def corpus(service: Any, postgres_dsn: str) -> Corpus:
    return _write_store(service, postgres_dsn, "filtered-ann", "vector")


@pytest.fixture(scope="module")
def operator_corpus(service: Any, postgres_dsn: str) -> Corpus:
    return _write_store(service, postgres_dsn, "filtered-ann-operators", "vector", _operator_metadata)


@pytest.fixture(scope="module")
def database(write_dsn: str) -> Iterator[SingleConnection]:
    """One connection of its own (the service's role), so that its index statistics can be flushed before
    they are read."""
    database = SingleConnection(write_dsn, 5, 15_000)
    yield database
    database.close()


def _service(database: SingleConnection, shared: Any, **kwargs: Any) -> RetrievalService:
    return RetrievalService(database, shared.embedder, "filtered-ann", shared.ef_search, **kwargs)


def _search(
    service: RetrievalService,
    store: str,
    query: np.ndarray,
    tenant: str | None,
    metadata_filter: str | dict[str, Any] | None = None,
    **knobs: Any,
) -> list[str]:
    request = SimilaritySearchRequest(
        query_embedding=query.tolist(),
        top_k=K,
        store=store,
        metadata_filter=metadata_filter or ({"tenant": tenant} if tenant else None),
        search=SearchKnobs(**knobs) if knobs else None,
        cache_ttl_ms=0,
    )
    response, _ = service.similarity_search(request, grant=OPEN_GRANT)
    return [r.id for r in response.results]


def _index_scans(database: SingleConnection, store: Store, index: str | None = None) -> int:
    """How many times one of the store's indexes (its HNSW index by default) was scanned (counted by
    PostgreSQL)."""
    with database.connection() as conn:
        # Statistics reach the shared counters when the backend goes idle, at most once a second
        # unless forced; this connection is the one the searches ran on.
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s",
            (index or index_name(store.id),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _recall(found: list[str], expected: list[str]) -> float:
    return len(set(found) & set(expected)) / len(expected)


@pytest.mark.parametrize("tenant", ["one", "ten"])
def test_the_index_path_returns_k_filtered_rows(
    service: Any, database: SingleConnection, corpus: Corpus, tenant: str
) -> None:
    # Exact search disabled: every query goes through the HNSW index.
    hnsw_only = _service(database, service, exact_search_max_rows=0)
    before = _index_scans(database, corpus.store)
    recalls = []
    for query in corpus.queries:
        found = _search(hnsw_only, "filtered-ann", query, tenant)
        assert len(found) == K
        assert {corpus.tenants[corpus.ids.index(i)] for i in found} == {tenant}
        recalls.append(_recall(found, corpus.exact_top_k(query, tenant)))
    assert _index_scans(database, corpus.store) - before >= len(corpus.queries)
    assert np.mean(recalls) >= 0.9


@pytest.mark.parametrize("tenant", ["one", "ten"])
def test_the_top_k_query_alone_returns_k_thanks_to_iterative_scans(
    service: Any, corpus: Corpus, tenant: str
) -> None:
    # The SQL the service issues, without its fallback: iterative scans are what fill the answer.
    where = metadata_equals({"tenant": tenant})
    query_sql = search_sql.nearest_chunks_query(corpus.store, where)

    def rows(iterative_scan: Any, query: np.ndarray) -> int:
        knobs = IndexKnobs(40, iterative_scan, 20_000)
        with service.database.connection() as conn, conn.transaction():
            search_sql.set_search_options(conn, knobs)
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    b"EXPLAIN " + query_sql.as_bytes(conn),
                    search_sql.search_params(corpus.store, query, K, where),
                )
            )
            assert index_name(corpus.store.id) in plan
            return len(
                conn.execute(query_sql, search_sql.search_params(corpus.store, query, K, where)).fetchall()
            )

    assert [rows("relaxed_order", q) for q in corpus.queries] == [K] * len(corpus.queries)
    assert [rows("strict_order", q) for q in corpus.queries] == [K] * len(corpus.queries)
    # Without iterative scans, ef_search 40 candidates hold about 0.4 (1%) or 4 (10%) tenant rows.
    assert min(rows("off", q) for q in corpus.queries) < K


@pytest.mark.parametrize(("metadata_filter", "indexed"), ONE_PERCENT_FILTERS)
def test_every_operator_keeps_the_full_k_at_one_percent(
    service: Any,
    database: SingleConnection,
    operator_corpus: Corpus,
    metadata_filter: str | dict[str, Any],
    indexed: bool,
) -> None:
    # Through the service as configured: 60 matching chunks of 6,000 are few enough to be read exactly,
    # whatever the operator. And with the exact path off (the planner then walks the HNSW index or, for a
    # filter it estimates at a few rows, reads the store's rows and sorts them).
    corpus = operator_corpus
    hnsw_only = _service(database, service, exact_search_max_rows=0)
    chooser = _service(database, service)
    recalls = []
    for query in corpus.queries:
        expected = corpus.exact_top_k(query, "one")
        for searcher in (chooser, hnsw_only):
            found = _search(searcher, corpus.store.name, query, None, metadata_filter)
            assert len(found) == K
            assert {corpus.tenants[corpus.ids.index(i)] for i in found} == {"one"}
            recalls.append(_recall(found, expected))
        assert _search(chooser, corpus.store.name, query, None, metadata_filter) == expected
    assert np.mean(recalls) >= 0.9


@pytest.mark.parametrize(("metadata_filter", "indexed"), ONE_PERCENT_FILTERS)
def test_an_hnsw_walk_keeps_the_full_k_at_one_percent_with_every_operator(
    service: Any, operator_corpus: Corpus, metadata_filter: str | dict[str, Any], indexed: bool
) -> None:
    # The top-k query the service issues, held to the HNSW index (sorting the filtered rows is priced
    # out): iterative scans fill the answer whichever operator filters it.
    corpus = operator_corpus
    where = metadata_predicate(metadata_filter)
    query_sql = search_sql.nearest_chunks_query(corpus.store, where)
    for query in corpus.queries:
        params = search_sql.search_params(corpus.store, query, K, where)
        with service.database.connection() as conn, conn.transaction():
            search_sql.set_search_options(conn, IndexKnobs(40, "relaxed_order", 20_000))
            conn.execute("SET LOCAL enable_sort = off")
            plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query_sql.as_bytes(conn), params))
            assert index_name(corpus.store.id) in plan, plan
            rows = conn.execute(query_sql, params).fetchall()
        assert len(rows) == K


@pytest.mark.parametrize("name", list(ONE_PERCENT))
def test_the_gin_index_can_serve_the_containment_operators_and_no_other(
    service: Any, operator_corpus: Corpus, name: str
) -> None:
    # The plan of the exact path's count with every other way to the rows priced out: only a filter the
    # shared GIN index on store-scoped metadata can answer is read through it. With sequential and plain
    # index scans off, the planner may also read the whole GIN index just to list the store's rows (no
    # index condition, the filter applied to each row); that is not the index serving the filter.
    expression, tree, indexed = ONE_PERCENT[name]
    store = operator_corpus.store
    gin = "chunks_metadata_scope_gin"
    for form in (expression, tree):
        where = metadata_predicate(form)
        with service.database.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_indexscan = off")
            conn.execute("SET LOCAL enable_bitmapscan = on")
            condition = chunk_filters.where_sql(store, where)
            query = f"EXPLAIN SELECT 1 FROM chunks WHERE store_id = {store.id} AND {condition}"
            plan = "\n".join(row[0] for row in conn.execute(query, chunk_filters.where_params(store, where)))
        assert _gin_serves_filter(plan, gin) is indexed, plan


def _gin_serves_filter(plan: str, gin: str) -> bool:
    """Whether `plan` reads `gin` with an index condition on metadata (not only to list the store's rows)."""
    lines = plan.splitlines()
    return any(
        f"Bitmap Index Scan on {gin}" in line
        and index + 1 < len(lines)
        and lines[index + 1].strip().startswith("Index Cond:")
        and "metadata" in lines[index + 1]
        for index, line in enumerate(lines)
    )


@pytest.mark.parametrize("name", list(ONE_PERCENT))
def test_a_selective_filter_takes_the_exact_path_whatever_its_operator(
    service: Any, database: SingleConnection, operator_corpus: Corpus, name: str
) -> None:
    # 60 matching chunks are few enough for the exact path: the exact answer is worth reading every chunk
    # (once to count, cached a minute, and once per search) when no index finds them (docs/api.md).
    expression, tree, _ = ONE_PERCENT[name]
    for form in (expression, tree):
        chooser = _service(database, service)
        before = _table_reads(database)
        with database.connection() as conn, conn.transaction():
            where = chooser.where_for(None, form)
            assert chooser.scans_exactly(conn, operator_corpus.store, where, K)
        assert _table_reads(database) > before  # counted


def _table_reads(database: SingleConnection) -> int:
    """Sequential and index scans of the chunks table so far (counted by PostgreSQL)."""
    with database.connection() as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'chunks'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_selective_filter_is_answered_exactly_and_a_broad_one_by_the_index(
    service: Any, database: SingleConnection, corpus: Corpus
) -> None:
    # The store holds 6,000 chunks: top-10 scans exactly up to ceil(sqrt(4 * 10 * 6,000)) = 490 matching
    # chunks. Tenant `one` (60 chunks) is answered exactly, tenant `ten` (600) through the index.
    assert corpus.store.chunk_count == ROWS
    assert exact_scan_limit(ROWS, K, 20_000) == 490
    chooser = _service(database, service)
    before = _index_scans(database, corpus.store)
    for query in corpus.queries:
        assert _search(chooser, "filtered-ann", query, "one") == corpus.exact_top_k(query, "one")
    assert _index_scans(database, corpus.store) == before
    for query in corpus.queries:
        assert len(_search(chooser, "filtered-ann", query, "ten")) == K
    assert _index_scans(database, corpus.store) - before == len(corpus.queries)


@pytest.mark.parametrize("statistics_target", [1, 10_000])
def test_the_choice_does_not_move_with_the_planners_statistics(
    service: Any, postgres_dsn: str, database: SingleConnection, corpus: Corpus, statistics_target: int
) -> None:
    # The planner's estimates of these filters change with the sample ANALYZE takes (a target of 1
    # samples 300 rows); the choice reads counts only, so it is the same for a fresh service each time.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"SET default_statistics_target = {statistics_target}")
        conn.execute("ANALYZE chunks")
    chooser = _service(database, service)
    with database.connection() as conn, conn.transaction():
        choices = {
            tenant: chooser.scans_exactly(conn, corpus.store, metadata_equals({"tenant": tenant}), K)
            for tenant in ("one", "ten", "rest")
        }
    assert choices == {"one": True, "ten": False, "rest": False}


def test_a_filter_is_counted_once_whatever_the_writes_until_its_count_expires(
    service: Any, database: SingleConnection, corpus: Corpus
) -> None:
    # Counting reads the filter's rows through the GIN index on store-scoped metadata; nothing else here does.
    chooser = _service(database, service)
    clock = [0.0]
    chooser.filter_sizes = FilterSizes(ttl_s=60, clock=lambda: clock[0])
    where = metadata_equals({"tenant": "one"})
    gin = "chunks_metadata_scope_gin"
    before = _index_scans(database, corpus.store, gin)
    for version in range(3):  # as if a write came between searches: the count still serves
        store = replace(corpus.store, version=corpus.store.version + version)
        with database.connection() as conn, conn.transaction():
            assert chooser.scans_exactly(conn, store, where, K)
    assert _index_scans(database, corpus.store, gin) - before == 1
    clock[0] += 61
    with database.connection() as conn, conn.transaction():
        assert chooser.scans_exactly(conn, corpus.store, where, K)
    assert _index_scans(database, corpus.store, gin) - before == 2


def test_a_short_index_answer_falls_back_to_exact(
    service: Any, database: SingleConnection, corpus: Corpus
) -> None:
    hnsw_only = _service(database, service, exact_search_max_rows=0)
    for query in corpus.queries:
        found = _search(hnsw_only, "filtered-ann", query, "one", iterativeScan="off", efSearch=10)
        assert found == corpus.exact_top_k(query, "one")


def test_knobs_through_the_api(sample_store: Any, corpus: Corpus) -> None:
    query = corpus.queries[0].tolist()
    with TestClient(create_app()) as client:
        body = {
            "queryEmbedding": query,
            "topK": K,
            "store": "filtered-ann",
            "metadataFilter": {"tenant": "ten"},
        }
        plain = client.post(SEARCH, json=body)
        tuned = client.post(
            SEARCH,
            json={
                **body,
                "search": {"efSearch": 400, "iterativeScan": "strict_order", "maxScanTuples": 40_000},
            },
        )
        assert plain.status_code == tuned.status_code == 200
        assert [r["id"] for r in tuned.json()["results"]] == corpus.exact_top_k(corpus.queries[0], "ten")
        # Different knobs, a different cache entry.
        assert plain.headers["X-Cache"] == tuned.headers["X-Cache"] == "miss"
        assert client.post(SEARCH, json=body).headers["X-Cache"] == "hit"
        for bad in (
            {"efSearch": 0},
            {"efSearch": 1001},
            {"maxScanTuples": 10},
            {"iterativeScan": "sometimes"},
        ):
            response = client.post(SEARCH, json={**body, "search": bad})
            assert response.status_code == 422, bad
        retrieve = {"query": "pods", "grade": 0.0, "search": {"efSearch": 64}, "cacheTTLms": 0}
        assert client.post("/api/v1/rag/retrieve", json=retrieve).status_code == 200


@pytest.fixture()
def halfvec_corpus(service: Any, postgres_dsn: str) -> Iterator[Corpus]:
    corpus = _write_store(service, postgres_dsn, "filtered-ann-half", "halfvec")
    yield corpus
    with service.database.connection() as conn:
        drop_store(conn, corpus.store)


def test_a_halfvec_store_indexes_and_searches_half_precision(
    service: Any, database: SingleConnection, halfvec_corpus: Corpus
) -> None:
    with service.database.connection() as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            (index_name(halfvec_corpus.store.id),),
        ).fetchone()
    assert row is not None and "halfvec_cosine_ops" in row[0] and f"halfvec({DIM})" in row[0]
    hnsw_only = _service(database, service, exact_search_max_rows=0)
    before = _index_scans(database, halfvec_corpus.store)
    recalls = []
    for query in halfvec_corpus.queries:
        found = _search(hnsw_only, "filtered-ann-half", query, None)
        assert len(found) == K
        recalls.append(_recall(found, halfvec_corpus.exact_top_k(query, None)))
        assert len(_search(hnsw_only, "filtered-ann-half", query, "one")) == K
    assert _index_scans(database, halfvec_corpus.store) > before
    assert np.mean(recalls) >= 0.9
