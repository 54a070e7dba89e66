"""POST /api/v1/knowledge/search and retrieve on a Gemini store, through the real google-genai client
against a fake Gemini API on 127.0.0.1."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fakes.gemini import FakeGemini
from tests.fakes.http import Reply
from tests.integration.knowledge_support import (  # noqa: F401 (gemini, gemini_client: fixtures)
    FILE_SEARCH_GROUNDING,
    GEMINI_KEY,
    HVAC_DISPLAY,
    HVAC_ESCALATION,
    HVAC_MANUAL,
    HVAC_STORE,
    LEGACY_GROUNDING,
    WEB_GROUNDING,
    knowledge_client,
    stock_fake,
)

SEARCH = "/api/v1/knowledge/search"
RETRIEVE = "/api/v1/rag/retrieve"
QUESTION = "What is the procedure for handling cold complaints?"


@pytest.fixture()
def client(gemini_client: TestClient) -> TestClient:
    return gemini_client


def search(client: TestClient, **fields: Any) -> Any:
    return client.post(SEARCH, json={"query": QUESTION, "store": HVAC_DISPLAY, **fields})


def warm_resolution(client: TestClient, gemini: FakeGemini) -> None:
    """Resolve the store once (cached), so scripted failures hit generateContent, not the listing."""
    assert client.get("/api/v1/stores/resolve", params={"name": HVAC_DISPLAY, "backend": "gemini"}).is_success
    gemini.reset()


def test_search_answers_with_sources_and_sends_the_file_search_tool(
    client: TestClient, gemini: FakeGemini
) -> None:
    response = search(
        client,
        topK=7,
        metadataFilter='source_type = "s3"',
        systemInstruction="Answer concisely in one paragraph.",
        maxOutputTokens=512,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["text"] == f"Answer to: {QUESTION}"
    assert body["groundingMetadata"] == FILE_SEARCH_GROUNDING
    first, second, third = body["sources"]
    assert first == {
        "documentId": HVAC_MANUAL,
        "documentName": "hvac-manual.pdf",
        "uri": None,
        "chunk": "Cold complaints: check the thermostat set point first.",
        "score": 0.88,
        "storeName": HVAC_STORE,
        "metadata": {"source_type": "s3", "year": 2024, "tags": ["hvac", "cold"]},
        "pageNumber": 12,
    }
    # The same document twice: both chunks are kept.
    assert second["documentId"] == HVAC_MANUAL and second["score"] == 0.91 and second["pageNumber"] == 13
    assert third["score"] is None

    (call,) = gemini.generate_calls()
    assert call.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert call.headers["x-goog-api-key"] == GEMINI_KEY
    sent = call.json()
    (tool,) = sent["tools"]
    file_search = tool["fileSearch"]
    assert file_search == {
        "file_search_store_names": [HVAC_STORE],
        "top_k": 7,
        "metadata_filter": 'source_type = "s3"',
    } or file_search == {
        "fileSearchStoreNames": [HVAC_STORE],
        "topK": 7,
        "metadataFilter": 'source_type = "s3"',
    }
    assert sent["contents"][0]["parts"] == [{"text": QUESTION}]
    assert sent["generationConfig"]["maxOutputTokens"] == 512
    assert sent["systemInstruction"]["parts"] == [{"text": "Answer concisely in one paragraph."}]


def test_defaults_are_256_output_tokens_and_the_configured_model(
    client: TestClient, gemini: FakeGemini
) -> None:
    assert search(client).status_code == 200
    assert search(client, model="gemini-2.5-pro", query="another question").status_code == 200
    default_call, pro_call = gemini.generate_calls()
    assert default_call.json()["generationConfig"] == {"maxOutputTokens": 256}
    assert "systemInstruction" not in default_call.json()
    assert pro_call.path == "/v1beta/models/gemini-2.5-pro:generateContent"


@pytest.mark.parametrize(
    ("grounding", "expected"),
    [
        (
            WEB_GROUNDING,
            [
                {"uri": "https://example.org/hvac", "documentName": "example.org", "score": None},
                {"uri": "https://example.net/cold", "documentName": "Cold rooms", "score": 0.7},
            ],
        ),
        (
            LEGACY_GROUNDING,
            [
                {"chunk": "Legacy: check the thermostat.", "documentId": "corpora/hvac/documents/manual"},
                {"chunk": "Legacy: bare chunk data.", "documentId": None},
            ],
        ),
    ],
    ids=["web", "legacy"],
)
def test_web_and_legacy_grounding_shapes_reach_the_caller(
    client: TestClient, gemini: FakeGemini, grounding: dict[str, Any], expected: list[dict[str, Any]]
) -> None:
    gemini.groundings[HVAC_STORE] = grounding
    body = search(client).json()
    assert [{k: s[k] for k in want} for s, want in zip(body["sources"], expected, strict=True)] == expected
    # The raw metadata is passed through untouched, fields google-genai does not model included.
    assert body["groundingMetadata"] == grounding


@pytest.mark.parametrize("grounding", [None, {"groundingChunks": []}], ids=["absent", "no-chunks"])
def test_empty_grounding_is_a_valid_answer_without_sources(
    client: TestClient, gemini: FakeGemini, grounding: dict[str, Any] | None
) -> None:
    if grounding is None:
        del gemini.groundings[HVAC_STORE]
    else:
        gemini.groundings[HVAC_STORE] = grounding
    response = search(client)
    assert response.status_code == 200
    assert response.json() == {
        "text": f"Answer to: {QUESTION}",
        "sources": [],
        "groundingMetadata": grounding,
    }


def test_identical_searches_hit_the_cache_and_every_option_is_in_the_key(
    client: TestClient, gemini: FakeGemini
) -> None:
    first = search(client, systemInstruction="Be brief.", maxOutputTokens=300)
    again = search(client, systemInstruction="Be brief.", maxOutputTokens=300)
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
    assert again.json() == first.json()
    assert len(gemini.generate_calls()) == 1
    # A key of store, query, filter and topK only would have served these two the cached
    # answer written for another instruction or length.
    other_instruction = search(client, systemInstruction="Answer in French.", maxOutputTokens=300)
    other_length = search(client, systemInstruction="Be brief.", maxOutputTokens=301)
    assert other_instruction.headers["x-cache"] == "miss" and other_length.headers["x-cache"] == "miss"
    assert len(gemini.generate_calls()) == 3
    # The same store under another of its names shares the cached answer (keyed on the resolved name).
    by_full_name = search(client, store=HVAC_STORE, systemInstruction="Be brief.", maxOutputTokens=300)
    assert by_full_name.headers["x-cache"] == "hit"


def test_cache_ttl_zero_bypasses_the_cache(client: TestClient, gemini: FakeGemini) -> None:
    assert search(client, cacheTTLms=0).headers["x-cache"] == "bypass"
    assert search(client, cacheTTLms=0).headers["x-cache"] == "bypass"
    assert len(gemini.generate_calls()) == 2


def test_unknown_store_is_a_404_naming_the_store(client: TestClient, gemini: FakeGemini) -> None:
    response = search(client, store="no-such-kb")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "store_not_found"
    assert error["details"] == {"store": "fileSearchStores/no-such-kb"}
    assert "fileSearchStores/no-such-kb" in error["message"]


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_key_is_a_502_that_never_shows_the_key(
    client: TestClient, gemini: FakeGemini, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    warm_resolution(client, gemini)
    gemini.fail_next(1, status, f"API key {GEMINI_KEY} is not allowed")
    with caplog.at_level(logging.DEBUG):
        response = search(client)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_auth_rejected"
    assert "rejected the API key" in error["message"]
    assert GEMINI_KEY not in response.text and GEMINI_KEY not in caplog.text
    assert len(gemini.generate_calls()) == 1  # not retried


def test_invalid_key_answered_as_400_is_also_a_rejected_key(client: TestClient, gemini: FakeGemini) -> None:
    warm_resolution(client, gemini)
    gemini.script(gemini.invalid_key_reply())
    response = search(client)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_auth_rejected"


def test_other_400_is_a_422_with_geminis_reason(client: TestClient, gemini: FakeGemini) -> None:
    warm_resolution(client, gemini)
    gemini.fail_next(1, 400, "Invalid metadata filter: unexpected token '=='")
    response = search(client, metadataFilter="source_type == s3")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert "Invalid metadata filter" in error["message"]
    assert len(gemini.generate_calls()) == 1


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_failures_are_retried_then_a_503_with_retry_after(
    client: TestClient, gemini: FakeGemini, status: int
) -> None:
    warm_resolution(client, gemini)
    gemini.fail_always(status, "try later")
    response = search(client)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "upstream_unavailable"
    assert response.headers["retry-after"] == "5"
    assert len(gemini.generate_calls()) == 3


def test_geminis_retry_after_is_passed_on(client: TestClient, gemini: FakeGemini) -> None:
    warm_resolution(client, gemini)
    busy = gemini.error_reply(429, "quota")
    gemini.script(*[Reply(busy.status, busy.body, {"Retry-After": "17"})] * 3)
    response = search(client)
    assert response.status_code == 503 and response.headers["retry-after"] == "17"


def test_a_transient_failure_followed_by_success_is_answered(client: TestClient, gemini: FakeGemini) -> None:
    warm_resolution(client, gemini)
    gemini.fail_next(1, 429, "quota")
    gemini.fail_next(1, 500, "oops")
    response = search(client)
    assert response.status_code == 200
    assert len(response.json()["sources"]) == 3
    assert len(gemini.generate_calls()) == 3


def test_request_validation(client: TestClient, gemini: FakeGemini) -> None:
    missing_store = client.post(SEARCH, json={"query": QUESTION})
    assert missing_store.status_code == 422
    assert missing_store.json()["error"]["details"]["errors"][0]["field"] == "store"
    assert search(client, maxOutputTokens=0).status_code == 422
    assert search(client, topK=0).status_code == 422
    assert search(client, unknownOption=1).status_code == 422
    assert gemini.requests == []


# Retrieve on a Gemini store.


def retrieve(client: TestClient, **fields: Any) -> Any:
    return client.post(RETRIEVE, json={"query": QUESTION, "grade": 0.0, "store": HVAC_STORE, **fields})


def test_retrieve_on_a_file_search_store_returns_the_chunks_in_the_retrieve_shape(
    client: TestClient, gemini: FakeGemini
) -> None:
    response = retrieve(client, similarityTopK=8, metadataFilter={"source_type": "s3", "year": 2024})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["engineUsed"] == "gemini-file-search" and body["store"] == HVAC_STORE
    assert body["totalResults"] == 3 and body["pipeline"]["candidatesConsidered"] == 3
    assert [r["score"] for r in body["results"]] == [0.91, 0.88, None]
    top = body["results"][0]
    assert top["id"] == f"{HVAC_MANUAL}#0"
    assert top["content"] == "If the unit short-cycles, inspect the filter."
    assert top["metadata"]["documentId"] == HVAC_MANUAL and top["metadata"]["pageNumber"] == 13
    sent = gemini.generate_calls()[0].json()["tools"][0]["fileSearch"]
    assert (sent.get("top_k") or sent.get("topK")) == 8
    assert (sent.get("metadata_filter") or sent.get("metadataFilter")) == 'source_type = "s3" AND year = 2024'


def test_retrieve_on_gemini_shows_chunks_of_the_same_text_once_unless_asked(
    client: TestClient, gemini: FakeGemini
) -> None:
    """File Search keeps no content hash: a chunk whose text a better-ranked one has is a copy."""
    chunks = FILE_SEARCH_GROUNDING["groundingChunks"]
    copy = {
        "retrievedContext": {**chunks[2]["retrievedContext"], "documentName": f"{HVAC_STORE}/documents/copy"}
    }
    gemini.groundings[HVAC_STORE] = {**FILE_SEARCH_GROUNDING, "groundingChunks": [*chunks, copy]}
    collapsed = retrieve(client, cacheTTLms=0).json()["results"]
    assert [r["metadata"]["documentId"] for r in collapsed] == [HVAC_MANUAL, HVAC_MANUAL, HVAC_ESCALATION]
    every = retrieve(client, cacheTTLms=0, collapseDuplicates=False).json()["results"]
    assert [r["metadata"]["documentId"] for r in every][2:] == [
        HVAC_ESCALATION,
        f"{HVAC_STORE}/documents/copy",
    ]


def test_retrieve_sends_a_filter_tree_in_gemini_syntax_and_refuses_what_gemini_cannot_express(
    client: TestClient, gemini: FakeGemini
) -> None:
    tree = {
        "andAll": [
            {"equals": {"key": "source_type", "value": "s3"}},
            {"in": {"key": "year", "value": [2023, 2024]}},
        ]
    }
    assert retrieve(client, metadataFilter=tree).status_code == 200
    sent = gemini.generate_calls()[0].json()["tools"][0]["fileSearch"]
    assert (sent.get("metadata_filter") or sent.get("metadataFilter")) == (
        '(source_type = "s3") AND (year = 2023 OR year = 2024)'
    )
    gemini.reset()
    refused = retrieve(
        client,
        metadataFilter={"orAll": [tree, {"startsWith": {"key": "title", "value": "HVAC"}}]},
        cacheTTLms=0,
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "validation_error"
    assert error["message"].startswith("metadataFilter: startsWith is not supported for Gemini File Search")
    assert gemini.generate_calls() == []


def test_retrieve_grade_drops_unscored_chunks_and_those_below_it(client: TestClient) -> None:
    body = retrieve(client, grade=0.9).json()
    assert [r["score"] for r in body["results"]] == [0.91]
    assert body["pipeline"]["candidatesConsidered"] == 3


def test_retrieve_backend_gemini_resolves_a_display_name(client: TestClient, gemini: FakeGemini) -> None:
    body = retrieve(client, store=HVAC_DISPLAY, backend="gemini").json()
    assert body["store"] == HVAC_STORE and body["totalResults"] == 3


@pytest.mark.parametrize(
    ("option", "field"),
    [
        ({"docIds": ["a"]}, "docIds"),
        ({"useHybrid": True}, "useHybrid"),
        ({"searchMode": "hybrid"}, "searchMode"),
        ({"rerank": {"strategy": "mmr"}}, "rerank"),
        # Accepted before and ignored: the same Gemini call and the same answer with or without them.
        ({"rerank": {"enabled": False, "topK": 1}}, "rerank.topK"),
        ({"engineName": "naive"}, "engineName"),
        ({"engineName": "default"}, "engineName"),
        ({"search": {"efSearch": 400}}, "search"),
        ({"fusion": "weighted"}, "fusion"),
        ({"mmrLambda": 0.1}, "mmrLambda"),
    ],
)
def test_retrieve_on_gemini_refuses_what_gemini_cannot_do(
    client: TestClient, gemini: FakeGemini, option: dict[str, object], field: str
) -> None:
    response = retrieve(client, **option)
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"][0]["field"] == field
    assert gemini.generate_calls() == []


def test_retrieve_on_gemini_refuses_keyword_mode_naming_why(client: TestClient, gemini: FakeGemini) -> None:
    response = client.post(RETRIEVE, json={"query": QUESTION, "store": HVAC_STORE, "searchMode": "keyword"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["details"]["errors"][0]["field"] == "searchMode"
    assert (
        error["message"]
        == "searchMode: not supported for Gemini File Search stores; Gemini runs its own retrieval"
    )
    assert gemini.generate_calls() == []


def test_retrieve_without_backend_still_searches_pgvector(client: TestClient, gemini: FakeGemini) -> None:
    response = client.post(
        RETRIEVE, json={"query": "How are pods scheduled?", "grade": 0.2, "store": "sample"}
    )
    assert response.status_code == 200
    assert response.json()["engineUsed"] == "advanced"  # the pgvector engines, not Gemini's
    assert gemini.requests == []


def test_a_batch_item_on_a_file_search_store_is_a_422_naming_why_and_the_others_are_answered(
    client: TestClient, gemini: FakeGemini
) -> None:
    items = [
        {"query": QUESTION, "grade": 0.0, "store": HVAC_STORE},
        {"query": "How are pods scheduled?", "grade": 0.2, "store": "sample"},
    ]
    response = client.post(f"{RETRIEVE}/batch", json={"requests": items})
    assert response.status_code == 200, response.text
    refused, answered = response.json()["results"]
    assert refused["status"] == 422 and refused["error"]["code"] == "validation_error"
    assert refused["error"]["details"]["errors"][0]["field"] == "backend"
    assert refused["error"]["message"] == (
        "backend: Gemini File Search stores are not served in a batch; use /rag/retrieve"
    )
    assert answered["status"] == 200 and answered["response"]["store"] == "sample"
    assert gemini.generate_calls() == []


# Debug logging.


def test_debug_logs_follow_resolution_cache_and_calls_without_the_key(
    client: TestClient, gemini: FakeGemini, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBUG", "retrieval-service")
    with caplog.at_level(logging.DEBUG, logger="retrieval_core.backends.gemini"):
        search(client)
        search(client)
    lines = [r.getMessage() for r in caplog.records if r.name == "retrieval_core.backends.gemini"]
    text = "\n".join(lines)
    assert all(line.startswith("retrieval-service ") for line in lines)
    assert "cache miss (key store#" in text and "listing stores" in text
    assert "5 stores listed" in text and "by displayName" in text
    assert "cache hit -> fileSearchStores/hvac-kb-7f3a" in text
    assert "knowledge-search: cache miss (key search#" in text
    assert "knowledge-search: cache hit (key search#" in text
    assert "bytes in" in text and "extracted 3 sources (2 scored)" in text
    assert GEMINI_KEY not in text


def test_without_debug_no_debug_lines(
    client: TestClient, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEBUG", raising=False)
    # Captured at DEBUG, where the lines would be: at INFO they could never be seen.
    with caplog.at_level(logging.DEBUG, logger="retrieval_core"):
        assert search(client).status_code == 200
    assert not [r for r in caplog.records if r.getMessage().startswith("retrieval-service ")]


def test_retrieve_on_gemini_with_return_formatted_cites_gemini_documents_and_pages(
    client: TestClient,
) -> None:
    response = retrieve(client, returnFormatted=True, maxContextTokens=40)
    assert response.status_code == 200, response.text
    body = response.json()
    top = body["results"][0]
    assert (
        top["formattedContent"]
        == "Source: hvac-manual.pdf, page 13\nIf the unit short-cycles, inspect the filter."
    )
    assert body["context"].startswith("[1] " + top["formattedContent"])
    assert 0 < body["contextTokens"] <= 40 and body["contextTokenizer"] == "all-MiniLM-L6-v2"
    # The same Gemini answer, cached, serves the request without returnFormatted in its plain shape.
    plain = retrieve(client)
    assert plain.headers["X-Cache"] == "hit" and "context" not in plain.json()
