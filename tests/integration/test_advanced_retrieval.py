"""The advanced engine, hybrid search and batch retrieve, through the API on the real database."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.backends.router import Backends
from retrieval_core.embeddings import build_embedder
from retrieval_core.grants import OPEN_GRANT
from retrieval_core.settings import Settings
from tests.fakes.bedrock_rerank import FakeBedrockAgentRuntime
from tests.fakes.gemini_rerank import FakeGeminiRerank
from tests.fakes.openai_embeddings import FakeOpenAIEmbeddings
from tests.fakes.rerank_scoring import overlap_score
from tests.fakes.reranker import FakeReranker
from tests.writing import TextDocument, ensure_store, write_documents

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
    hybrid = retrieve(client, **query, useHybrid=True, fusion="rrf")
    assert hybrid["pipeline"]["hybrid"] is True and hybrid["pipeline"]["fusion"] == "rrf"
    assert set(ids(hybrid)) == {"security-incident#0", "security-keys#0"}
    scores = {r["id"]: r["keywordScore"] for r in hybrid["results"]}
    assert scores["security-keys#0"] > 0 and scores["security-incident#0"] is None
    # Each is first in one list: equal RRF scores, 1/(60+1), divided by the maximum 2/(60+1).
    assert [r["fusedScore"] for r in hybrid["results"]] == [0.5, 0.5]
    # The default fusion weighs the vector side 0.7 and the keyword side 0.3, each scaled by its best.
    default = retrieve(client, **query, useHybrid=True)
    similarity = {r["id"]: r["score"] for r in default["results"]}
    relative = similarity["security-keys#0"] / similarity["security-incident#0"]
    # The keyword hit's similarity is close to the nearest's, so its keyword score puts it first.
    assert relative > 0.75
    assert [(r["id"], r["fusedScore"]) for r in default["results"]] == [
        ("security-keys#0", pytest.approx(0.3 + 0.7 * relative)),
        ("security-incident#0", pytest.approx(0.7)),
    ]


def test_hybrid_reads_the_hybrid_flags_and_weights_steer_the_order(client: TestClient) -> None:
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
                {"query": "gemini", "grade": 0.0, "store": "fileSearchStores/kb-1"},
            ]
        },
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == [200, 422, 404, 200, 422]
    assert results[4]["error"]["details"]["errors"][0]["field"] == "backend"
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
        store = ensure_store(service, "batch-openai", embedder)
        documents = [TextDocument(id=f"doc-{i}", text=f"passage number {i}") for i in range(6)]
        write_documents(service, store, documents, 1000, 0, embedder)
        yield RetrievalService(service.database, embedder, "batch-openai", service.ef_search), fake


def no_gemini() -> Any:
    pytest.fail("a batch of pgvector requests built the Gemini backend")


def test_batch_embeds_every_query_in_one_provider_call(
    openai_service: tuple[RetrievalService, FakeOpenAIEmbeddings],
) -> None:
    batch_service, fake = openai_service
    fake.reset()
    bodies: list[dict[str, Any]] = [{"query": f"question {i}", "grade": 0.0} for i in range(5)]
    backends = Backends(lambda: batch_service, no_gemini)
    items = backends.retrieve_batch([*bodies, {"query": "invalid", "grade": -1}], OPEN_GRANT)
    assert [item.status for item in items] == [200] * 5 + [422]
    assert fake.embedding_batches() == [[f"question {i}" for i in range(5)]]


# Reranking through the API: a service wired to local fakes of each reranker, installed as the app's.


@contextmanager
def client_with_rerankers(service: RetrievalService, **settings: Any) -> Iterator[TestClient]:
    from retrieval_core import container
    from retrieval_core.api.app import create_app
    from retrieval_core.rerank import clear_reranker_cache

    rerankers = container.build_rerankers(Settings(_env_file=None, **settings))
    wired = RetrievalService(
        service.database, service.embedder, service.default_store, service.ef_search, rerankers=rerankers
    )
    previous = container.replace_service(wired)
    try:
        with TestClient(create_app()) as test_client:
            yield test_client
    finally:
        container.replace_service(previous)
        clear_reranker_cache()


QUESTION = "how often are air handling unit filters replaced"


def overlap_order(body: dict[str, Any]) -> list[float]:
    return [overlap_score(QUESTION, r["content"]) for r in body["results"]]


def test_bge_reranks_by_the_model_score_and_applies_top_k_and_score(
    service: RetrievalService, sample_store: Any
) -> None:
    with FakeReranker() as fake, client_with_rerankers(service, reranker_service_url=fake.url) as client:
        body = retrieve(client, query=QUESTION, rerank={"strategy": "bge", "topK": 3})
        assert body["pipeline"]["reranked"] is True and body["pipeline"]["rerankStrategy"] == "bge"
        scores = [r["rerankScore"] for r in body["results"]]
        assert scores == sorted(scores, reverse=True) and len(scores) == 3
        assert scores == pytest.approx(overlap_order(body))  # the fake's scores, in its order
        assert body["pipeline"]["candidatesConsidered"] == 20 and body["pipeline"]["timingsMs"]["rerank"] > 0
        (call,) = fake.requests_to("POST", r"/v1/rerank")
        # Every candidate at or above grade is reranked, before the cut to topK.
        assert call.json()["query"] == QUESTION and 3 < len(call.json()["documents"]) <= 20
        # rerank.score drops what the reranker scores below it.
        strict = retrieve(client, query=QUESTION, rerank={"strategy": "bge", "topK": 10, "score": 0.5})
        assert strict["results"] and all(r["rerankScore"] >= 0.5 for r in strict["results"])
        # With RERANKER_SERVICE_URL set, the default engine reranks with bge unasked.
        unasked = retrieve(client, query=QUESTION)
        assert unasked["pipeline"]["rerankStrategy"] == "bge" and unasked["totalResults"] == 5


def test_failing_reranker_keeps_search_order_with_a_warning(
    service: RetrievalService, sample_store: Any
) -> None:
    with FakeReranker() as fake, client_with_rerankers(service, reranker_service_url=fake.url) as client:
        fake.fail_always(500)
        body = retrieve(client, query=QUESTION, rerank={"strategy": "bge", "topK": 4})
        assert body["pipeline"]["reranked"] is False and "failed" in body["pipeline"]["warnings"][0]
        assert len(fake.requests_to("POST", r"/v1/rerank")) == 2  # two attempts
        search_order = retrieve(client, query=QUESTION, rerank={"enabled": False, "topK": 4})
        assert ids(body) == ids(search_order)
        assert all(r["rerankScore"] is None for r in body["results"])


def test_hanging_reranker_is_bounded_by_the_timeout(service: RetrievalService, sample_store: Any) -> None:
    with (
        FakeReranker(hang_s=30) as fake,
        client_with_rerankers(service, reranker_service_url=fake.url, rerank_timeout_s=0.5) as client,
    ):
        start = time.monotonic()
        body = retrieve(client, query=QUESTION, rerank={"strategy": "bge"})
        waited = time.monotonic() - start
    assert body["pipeline"]["reranked"] is False and body["totalResults"] == 5
    assert waited < 15  # far below the fake's 30 s hang: the budget, not the hang, ended the wait


def test_llm_strategy_scores_candidates_with_gemini_in_one_call(
    service: RetrievalService, sample_store: Any
) -> None:
    with (
        FakeGeminiRerank(api_key="gemini-test-key") as fake,
        client_with_rerankers(service, gemini_api_key="gemini-test-key", gemini_base_url=fake.url) as client,
    ):
        body = retrieve(client, query=QUESTION, rerank={"strategy": "llm", "topK": 3})
        assert body["pipeline"]["reranked"] is True and body["pipeline"]["rerankStrategy"] == "llm"
        assert [r["rerankScore"] for r in body["results"]] == pytest.approx(overlap_order(body))
        assert len(fake.generate_calls()) == 1


def test_bedrock_strategy_calls_the_rerank_api(
    service: RetrievalService, sample_store: Any, aws_env: None
) -> None:
    with (
        FakeBedrockAgentRuntime() as fake,
        client_with_rerankers(
            service, bedrock_region="us-east-1", bedrock_agent_runtime_endpoint_url=fake.url
        ) as client,
    ):
        body = retrieve(client, query=QUESTION, rerank={"strategy": "bedrock", "topK": 2})
        assert body["pipeline"]["reranked"] is True and body["pipeline"]["rerankStrategy"] == "bedrock"
        assert [r["rerankScore"] for r in body["results"]] == pytest.approx(overlap_order(body))
        assert len(fake.rerank_calls()) == 1


def test_mmr_prefers_a_different_chunk_over_a_near_duplicate(service: RetrievalService) -> None:
    embedder = service.embedder
    store = ensure_store(service, "mmr-duplicates", embedder)
    texts = {
        "copy-a": "Replace the air filters of the air handling units every three months.",
        "copy-b": "Replace the air filters of the air handling units every three months!",
        "other": "Filter replacement is logged in the maintenance system with the pressure reading.",
    }
    documents = [TextDocument(id=doc_id, text=text) for doc_id, text in texts.items()]
    write_documents(service, store, documents, 1000, 0, embedder)
    query = {"query": "how often are air filters replaced", "store": "mmr-duplicates"}
    plain = retrieve(service_client(), **query, rerank={"strategy": "mmr", "topK": 2}, mmrLambda=1.0)
    diverse = retrieve(service_client(), **query, rerank={"strategy": "mmr", "topK": 2}, mmrLambda=0.5)
    assert {r["metadata"]["documentId"] for r in plain["results"]} == {"copy-a", "copy-b"}
    assert plain["pipeline"]["rerankStrategy"] == "mmr" and plain["pipeline"]["reranked"] is True
    assert [r["metadata"]["documentId"] for r in diverse["results"]][1] == "other"


def service_client() -> TestClient:
    from retrieval_core.api.app import create_app

    return TestClient(create_app())
