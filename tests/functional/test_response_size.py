"""The retrieve Lambda handler answers 413 `response_too_large` instead of a response Lambda would refuse.

On the real embedded PostgreSQL: a store of 100 chunks of 70,000 characters, so that 100 results are
about 7 MB and 50 about 3.5 MB.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tests.conftest import EVENTS_DIR
from tests.functional.test_handlers import FakeLambdaContext, load_handler_module
from tests.opening_embedder import OpeningEmbedder

STORE = "huge-chunks"
CHUNK_CHARS = 70_000
WORDS = ["basalt", "estuary", "lantern", "meridian", "orchard", "quarry", "tundra", "viaduct"]


@pytest.fixture(scope="module")
def huge_store(sample_store: Any, service: Any) -> str:
    from tests.writing import TextDocument, ensure_store, write_documents

    rng = random.Random(7)

    def text(index: int) -> str:
        words = [f"Survey {index} of lakes and rivers."]
        words += [rng.choice(WORDS) for _ in range(CHUNK_CHARS // 7)]
        return " ".join(words)[:CHUNK_CHARS]

    # Embedded from each text's opening words: this test measures answers, not their order.
    embedder = OpeningEmbedder(service.embedder)
    store = ensure_store(service, STORE, embedder)
    documents = [TextDocument(id=f"survey-{i:03}", text=text(i)) for i in range(100)]
    write_documents(service, store, documents, CHUNK_CHARS + 100, 0, embedder)
    return STORE


def retrieve_event(top_k: int) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS_DIR / "retrieve.json").read_text())
    body = {"query": "lakes and rivers", "grade": 0.0, "engineName": "naive", "store": STORE}
    event["body"] = json.dumps({**body, "similarityTopK": top_k})
    event["headers"] = {**event["headers"], "content-length": str(len(event["body"]))}
    return event


def test_an_answer_over_lambdas_6_mb_is_a_413_naming_its_size(huge_store: str) -> None:
    handler = load_handler_module("retrieve").handler
    context = FakeLambdaContext(function_name="retrieve")
    fits = handler(retrieve_event(50), context)
    assert fits["statusCode"] == 200 and json.loads(fits["body"])["totalResults"] == 50
    assert 3_000_000 < len(json.dumps(fits)) <= 6_000_000

    refused = handler(retrieve_event(100), context)
    assert refused["statusCode"] == 413
    error = json.loads(refused["body"])["error"]
    assert error["code"] == "response_too_large"
    assert error["message"].endswith(
        "ask for fewer results (similarityTopK, rerank.topK, topK) or leave out returnFormatted"
    )
    assert error["details"]["maxBytes"] == 6_000_000 < error["details"]["sizeBytes"]
    # Both requests carry API Gateway's request id, and the 413 still echoes it.
    assert refused["headers"]["x-request-id"] == fits["headers"]["x-request-id"] != ""
