"""Strict request types: a value of the wrong JSON type is a 422 naming the field,
never converted ("0.5" or true for a number, "yes" for a boolean, a number for a string)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.lambdas.retrieve_queue import read_job

RETRIEVE = {"query": "vacation policy", "grade": 0}
VECTOR = [0.1] * 384

# (path, method, valid body, field sent with the wrong type, wrong value, field named in the error)
CASES: list[tuple[str, str, dict[str, Any], str, Any, str]] = [
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "grade", "0.5", "grade"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "grade", True, "grade"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "query", 5, "query"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "similarityTopK", "5", "similarityTopK"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "similarityTopK", 5.0, "similarityTopK"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "similarityTopK", True, "similarityTopK"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "useHybrid", "yes", "useHybrid"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "useHybrid", 1, "useHybrid"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "store", 5, "store"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "docIds", [1], "docIds.0"),
    ("/api/v1/rag/retrieve", "post", {**RETRIEVE, "useHybrid": True}, "vectorWeight", "0.5", "vectorWeight"),
    ("/api/v1/rag/retrieve", "post", {**RETRIEVE, "useHybrid": True}, "keywordWeight", True, "keywordWeight"),
    (
        "/api/v1/rag/retrieve",
        "post",
        {**RETRIEVE, "useHybrid": True},
        "minFusedScore",
        "0.1",
        "minFusedScore",
    ),
    (
        "/api/v1/rag/retrieve",
        "post",
        {**RETRIEVE, "useHybrid": True, "fusion": "rrf"},
        "rrfK",
        "60",
        "rrfK",
    ),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "rerank", {"topK": "3"}, "rerank.topK"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "rerank", {"enabled": "true"}, "rerank.enabled"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "rerank", {"score": "0.5"}, "rerank.score"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "cacheTTLms", "1000", "cacheTTLms"),
    ("/api/v1/rag/retrieve", "post", RETRIEVE, "search", {"efSearch": "40"}, "search.efSearch"),
    ("/api/v1/chunks/similarity-search", "post", {"queryEmbedding": VECTOR}, "topK", "5", "topK"),
    (
        "/api/v1/chunks/similarity-search",
        "post",
        {},
        "queryEmbedding",
        ["0.1", *VECTOR[1:]],
        "queryEmbedding.0",
    ),
    (
        "/api/v1/chunks/similarity-search",
        "post",
        {},
        "queryEmbedding",
        [*VECTOR[1:], True],
        "queryEmbedding.383",
    ),
    ("/api/v1/stores/strict-types", "put", {}, "displayName", 5, "displayName"),
    ("/api/v1/stores/strict-types", "put", {}, "allowedMetadataKeys", [1], "allowedMetadataKeys.0"),
    ("/api/v1/stores/strict-types", "put", {}, "textSearch", True, "textSearch"),
    ("/api/v1/stores/sample/documents/d1", "put", {}, "text", 5, "text"),
    ("/api/v1/stores/sample/documents/d1", "put", {"text": "x"}, "fileName", 1, "fileName"),
    ("/api/v1/knowledge/search", "post", {"query": "q", "store": "s"}, "topK", "5", "topK"),
    (
        "/api/v1/knowledge/search",
        "post",
        {"query": "q", "store": "s"},
        "maxOutputTokens",
        1.0,
        "maxOutputTokens",
    ),
    ("/api/v1/knowledge/search", "post", {"query": "q", "store": "s"}, "metadataFilter", 5, "metadataFilter"),
]


@pytest.mark.parametrize(
    ("path", "method", "body", "field", "value", "named"),
    CASES,
    ids=[f"{c[0].rsplit('/', 1)[-1]}-{c[3]}={c[4]!r}"[:60] for c in CASES],
)
def test_a_value_of_the_wrong_type_is_a_422_naming_the_field(
    client: TestClient, path: str, method: str, body: dict[str, Any], field: str, value: Any, named: str
) -> None:
    response = client.request(method, path, json={**body, field: value})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert [e["field"] for e in error["details"]["errors"]] == [named]


def test_json_integers_are_numbers(client: TestClient) -> None:
    response = client.post("/api/v1/rag/retrieve", json={**RETRIEVE, "grade": 1, "store": "sample"})
    assert response.status_code == 200, response.text
    assert response.json()["results"] == []  # nothing reaches similarity 1


def test_queue_messages_are_as_strict(service: Any) -> None:
    record = {"messageId": "m1", "body": '{"requestId": "r1", "query": "q", "grade": "0.5"}'}
    job = read_job(record, frozenset())
    assert job.request is None and job.error is not None
    assert job.error.message.startswith("grade:")
