"""Answer caching through the API, with DynamoDB served by moto_server and real boto3."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.api.app import create_app
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.cache.backends import DynamoDBBackend
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.cache.search_cache import SearchCache
from retrieval_core.container import get_service
from retrieval_core.observability import metrics
from tests.servers import MotoServer, create_cache_table
from tests.writing import TextDocument, ensure_store, write_documents

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"


class CountingDatabase:
    """The real database, counting how many times a connection is taken (every SQL path takes one)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.checkouts = 0

    @contextmanager
    def connection(self) -> Iterator[Any]:
        self.checkouts += 1
        with self.inner.connection() as conn:
            yield conn

    def close(self) -> None:
        pass


class CountingEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.model = inner.model
        self.dimension = inner.dimension

    def embed(self, texts, kind):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self.inner.embed(texts, kind)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    client: TestClient
    service: RetrievalService
    database: CountingDatabase
    embedder: CountingEmbedder
    clock: Clock


def make_harness(moto: MotoServer, shared_service: RetrievalService) -> Harness:
    from retrieval_core.container import get_service as dependency

    table = f"cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), table)
    clock = Clock()
    backend = DynamoDBBackend(table, lambda: moto.client("dynamodb"), clock=clock)
    cache = SearchCache(
        JsonCache(backend, "search"), JsonCache(backend, "store"), shared=True, default_ttl_s=300
    )
    database = CountingDatabase(shared_service.database)
    embedder = CountingEmbedder(shared_service.embedder)
    service = RetrievalService(database, embedder, "sample", shared_service.ef_search, cache=cache)  # type: ignore[arg-type]
    app = create_app()
    app.dependency_overrides[dependency] = lambda: service
    return Harness(TestClient(app), service, database, embedder, clock)


@pytest.fixture()
def harness(moto: MotoServer, sample_store, service) -> Harness:  # type: ignore[no-untyped-def]
    return make_harness(moto, service)


def post(h: Harness, body: dict[str, Any], path: str = RETRIEVE) -> tuple[str, dict[str, Any]]:
    response = h.client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.headers["X-Cache"], response.json()


QUERY = {"query": "How often are air filters replaced?", "grade": 0.2, "similarityTopK": 3}


def test_second_identical_request_is_a_hit_that_only_reads_the_store_s_version(harness: Harness) -> None:
    status, first = post(harness, QUERY)
    assert status == "miss"
    sql_before, embeds_before = harness.database.checkouts, harness.embedder.calls
    hits_before = metrics.counters["CacheHit"]

    status, second = post(harness, QUERY)
    assert status == "hit"
    assert second == first
    assert harness.database.checkouts == sql_before + 1  # the store's row, for its version; no search
    assert harness.embedder.calls == embeds_before  # no embedding on a hit
    assert metrics.counters["CacheHit"] == hits_before + 1


def samples(name: str) -> int:
    return len(metrics.durations.get(name, ()))


def test_a_computed_answer_reports_its_embed_and_search_time_and_a_hit_reports_none(
    harness: Harness,
) -> None:
    query = {**QUERY, "query": "Who reviews the expense reports?"}
    # The recorded durations are bounded (the latest 1,000): start empty, so that a count can grow.
    for name in ("EmbedTime", "SearchTime"):
        metrics.durations.pop(name, None)
    before = {name: samples(name) for name in ("EmbedTime", "SearchTime")}
    status, body = post(harness, query)
    assert status == "miss"
    for name, stage in (("EmbedTime", "embed"), ("SearchTime", "search")):
        assert samples(name) == before[name] + 1
        # The metric is the very time the answer reports (which rounds it to microseconds).
        assert round(metrics.durations[name][-1], 3) == body["pipeline"]["timingsMs"][stage] > 0

    assert post(harness, query)[0] == "hit"
    assert {name: samples(name) for name in before} == {name: n + 1 for name, n in before.items()}


def test_entries_expire_with_their_ttl(harness: Harness) -> None:
    assert post(harness, {**QUERY, "cacheTTLms": 60_000})[0] == "miss"
    harness.clock.now += 30
    assert post(harness, {**QUERY, "cacheTTLms": 60_000})[0] == "hit"
    harness.clock.now += 31
    assert post(harness, {**QUERY, "cacheTTLms": 60_000})[0] == "miss"


def test_ttl_zero_bypasses_and_over_24h_is_refused(harness: Harness) -> None:
    assert post(harness, {**QUERY, "cacheTTLms": 0})[0] == "bypass"
    assert post(harness, {**QUERY, "cacheTTLms": 0})[0] == "bypass"
    response = harness.client.post(RETRIEVE, json={**QUERY, "cacheTTLms": 86_400_001})
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"][0]["field"] == "cacheTTLms"


@pytest.mark.parametrize(
    "change",
    [
        {"grade": 0.25},
        {"similarityTopK": 4},
        {"docIds": ["hvac-filters"]},
        {"metadataFilter": {"project_name": "Facilities"}},
        {"query": "How often are air filters changed?"},
    ],
)
def test_requests_differing_in_one_option_both_miss(harness: Harness, change: dict[str, Any]) -> None:
    assert post(harness, QUERY)[0] == "miss"
    assert post(harness, {**QUERY, **change})[0] == "miss"
    assert post(harness, QUERY)[0] == "hit"


HYBRID = {**QUERY, "useHybrid": True}
WEIGHTED = {**HYBRID, "fusion": "weighted"}
RRF = {**HYBRID, "fusion": "rrf"}


@pytest.mark.parametrize(
    ("base", "change"),
    [
        (RRF, {"rrfK": 10}),
        (HYBRID, {"minFusedScore": 0.1}),
        (WEIGHTED, {"normalization": "minmax"}),
        (WEIGHTED, {"vectorWeight": 0.5}),
        (HYBRID, {"fusion": "rrf"}),
    ],
)
def test_hybrid_requests_differing_in_one_fusion_option_both_miss(
    harness: Harness, base: dict[str, Any], change: dict[str, Any]
) -> None:
    assert post(harness, base)[0] == "miss"
    assert post(harness, {**base, **change})[0] == "miss"
    assert post(harness, base)[0] == "hit"


def test_a_fusion_option_sent_with_its_default_value_shares_the_entry(harness: Harness) -> None:
    # The key is made of values, so the same request spelled out in full is the same answer.
    assert post(harness, HYBRID)[0] == "miss"
    default = {"fusion": "weighted", "normalization": "max", "vectorWeight": 0.7, "keywordWeight": 0.3}
    assert post(harness, {**HYBRID, **default})[0] == "hit"


def test_similarity_search_is_cached_too(harness: Harness, service) -> None:  # type: ignore[no-untyped-def]
    body = {"queryEmbedding": service.embedder.embed(["espresso"], "query")[0], "topK": 2}
    assert post(harness, body, SEARCH)[0] == "miss"
    assert post(harness, body, SEARCH)[0] == "hit"


def test_a_write_invalidates_cached_answers(harness: Harness) -> None:
    store = ensure_store(harness.service, "cache-invalidation")
    doc = TextDocument(id="policy", text="Badges are renewed every year at the front desk.")
    write_documents(harness.service, store, [doc], 500, 50)
    query = {"query": "When are badges renewed?", "grade": 0.0, "store": "cache-invalidation"}
    assert post(harness, query)[0] == "miss"
    assert post(harness, query)[0] == "hit"

    updated = TextDocument(id="policy", text="Badges are renewed every two years by the security team.")
    write_documents(harness.service, store, [updated], 500, 50)
    status, body = post(harness, query)
    assert status == "miss"
    assert body["results"][0]["content"] == updated.text


def test_an_answer_too_large_to_cache_is_still_served(harness: Harness, service) -> None:  # type: ignore[no-untyped-def]
    store = ensure_store(service, "cache-oversize")
    # The model reads only the first 256 tokens, so the leading sentence decides the similarity.
    docs = [
        TextDocument(id=f"big{i}", text="Everything about archive exports. " + os.urandom(100_000).hex())
        for i in range(5)
    ]
    write_documents(service, store, docs, 250_000, 0)
    before = metrics.counters["CacheValueTooLarge"]
    query = {"query": "archive exports", "grade": 0.0, "similarityTopK": 5, "store": "cache-oversize"}
    response = harness.client.post(RETRIEVE, json=query)
    assert response.status_code == 200
    assert response.headers["X-Cache"] == "miss"
    assert response.json()["totalResults"] == 5
    assert metrics.counters["CacheValueTooLarge"] == before + 1
    assert harness.client.post(RETRIEVE, json=query).headers["X-Cache"] == "miss"


def test_dynamodb_stopped_mid_test_serves_uncached(sample_store, service, caplog) -> None:  # type: ignore[no-untyped-def]
    moto = MotoServer()
    moto.start()
    try:
        h = make_harness(moto, service)
        assert post(h, QUERY)[0] == "miss"
        assert post(h, QUERY)[0] == "hit"
        moto.stop()
        errors_before = metrics.counters["CacheError"]
        status, body = post(h, QUERY)
        assert status == "miss"  # served from PostgreSQL; the cache failure is not the caller's problem
        assert body["results"][0]["metadata"]["documentId"] == "hvac-filters"
        assert metrics.counters["CacheError"] > errors_before
        assert "serving uncached" in caplog.text
    finally:
        moto.stop()


def test_runtime_uses_dynamodb_when_cache_table_is_set(moto: MotoServer, service_env, aws_env) -> None:  # type: ignore[no-untyped-def]
    from retrieval_core.container import build_cache
    from retrieval_core.settings import Settings

    table = f"cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), table)
    cache = build_cache(Settings(cache_table_name=table, dynamodb_endpoint_url=moto.endpoint_url))
    assert cache.shared
    cache.put_answer("k", {"a": 1}, 60)
    assert cache.get_answer("k") == {"a": 1}
    assert not build_cache(Settings()).shared
    service_cache = get_service().cache
    assert service_cache is not None and not service_cache.shared  # no CACHE_TABLE_NAME in the test env


@pytest.mark.parametrize("first_formatted", [False, True])
def test_formatted_and_plain_requests_share_the_answer_but_each_gets_its_own_shape(
    harness: Harness, first_formatted: bool
) -> None:
    formatted = {**QUERY, "returnFormatted": True, "maxContextTokens": 60}
    first, second = (formatted, QUERY) if first_formatted else (QUERY, formatted)
    assert post(harness, first)[0] == "miss"
    embeds = harness.embedder.calls
    status, body = post(harness, second)
    assert status == "hit" and harness.embedder.calls == embeds
    if second is formatted:
        assert body["context"].startswith("[1] Source: ") and body["contextTokens"] <= 60
        assert all("formattedContent" in r for r in body["results"])
    else:
        assert "context" not in body and all("formattedContent" not in r for r in body["results"])
