"""A store's own pipeline over HTTP: its chunking, shown, applied to every write, fixed once it holds chunks,
and the contextual strategy's headers in what is embedded and keyword-indexed but not in what is returned."""

from __future__ import annotations

import base64
import typing
from typing import Any

from fastapi.testclient import TestClient

from retrieval_core.documents.chunking import CHUNKING_STRATEGIES
from retrieval_core.schemas.documents import ChunkingStrategy
from retrieval_core.settings import get_settings
from tests.writing import doc_url

STORES = "/api/v1/stores"
RETRIEVE = "/api/v1/rag/retrieve"
LONG_TEXT = " ".join(f"Sentence number {i} says something about badges and visitors." for i in range(60))
GUIDE = (
    "# Operations guide\n\n## Orchestrator\n\n### Restoring\n\n"
    "Stop the writers first. Then load the nightly snapshot and start the writers again.\n\n"
    "## Credentials\n\n### Rotating\n\nCreate the new key, deploy it, then revoke the old one.\n"
)


def test_the_strategies_the_api_takes_are_the_chunkers() -> None:
    assert typing.get_args(ChunkingStrategy) == CHUNKING_STRATEGIES


def test_a_store_shows_the_deployments_chunking_until_it_has_its_own(client: TestClient, store: str) -> None:
    settings = get_settings()
    pipeline = client.get(f"{STORES}/{store}").json()["pipeline"]
    assert pipeline["chunking"] == {
        "strategy": "fixed",
        "size": settings.chunk_size,
        "overlap": settings.chunk_overlap,
        "own": False,
    }
    assert pipeline["embedder"]["dimension"] == 384 and pipeline["embedder"]["model"]


def test_a_stores_own_chunking_cuts_every_document_and_is_fixed_once_it_holds_chunks(
    client: TestClient, store: str
) -> None:
    chunking = {"strategy": "fixed", "size": 300, "overlap": 50}
    answer = client.put(f"{STORES}/{store}", json={"pipeline": {"chunking": chunking}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["pipeline"]["chunking"] == {**chunking, "own": True}
    assert client.put(doc_url(store, "long"), json={"text": LONG_TEXT}).status_code == 201
    chunks = client.get(f"{STORES}/{store}/chunks", params={"documentId": "long"}).json()["chunks"]
    assert len(chunks) > 10 and max(len(c["content"]) for c in chunks) <= 300
    # The same text again is unchanged: nothing re-embedded under the store's own chunking.
    assert client.put(doc_url(store, "long"), json={"text": LONG_TEXT}).json()["status"] == "unchanged"

    changed = client.put(f"{STORES}/{store}", json={"pipeline": {"chunking": {**chunking, "size": 500}}})
    assert changed.status_code == 409, changed.text
    error = changed.json()["error"]
    assert error["details"]["field"] == "pipeline.chunking" and "create a new store" in error["message"]
    # The same chunking again, or none named, changes nothing.
    assert client.put(f"{STORES}/{store}", json={"pipeline": {"chunking": chunking}}).status_code == 200
    kept = client.put(f"{STORES}/{store}", json={"displayName": "Kept"}).json()["pipeline"]["chunking"]
    assert kept == {**chunking, "own": True}


def test_a_store_that_follows_the_deployment_may_take_that_chunking_as_its_own(
    client: TestClient, store: str
) -> None:
    assert client.put(doc_url(store, "long"), json={"text": LONG_TEXT}).status_code == 201
    settings = get_settings()
    same = {"strategy": "fixed", "size": settings.chunk_size, "overlap": settings.chunk_overlap}
    pinned = client.put(f"{STORES}/{store}", json={"pipeline": {"chunking": same}})
    assert pinned.status_code == 200 and pinned.json()["pipeline"]["chunking"] == {**same, "own": True}
    assert client.put(doc_url(store, "long"), json={"text": LONG_TEXT}).json()["status"] == "unchanged"
    other = {**same, "strategy": "contextual"}
    assert client.put(f"{STORES}/{store}", json={"pipeline": {"chunking": other}}).status_code == 409


def test_chunking_is_checked_before_anything_is_created(client: TestClient) -> None:
    for chunking, field in (
        ({"size": 50}, "size"),
        ({"size": 400, "overlap": 300}, "overlap"),
        ({"strategy": "semantic"}, "strategy"),
    ):
        answer = client.put(f"{STORES}/never-made", json={"pipeline": {"chunking": chunking}})
        assert answer.status_code == 422, answer.text
        assert field in answer.text
    assert client.get(f"{STORES}/never-made").status_code == 404


def keyword_hits(client: TestClient, store: str, strategy: str) -> list[dict[str, Any]]:
    """The keyword results for "orchestrator" once the guide is written to `store` with `strategy`."""
    client.put(f"{STORES}/{store}", json={"pipeline": {"chunking": {"strategy": strategy}}})
    body = {"content": base64.b64encode(GUIDE.encode()).decode(), "fileName": "guide.md"}
    assert client.put(doc_url(store, "guide.md"), json=body).status_code == 201
    query = {"query": "orchestrator", "store": store, "searchMode": "keyword", "engineName": "naive"}
    results: list[dict[str, Any]] = client.post(RETRIEVE, json=query).json()["results"]
    return results


def test_contextual_chunks_are_found_by_their_section_and_returned_as_written(
    client: TestClient, store: str
) -> None:
    # "orchestrator" is only in the section path: neither the title nor the chunk's text holds it.
    found = keyword_hits(client, store, "contextual")
    assert [r["metadata"]["section"] for r in found] == ["Operations guide > Orchestrator > Restoring"]
    assert "Stop the writers first." in found[0]["content"]
    assert "orchestrator" not in found[0]["content"].lower()


def test_the_fixed_strategy_does_not_index_the_section(client: TestClient, store: str) -> None:
    assert keyword_hits(client, store, "fixed") == []


def test_an_attached_store_takes_no_pipeline(client: TestClient, attachable_table: str) -> None:
    answer = client.put(
        f"{STORES}/attached-with-pipeline",
        json={"source": {"table": attachable_table}, "pipeline": {"chunking": {"size": 500}}},
    )
    assert answer.status_code == 422 and "pipeline" in answer.text


def test_a_result_expanded_with_its_neighbours_holds_them_once_and_names_its_span(
    client: TestClient, store: str
) -> None:
    client.put(f"{STORES}/{store}", json={"pipeline": {"chunking": {"size": 300, "overlap": 50}}})
    assert client.put(doc_url(store, "long"), json={"text": LONG_TEXT}).status_code == 201
    query = {"query": "Sentence number 30 says", "store": store, "grade": 0.0, "similarityTopK": 3}
    plain = client.post(RETRIEVE, json={**query, "engineName": "naive"}).json()["results"]
    answer = client.post(RETRIEVE, json={**query, "engineName": "naive", "expand": {"before": 1, "after": 1}})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    first, matched = results[0], plain[0]
    span = first["expanded"]
    index = matched["metadata"]["chunkIndex"]
    assert (span["firstChunk"], span["lastChunk"]) == (max(0, index - 1), index + 1)
    assert first["content"][span["matchStart"] : span["matchEnd"]] == matched["content"]
    assert len(first["content"]) > len(matched["content"]) and first["content"] in LONG_TEXT
    # No chunk is returned twice: a result inside an earlier one's window is left out.
    spans = [range(r["expanded"]["firstChunk"], r["expanded"]["lastChunk"] + 1) for r in results]
    assert all(r["metadata"]["chunkIndex"] not in s for i, r in enumerate(results) for s in spans[:i])
    assert "expanded" not in plain[0]


def test_expand_is_refused_where_no_neighbours_are_known(client: TestClient, attachable_table: str) -> None:
    name = "attached-expand"
    columns = {"id": "id", "content": "body", "embedding": "embedding"}
    attached = client.put(
        f"{STORES}/{name}", json={"source": {"table": attachable_table, "columns": columns}}
    )
    assert attached.status_code == 201, attached.text
    answer = client.post(RETRIEVE, json={"query": "x", "store": name, "grade": 0.0, "expand": {"before": 1}})
    client.delete(f"{STORES}/{name}")
    assert answer.status_code == 422 and "expand" in answer.text, answer.text
