"""POST /api/v1/rag/answer on pgvector stores: sources, citations, strict grounding, caching, streaming.

The generator is scripted (tests/fakes/generator.py) so that each test says what the model writes and
counts its calls; the store, the retrieve, the cache and the HTTP app are the real ones.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.api.app import create_app
from retrieval_core.container import replace_generator
from retrieval_core.exceptions import UpstreamTimeoutError
from retrieval_core.generation.base import GenerationRequest, NativeCitation
from retrieval_core.generation.prompt import GROUNDING_RULES
from tests.fakes.generator import ScriptedGenerator

ANSWER = "/api/v1/rag/answer"
QUESTION = "How does Kubernetes decide which node runs a pod?"


@pytest.fixture()
def generator(sample_store: Any) -> Iterator[ScriptedGenerator]:
    scripted = ScriptedGenerator()
    previous = replace_generator(scripted)
    yield scripted
    replace_generator(previous)


@pytest.fixture()
def app_client(generator: ScriptedGenerator) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


def ask(client: TestClient, **body: Any) -> dict[str, Any]:
    body = {"query": QUESTION, "grade": 0.2, "cacheTTLms": 0, **body}
    response = client.post(ANSWER, json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def events_of(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_an_answer_cites_the_sources_it_was_given_by_span_chunk_and_document(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    generator.text = "The scheduler filters and scores the nodes [1]. Unrelated claim [7]."
    body = ask(app_client, systemInstruction="Answer in one short sentence.")

    assert body["text"] == "The scheduler filters and scores the nodes. Unrelated claim."
    assert body["grounded"] is True
    (citation,) = body["citations"]
    assert body["text"][citation["start"] : citation["end"]] == citation["text"]
    assert citation["text"] == "The scheduler filters and scores the nodes"
    first = body["sources"][0]
    assert citation["sources"] == [1]
    assert citation["chunkIds"] == [first["id"]]
    assert citation["documentIds"] == ["k8s-scheduling"] == [first["metadata"]["documentId"]]
    # [7] names no source the model was given: dropped, and counted.
    assert body["pipeline"]["droppedCitations"] == 1
    assert body["pipeline"]["sourcesGiven"] == len(body["sources"]) >= 1
    assert body["pipeline"]["modelCalled"] is True
    assert body["pipeline"]["provider"] == "scripted"
    assert (body["pipeline"]["inputTokens"], body["pipeline"]["outputTokens"]) == (11, 7)
    assert body["pipeline"]["retrieve"]["candidatesConsidered"] >= 1
    timings = body["pipeline"]["timingsMs"]
    assert timings["total"] >= timings["retrieve"] + timings["generate"] > 0

    (request,) = generator.requests
    # The rules come first and the application's instruction after them, never instead.
    assert request.system.startswith(GROUNDING_RULES)
    assert request.system.endswith("Answer in one short sentence.")
    assert request.prompt.startswith("Sources:\n\n[1] Source: Kubernetes pod scheduling")
    assert request.prompt.endswith(f"Question: {QUESTION}")
    assert len(request.sources) == body["pipeline"]["sourcesGiven"]
    for source, given in zip(body["sources"], request.sources, strict=True):
        assert "formattedContent" not in source
        assert given.endswith(source["content"])


def test_nothing_above_the_threshold_is_an_empty_ungrounded_answer_without_a_model_call(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    body = ask(app_client, grade=0.99)

    assert generator.requests == []
    assert body["text"] == ""
    assert body["grounded"] is False
    assert body["citations"] == body["sources"] == []
    assert body["pipeline"]["ungroundedReason"] == "nothing_above_threshold"
    assert body["pipeline"]["modelCalled"] is False


def test_min_fused_score_is_the_threshold_of_a_hybrid_answer(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    body = ask(app_client, grade=0.0, useHybrid=True, minFusedScore=1.0, query="zzzz unrelated words")
    assert generator.requests == []
    assert body["pipeline"]["ungroundedReason"] == "nothing_above_threshold"


def test_an_answer_that_cites_nothing_is_not_grounded(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    generator.text = "The sources do not say."
    body = ask(app_client)
    assert body["text"] == "The sources do not say."
    assert body["grounded"] is False
    assert body["pipeline"]["ungroundedReason"] == "no_citations"


def test_native_citations_are_checked_like_markers(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    generator.text = "Nodes are scored. Pods wait."
    generator.native = [NativeCitation(0, 17, (1,)), NativeCitation(18, 28, (42,))]
    body = ask(app_client)
    assert [(c["start"], c["end"], c["sources"]) for c in body["citations"]] == [(0, 17, [1])]
    assert body["pipeline"]["droppedCitations"] == 1


def test_max_context_tokens_bounds_the_sources_given(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    generator.text = "Scored [1]."
    wide = ask(app_client, similarityTopK=10, rerank={"enabled": False, "topK": 5})
    narrow = ask(app_client, similarityTopK=10, rerank={"enabled": False, "topK": 5}, maxContextTokens=90)
    assert 1 <= narrow["pipeline"]["sourcesGiven"] < wide["pipeline"]["sourcesGiven"]
    assert len(generator.requests[-1].sources) == narrow["pipeline"]["sourcesGiven"]


def test_a_model_the_service_does_not_allow_is_refused_before_anything_runs(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    response = app_client.post(ANSWER, json={"query": QUESTION, "grade": 0.2, "model": "gpt-9"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["details"]["errors"][0]["field"] == "model"
    assert "GENERATION_MODELS_ALLOWED" in error["message"]
    assert generator.requests == []


def test_return_formatted_is_refused_and_max_context_tokens_needs_no_formatting(
    app_client: TestClient,
) -> None:
    response = app_client.post(ANSWER, json={"query": QUESTION, "grade": 0.2, "returnFormatted": True})
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"][0]["field"] == "returnFormatted"


def test_answers_are_cached_until_a_write_to_their_store(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    store = f"answers-{uuid.uuid4().hex[:8]}"
    assert app_client.put(f"/api/v1/stores/{store}", json={}).status_code in (200, 201)
    put = app_client.put(f"/api/v1/stores/{store}/documents/badges", json={"text": "Badges last one year."})
    assert put.status_code in (200, 201), put.text
    generator.text = "One year [1]."
    body = {"query": "How long do badges last?", "grade": 0.0, "store": store}

    first = app_client.post(ANSWER, json=body)
    second = app_client.post(ANSWER, json=body)
    assert (first.headers["X-Cache"], second.headers["X-Cache"]) == ("miss", "hit")
    assert second.json() == first.json()
    assert len(generator.requests) == 1

    # Another generation option is another answer.
    other = app_client.post(ANSWER, json={**body, "maxOutputTokens": 100})
    assert other.headers["X-Cache"] == "miss"

    app_client.put(f"/api/v1/stores/{store}/documents/badges", json={"text": "Badges last two years."})
    generator.text = "Two years [1]."
    after = app_client.post(ANSWER, json=body)
    assert after.headers["X-Cache"] == "miss"
    assert after.json()["text"] == "Two years."
    assert after.json()["sources"][0]["content"] == "Badges last two years."


def test_an_answer_streams_its_text_then_its_citations_then_the_whole_answer(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    generator.text = "The scheduler scores nodes [1]. Then it binds the pod [1][2]."
    response = app_client.post(
        ANSWER,
        json={"query": QUESTION, "grade": 0.2, "cacheTTLms": 0},
        headers={"Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response.text)
    names = [name for name, _ in events]
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert len(deltas) > 1
    assert names == ["delta"] * len(deltas) + ["citation", "citation", "done"]
    done = events[-1][1]
    # The pieces are the final text: markers never reach the client, even split across pieces.
    assert "".join(deltas) == done["text"] == "The scheduler scores nodes. Then it binds the pod."
    assert [data for name, data in events if name == "citation"] == done["citations"]


def test_in_lambda_the_same_request_gets_json(
    app_client: TestClient, generator: ScriptedGenerator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "RetrieveFunction")
    generator.text = "Scored [1]."
    response = app_client.post(
        ANSWER,
        json={"query": QUESTION, "grade": 0.2, "cacheTTLms": 0},
        headers={"Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["text"] == "Scored."


def test_a_generator_time_out_is_a_504_and_after_the_first_piece_an_error_event(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    generator.text = "The scheduler scores the nodes that fit [1]."
    generator.failure = UpstreamTimeoutError("scripted: no answer within GENERATION_TIMEOUT_S")
    body = {"query": QUESTION, "grade": 0.2, "cacheTTLms": 0}

    plain = app_client.post(ANSWER, json=body)
    assert plain.status_code == 504
    assert plain.json()["error"]["code"] == "upstream_timeout"

    before_any = app_client.post(ANSWER, json=body, headers={"Accept": "text/event-stream"})
    assert before_any.status_code == 504

    generator.fail_after_pieces = 2
    streamed = app_client.post(ANSWER, json=body, headers={"Accept": "text/event-stream"})
    assert streamed.status_code == 200
    events = events_of(streamed.text)
    assert [name for name, _ in events] == ["delta", "delta", "error"]
    assert events[-1][1]["error"]["code"] == "upstream_timeout"


def test_each_source_is_numbered_as_the_prompt_numbers_it(
    app_client: TestClient, generator: ScriptedGenerator
) -> None:
    def cite_the_last(request: GenerationRequest) -> str:
        return f"The last source [{len(request.sources)}]."

    generator.answer = cite_the_last
    body = ask(app_client, similarityTopK=5, rerank={"enabled": False, "topK": 3})
    (citation,) = body["citations"]
    assert citation["sources"] == [len(body["sources"])]
    assert citation["chunkIds"] == [body["sources"][-1]["id"]]


@pytest.fixture()
def faq_table(postgres_dsn: str, service: Any) -> Iterator[str]:
    """A team's own table of answers and their embeddings (the local model's), that a store attaches."""
    import psycopg

    from retrieval_core.embeddings import get_embedder

    rows = {
        "q-badges": "Visitor badges are collected at the front desk and returned on leaving.",
        "q-parking": "Guests park on level two of the garage and register their plate at reception.",
    }
    vectors = get_embedder().embed(list(rows.values()), "document")
    table = f"public.answer_faq_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, body text NOT NULL, embedding vector(384))")
        for (row_id, body), vector in zip(rows.items(), vectors, strict=True):
            conn.execute(
                f"INSERT INTO {table} VALUES (%s, %s, %s::vector)", (row_id, body, str(list(vector)))
            )
    yield table
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def test_an_attached_table_answers_in_the_same_shape_citing_its_own_row_ids(
    app_client: TestClient, generator: ScriptedGenerator, faq_table: str
) -> None:
    store = f"faq-{uuid.uuid4().hex[:8]}"
    columns = {"id": "id", "content": "body", "embedding": "embedding"}
    attached = app_client.put(
        f"/api/v1/stores/{store}", json={"source": {"table": faq_table, "columns": columns}}
    )
    assert attached.status_code in (200, 201), attached.text
    generator.text = "Badges go back to the front desk [1]."

    body = ask(app_client, query="Where do visitors return their badges?", store=store, grade=0.3)

    assert body["grounded"] is True and body["store"] == store
    assert body["sources"][0]["id"] == "q-badges"
    (citation,) = body["citations"]
    assert citation["chunkIds"] == ["q-badges"] and citation["documentIds"] == ["q-badges"]
    assert body["pipeline"]["backend"] == "pgvector" and body["pipeline"]["retrieve"] is not None
