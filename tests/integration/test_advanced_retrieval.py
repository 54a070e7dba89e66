"""The advanced engine, hybrid search and batch retrieve, through the API on the real database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.embeddings import build_embedder
from retrieval_core.ingest import SourceDocument, ensure_store, ingest_documents
from retrieval_core.service import RetrievalService
from retrieval_core.settings import Settings
from tests.fakes.openai_embeddings import FakeOpenAIEmbeddings

RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"


def retrieve(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post(RETRIEVE, json={"grade": 0.0, "cacheTTLms": 0, **body})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def test_default_engine_takes_20_candidates_and_returns_rerank_top_k(client: TestClient) -> None:
    body = retrieve(client, query="How does Kubernetes decide which node runs a pod?")
    assert body["engineUsed"] == "advanced"
    assert body["pipeline"]["candidatesConsidered"] == 20
    # No reranker configured and none asked for: search order, cut to rerank.topK (5), no warning.
    assert body["totalResults"] == 5 and body["pipeline"]["reranked"] is False
    assert body["pipeline"]["warnings"] == []
    assert ids(body)[0] == "k8s-scheduling#0"
    three = retrieve(
        client,
        query="How does Kubernetes decide which node runs a pod?",
        rerank={"enabled": False, "topK": 3},
    )
    assert ids(three) == ids(body)[:3]


def test_grade_applies_to_similarity_in_the_default_engine_too(client: TestClient) -> None:
    loose = retrieve(client, query="air filter replacement schedule")
    cut = loose["results"][1]["score"]
    graded = retrieve(client, query="air filter replacement schedule", grade=cut)
    assert ids(graded) == ids(loose)[:2]


def test_requested_reranker_that_is_not_configured_keeps_order_warns_and_is_not_cached(
    client: TestClient,
) -> None:
    query = {"query": "rotate API keys", "grade": 0.0, "rerank": {"strategy": "bge", "topK": 4}}
    first = client.post(RETRIEVE, json=query)
    assert first.status_code == 200
    body = first.json()
    assert body["pipeline"]["reranked"] is False and body["totalResults"] == 4
    assert "not configured" in body["pipeline"]["warnings"][0]
    assert ids(body) == ids(retrieve(client, query="rotate API keys", rerank={"enabled": False, "topK": 4}))
    # A degraded answer is not cached: the next identical request computes again.
    assert client.post(RETRIEVE, json=query).headers["X-Cache"] == "miss"


def test_pipeline_reports_timings_of_each_stage(client: TestClient) -> None:
    timings = retrieve(client, query="espresso machine descaling")["pipeline"]["timingsMs"]
    assert timings["embed"] > 0 and timings["search"] > 0 and timings["rerank"] == 0


def test_hybrid_adds_keyword_hits_the_vector_search_missed(client: TestClient) -> None:
    # "ninety" is in security-keys only; the single nearest chunk is another one.
    query = {"query": "ninety days", "engineName": "naive", "similarityTopK": 1}
    vector = retrieve(client, **query)
    assert ids(vector) == ["security-incident#0"]
    assert all(r["keywordScore"] is None and r["fusedScore"] is None for r in vector["results"])
    hybrid = retrieve(client, **query, useHybrid=True)
    assert hybrid["pipeline"]["hybrid"] is True and hybrid["pipeline"]["fusion"] == "rrf"
    assert set(ids(hybrid)) == {"security-incident#0", "security-keys#0"}
    scores = {r["id"]: r["keywordScore"] for r in hybrid["results"]}
    assert scores["security-keys#0"] > 0 and scores["security-incident#0"] is None
    # Each is first in one list: equal RRF scores, 1/(60+1).
    assert [r["fusedScore"] for r in hybrid["results"]] == pytest.approx([1 / 61, 1 / 61])


def test_hybrid_reads_seed_004_flags_and_weights_steer_the_order(client: TestClient) -> None:
    base = {"query": "rotate the old key after ninety days", "engineName": "naive", "similarityTopK": 10}
    vector = retrieve(client, **base)
    vector_only = retrieve(client, **base, useHybrid=True, fusion="weighted", vectorWeight=1, keywordWeight=0)
    keyword_only = retrieve(
        client, **base, useHybrid=True, fusion="weighted", vectorWeight=0, keywordWeight=1
    )
    assert vector_only["pipeline"]["fusion"] == "weighted"
    # All weight on vectors: the vector order. All weight on keywords: best keyword score first.
    assert ids(vector_only)[: len(ids(vector))] == ids(vector)
    keyword_scores = [r["keywordScore"] or 0.0 for r in keyword_only["results"]]
    assert keyword_scores[0] > 0 and keyword_scores[0] == max(keyword_scores)
    assert all(0.0 <= r["fusedScore"] <= 1.0 for r in keyword_only["results"])


def test_hybrid_respects_filters_on_both_sides(client: TestClient) -> None:
    body = retrieve(
        client,
        query="milk frother",
        engineName="naive",
        useHybrid=True,
        metadataFilter={"project_name": "Platform"},
        similarityTopK=10,
    )
    assert body["results"] and all(r["metadata"]["project_name"] == "Platform" for r in body["results"])
    assert "coffee-machine#0" not in ids(body)


def test_hybrid_with_only_stopwords_is_the_vector_search(client: TestClient) -> None:
    vector = retrieve(client, query="what is the", engineName="naive", similarityTopK=5)
    hybrid = retrieve(client, query="what is the", engineName="naive", similarityTopK=5, useHybrid=True)
    assert ids(hybrid) == ids(vector)


def test_batch_answers_in_order_and_isolates_failures(client: TestClient) -> None:
    response = client.post(
        BATCH,
        json={
            "requests": [
                {"query": "espresso machine", "grade": 0.0, "engineName": "naive", "similarityTopK": 1},
                {"query": "bad grade", "grade": 2.0},
                {"query": "unknown store", "grade": 0.0, "store": "no-such-store"},
                {"query": "pod scheduling", "grade": 0.0, "rerank": {"topK": 2}},
            ]
        },
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == [200, 422, 404, 200]
    assert results[0]["response"]["results"][0]["id"] == "coffee-machine#0"
    assert results[1]["error"]["code"] == "validation_error" and "grade" in results[1]["error"]["message"]
    assert results[2]["error"]["code"] == "store_not_found"
    assert results[3]["response"]["results"][0]["id"] == "k8s-scheduling#0"
    assert results[3]["response"]["totalResults"] == 2


@pytest.mark.parametrize("size", [0, 21])
def test_batch_size_is_1_to_20(client: TestClient, size: int) -> None:
    body = {"requests": [{"query": "q", "grade": 0.0}] * size}
    response = client.post(BATCH, json=body)
    assert response.status_code == 422 and response.json()["error"]["message"].startswith("requests")


@pytest.fixture
def openai_service(service: RetrievalService) -> Iterator[tuple[RetrievalService, FakeOpenAIEmbeddings]]:
    """A service embedding through the OpenAI-compatible client, against a local fake, on its own store."""
    with FakeOpenAIEmbeddings(dimension=8) as fake:
        settings = Settings(
            embedding_provider="openai",
            openai_base_url=fake.base_url,
            embedding_model="fake-embedding-8",
            embedding_dimension=8,
        )
        embedder = build_embedder(settings)
        store = ensure_store(service.database, embedder, "batch-openai")
        documents = [SourceDocument(id=f"doc-{i}", text=f"passage number {i}") for i in range(6)]
        ingest_documents(service.database, embedder, store, documents, 1000, 0, progress=False)
        yield RetrievalService(service.database, embedder, "batch-openai", service.ef_search), fake


def test_batch_embeds_every_query_in_one_provider_call(
    openai_service: tuple[RetrievalService, FakeOpenAIEmbeddings],
) -> None:
    batch_service, fake = openai_service
    fake.reset()
    bodies: list[dict[str, Any]] = [{"query": f"question {i}", "grade": 0.0} for i in range(5)]
    items = batch_service.retrieve_batch([*bodies, {"query": "invalid", "grade": -1}])
    assert [item.status for item in items] == [200] * 5 + [422]
    assert fake.embedding_batches() == [[f"question {i}" for i in range(5)]]
