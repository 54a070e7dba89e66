"""POST /api/v1/rag/answer on a Gemini File Search store: Gemini's answer in the answer shape, its
grounding supports as citations over code points, through the real google-genai client and a fake."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from retrieval_core.backends.gemini.file_search_answer import FILE_SEARCH_RULES
from tests.fakes.gemini import FakeGemini
from tests.integration.knowledge_support import (
    FILE_SEARCH_GROUNDING,
    HVAC_MANUAL,
    HVAC_STORE,
)

ANSWER = "/api/v1/rag/answer"
# Non-ASCII, so that Gemini's byte offsets and our code points differ.
QUESTION = "Où régler le thermostat ?"
TEXT = f"Answer to: {QUESTION}"


def grounding_for_text() -> dict[str, Any]:
    """The stock grounding, its supports cutting the fake's answer text at UTF-8 byte offsets."""
    grounding = copy.deepcopy(FILE_SEARCH_GROUNDING)
    encoded = TEXT.encode("utf-8")
    split = encoded.index("régler".encode())
    grounding["groundingSupports"] = [
        {
            "segment": {"startIndex": 0, "endIndex": split - 1, "text": "Answer to: Où"},
            "groundingChunkIndices": [0, 1],
            "confidenceScores": [0.62, 0.91],
        },
        {
            "segment": {"startIndex": split, "endIndex": len(encoded), "text": "régler le thermostat ?"},
            "groundingChunkIndices": [0, 7],  # 7 names no chunk: dropped and counted
            "confidenceScores": [0.88, 0.5],
        },
    ]
    return grounding


def ask(client: TestClient, **fields: Any) -> Any:
    body = {"query": QUESTION, "grade": 0.0, "store": HVAC_STORE, "cacheTTLms": 0, **fields}
    return client.post(ANSWER, json=body)


def test_a_file_search_answer_cites_by_code_points_and_names_its_sources(
    gemini_client: TestClient, gemini: FakeGemini
) -> None:
    gemini.groundings[HVAC_STORE] = grounding_for_text()
    response = ask(gemini_client, systemInstruction="Answer in French.", maxOutputTokens=300)
    assert response.status_code == 200, response.text
    body = response.json()

    assert body["text"] == TEXT and body["grounded"] is True
    first, second = body["citations"]
    assert body["text"][first["start"] : first["end"]] == "Answer to: Où" == first["text"]
    assert body["text"][second["start"] : second["end"]] == "régler le thermostat ?"
    assert first["sources"] == [1, 2] and second["sources"] == [1]
    assert first["documentIds"] == [HVAC_MANUAL]
    assert first["chunkIds"] == [body["sources"][0]["id"], body["sources"][1]["id"]]
    assert body["pipeline"]["droppedCitations"] == 1
    assert body["pipeline"]["backend"] == "gemini" and body["pipeline"]["modelCalled"] is True
    assert len(body["sources"]) == 3
    assert (
        body["groundingMetadata"]["groundingSupports"] == gemini.groundings[HVAC_STORE]["groundingSupports"]
    )

    (call,) = gemini.generate_calls()
    sent = call.json()
    system = "".join(part["text"] for part in sent["systemInstruction"]["parts"])
    # The grounding rules first, the application's instruction after them.
    assert system.startswith(FILE_SEARCH_RULES) and system.endswith("Answer in French.")
    assert sent["generationConfig"]["maxOutputTokens"] == 300


def test_without_grounding_supports_a_file_search_answer_is_not_grounded(
    gemini_client: TestClient, gemini: FakeGemini
) -> None:
    grounding = copy.deepcopy(FILE_SEARCH_GROUNDING)
    grounding["groundingSupports"] = []
    gemini.groundings[HVAC_STORE] = grounding
    body = ask(gemini_client).json()
    assert body["grounded"] is False and body["citations"] == []
    assert body["pipeline"]["ungroundedReason"] == "no_grounding_supports"


def test_options_gemini_would_ignore_are_refused(gemini_client: TestClient) -> None:
    hybrid = ask(gemini_client, useHybrid=True)
    assert hybrid.status_code == 422
    assert hybrid.json()["error"]["details"]["errors"][0]["field"] == "useHybrid"
    budget = ask(gemini_client, maxContextTokens=500)
    assert budget.status_code == 422
    assert budget.json()["error"]["details"]["errors"][0]["field"] == "maxContextTokens"


def test_a_file_search_answer_streams_as_one_piece_then_its_citations(
    gemini_client: TestClient, gemini: FakeGemini
) -> None:
    gemini.groundings[HVAC_STORE] = grounding_for_text()
    response = gemini_client.post(
        ANSWER,
        json={"query": QUESTION, "grade": 0.0, "store": HVAC_STORE},
        headers={"Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    names = [line.split(": ", 1)[1] for line in response.text.splitlines() if line.startswith("event: ")]
    assert names == ["delta", "citation", "citation", "done"]
