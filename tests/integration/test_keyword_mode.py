"""searchMode "keyword" and matchedTerms on the real store: a keyword search alone embeds nothing, returns
only what the keyword query matches, and every keyword answer names the words that matched, as written."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.embeddings.base import Embedder, EmbeddingKind
from tests.writing import STORES, doc_url, serving_with

RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"
DOCUMENTS = {
    "refunds": "Refunds are refunded within thirty days. The refund desk answers every request.",
    "money-back": "Unhappy customers get their money back: we return the payment for any order.",
    "bread": "Sourdough bread rises slowly because wild yeast ferments the dough.",
    "dock": "Opening hours of the warehouse. The loading dock code is ZX4417 for night deliveries.",
    "hostile": "<script>alert('refund')</script> <b>Refunding</b> is done by the refund team & co.",
}
NAIVE = {"engineName": "naive", "cacheTTLms": 0}


class CountingEmbedder:
    """The service's own embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model = inner.model
        self.dimension = inner.dimension
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts, kind)


@pytest.fixture(scope="module")
def keyword_store(service: Any, sample_store: Any) -> str:
    """A store of five short documents, written through the documents API."""
    from retrieval_core.api.app import create_app

    name = f"kw-{uuid.uuid4().hex[:8]}"
    with TestClient(create_app()) as client:
        assert client.put(f"{STORES}/{name}", json={}).status_code in (200, 201)
        for document_id, text in DOCUMENTS.items():
            written = client.put(doc_url(name, document_id), json={"text": text})
            assert written.status_code in (200, 201), written.text
    return name


@pytest.fixture()
def counting(service: Any, client: TestClient) -> Iterator[CountingEmbedder]:
    embedder = CountingEmbedder(service.embedder)
    with serving_with(service, embedder):
        yield embedder


def retrieve(client: TestClient, store: str, **body: Any) -> dict[str, Any]:
    response = client.post(RETRIEVE, json={"store": store, **NAIVE, **body})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def documents(body: dict[str, Any]) -> list[str]:
    return [r["metadata"]["documentId"] for r in body["results"]]


def test_keyword_mode_finds_by_a_word_dense_search_ranks_low_without_embedding_the_query(
    client: TestClient, keyword_store: str, counting: CountingEmbedder
) -> None:
    query = "refund ZX4417"
    dense = retrieve(client, keyword_store, query=query, grade=0.0, similarityTopK=2)
    assert counting.texts == [query] and dense["pipeline"]["timingsMs"]["embed"] > 0
    assert "dock" not in documents(dense)  # the chunk holding the code is not among the two nearest
    assert dense["pipeline"]["searchMode"] == "vector" and "matchedTerms" not in dense["results"][0]

    found = retrieve(client, keyword_store, query=query, searchMode="keyword", similarityTopK=2)
    assert counting.texts == [query]  # the keyword search embedded nothing
    assert documents(found) == ["refunds", "dock"]
    pipeline = found["pipeline"]
    assert pipeline["searchMode"] == "keyword" and pipeline["keywordScorer"] == "bm25"
    assert pipeline["hybrid"] is False and pipeline["fusion"] is None and pipeline["timingsMs"]["embed"] == 0
    dock = found["results"][1]
    assert dock["score"] is None and dock["fusedScore"] is None and dock["keywordScore"] > 0
    assert dock["matchedTerms"] == ["ZX4417"]


def test_keyword_results_are_the_keyword_matches_alone_best_first(
    client: TestClient, keyword_store: str
) -> None:
    found = retrieve(client, keyword_store, query="refund", searchMode="keyword")
    assert set(documents(found)) == {"refunds", "hostile"}  # "money-back" is about refunds, without the word
    scores = [r["keywordScore"] for r in found["results"]]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert all(r["score"] is None for r in found["results"])
    hybrid = retrieve(client, keyword_store, query="refund", useHybrid=True, grade=0.0, similarityTopK=5)
    keyword_of = {r["metadata"]["documentId"]: r["keywordScore"] for r in hybrid["results"]}
    assert {d: s for d, s in keyword_of.items() if s is not None} == pytest.approx(
        dict(zip(documents(found), scores, strict=True))
    )


def test_matched_terms_are_the_surface_forms_of_stemmed_matches(
    client: TestClient, keyword_store: str
) -> None:
    found = retrieve(client, keyword_store, query="refund", searchMode="keyword", docIds=["refunds"])
    assert found["results"][0]["matchedTerms"] == ["Refunds", "refunded", "refund"]
    hybrid = retrieve(client, keyword_store, query="refund policy", searchMode="hybrid", grade=0.0)
    terms = {r["metadata"]["documentId"]: r["matchedTerms"] for r in hybrid["results"]}
    assert terms["refunds"] == ["Refunds", "refunded", "refund"]
    assert terms["money-back"] == []  # a vector hit the keyword query does not match
    for result in hybrid["results"]:
        for term in result["matchedTerms"]:
            assert re.search(rf"(?<!\w){re.escape(term)}(?!\w)", result["content"])


def test_an_excluded_word_is_not_a_matched_term(client: TestClient, keyword_store: str) -> None:
    found = retrieve(client, keyword_store, query="refund -team", searchMode="keyword")
    assert documents(found) == ["refunds"]
    assert found["results"][0]["matchedTerms"] == ["Refunds", "refunded", "refund"]


def test_matched_terms_of_a_hostile_chunk_are_plain_words(client: TestClient, keyword_store: str) -> None:
    found = retrieve(client, keyword_store, query="refunding team", searchMode="keyword", docIds=["hostile"])
    terms = found["results"][0]["matchedTerms"]
    assert terms == ["Refunding", "refund", "team"]
    assert all(re.fullmatch(r"\w+", t) for t in terms)


def test_a_query_with_no_keyword_is_an_empty_answer_with_a_warning(
    client: TestClient, keyword_store: str
) -> None:
    for query in ("the of and", "?!", "-refund"):
        found = retrieve(client, keyword_store, query=query, searchMode="keyword")
        assert found["results"] == [] and found["totalResults"] == 0
        assert found["pipeline"]["warnings"] == [
            "the query has no word to search for by keyword (only exclusions, stopwords or punctuation): "
            "a keyword search finds nothing"
        ]


def test_filters_rerank_and_context_apply_in_keyword_mode(client: TestClient, keyword_store: str) -> None:
    only = retrieve(client, keyword_store, query="refund", searchMode="keyword", docIds=["hostile"])
    assert documents(only) == ["hostile"]
    one = retrieve(client, keyword_store, query="refund", searchMode="keyword", similarityTopK=1)
    assert len(one["results"]) == 1
    formatted = retrieve(
        client,
        keyword_store,
        query="refund",
        searchMode="keyword",
        returnFormatted=True,
        maxContextTokens=200,
    )
    assert formatted["context"].startswith("[1] ") and formatted["results"][0]["citation"] == 1
    # The default engine reranks when asked; no reranker is configured here, so search order stays.
    reranked = client.post(
        RETRIEVE,
        json={
            "store": keyword_store,
            "query": "refund",
            "searchMode": "keyword",
            "rerank": {"strategy": "bge"},
        },
    )
    assert reranked.status_code == 200 and reranked.json()["engineUsed"] == "advanced"
    assert "reranker 'bge' is not configured" in reranked.json()["pipeline"]["warnings"][0]


def test_the_modes_are_cached_apart(
    client: TestClient, keyword_store: str, counting: CountingEmbedder
) -> None:
    body = {"store": keyword_store, "query": "refund desk", "engineName": "naive", "cacheTTLms": 60_000}
    keyword = client.post(RETRIEVE, json={**body, "searchMode": "keyword"})
    vector = client.post(RETRIEVE, json={**body, "grade": 0.0})
    hybrid = client.post(RETRIEVE, json={**body, "grade": 0.0, "searchMode": "hybrid"})
    same = client.post(RETRIEVE, json={**body, "grade": 0.0, "useHybrid": True})
    assert [r.headers["X-Cache"] for r in (keyword, vector, hybrid, same)] == ["miss", "miss", "miss", "hit"]
    assert keyword.json()["pipeline"]["searchMode"] == "keyword"
    assert vector.json()["pipeline"]["searchMode"] == "vector"
    assert same.json()["pipeline"]["searchMode"] == "hybrid"


def test_a_batch_runs_each_mode_and_embeds_only_the_others(
    client: TestClient, keyword_store: str, counting: CountingEmbedder
) -> None:
    requests = [
        {"store": keyword_store, "query": "refund", "searchMode": "keyword", **NAIVE},
        {"store": keyword_store, "query": "sourdough", "grade": 0.0, **NAIVE},
        {"store": keyword_store, "query": "refund", "searchMode": "keyword", "grade": 0.1},
    ]
    response = client.post(BATCH, json={"requests": requests})
    assert response.status_code == 200, response.text
    items = response.json()["results"]
    assert [i["status"] for i in items] == [200, 200, 422]
    assert items[0]["response"]["pipeline"]["searchMode"] == "keyword"
    assert items[1]["response"]["pipeline"]["searchMode"] == "vector"
    assert items[2]["error"]["details"]["errors"][0]["field"] == "grade"
    assert counting.texts == ["sourdough"]


def test_an_answer_can_stand_on_keyword_results(client: TestClient, keyword_store: str) -> None:
    response = client.post(
        "/api/v1/rag/answer", json={"store": keyword_store, "query": "refund desk", "searchMode": "keyword"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["sources"] and body["sources"][0]["metadata"]["documentId"] == "refunds"
    assert body["sources"][0]["score"] is None and body["sources"][0]["matchedTerms"]
