"""RetrievalClient against a live service: each operation as a user calls it, and the errors they meet."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from retrieval_client import (
    BackendNotConfiguredError,
    DocumentNotFoundError,
    ForbiddenError,
    RetrievalApiError,
    RetrievalClient,
    StoreNotFoundError,
    UnauthorizedError,
)
from retrieval_client.models import EvaluationMethod, EvaluationQuery, Judgment

ODD_ID = "policies/a b#c?d%e ü"


def test_health_and_healthy(client: RetrievalClient) -> None:
    report = client.health()
    assert report["status"] == "ok"
    assert client.healthy() is True


def test_a_store_is_created_listed_across_pages_and_deleted(client: RetrievalClient, store: str) -> None:
    assert client.get_store(store)["documentCount"] == 0
    page = client.list_stores(limit=1)
    assert len(page["stores"]) == 1 and page["nextCursor"]
    names = [s["name"] for s in client.iter_stores(page_size=1)]
    assert store in names and "sample" in names and names == sorted(names)
    client.delete_store(store)
    with pytest.raises(StoreNotFoundError) as caught:
        client.get_store(store)
    error = caught.value
    assert error.status == 404 and error.code == "store_not_found" and error.request_id
    assert isinstance(error, RetrievalApiError)


def test_documents_with_any_id_are_written_read_listed_and_deleted(
    client: RetrievalClient, store: str, tmp_path: Path
) -> None:
    written = client.put_document(
        store, ODD_ID, text="Visitors sign in at the front desk.", metadata={"team": "facilities"}
    )
    assert written["status"] == "created" and written["documentId"] == ODD_ID
    assert (
        client.put_document(
            store, ODD_ID, text="Visitors sign in at the front desk.", metadata={"team": "facilities"}
        )["status"]
        == "unchanged"
    )
    notes = tmp_path / "travel.md"
    notes.write_text("# Travel\n\nBook flights through the travel desk at least 14 days ahead.\n")
    file_written = client.put_file(store, "policies/travel.md", notes, metadata={"team": "travel"})
    assert file_written["contentType"] == "text/markdown"
    table = tmp_path / "people.csv"
    table.write_text("id,name,role\np1,Ada,engineer\np2,Grace,admiral\n")
    records = client.put_file(store, "people.csv", table)
    assert sorted(d["documentId"] for d in records["documents"] or []) == ["p1", "p2"]

    document = client.get_document(store, ODD_ID)
    assert document["documentId"] == ODD_ID and document["metadata"]["team"] == "facilities"
    ids = [d["documentId"] for d in client.iter_documents(store, page_size=1)]
    assert ids == sorted([ODD_ID, "policies/travel.md", "p1", "p2"], key=lambda i: i.encode())
    assert [d["documentId"] for d in client.iter_documents(store, prefix="policies/")] == [
        ODD_ID,
        "policies/travel.md",
    ]

    client.delete_document(store, ODD_ID)
    with pytest.raises(DocumentNotFoundError):
        client.get_document(store, ODD_ID)
    client.delete_document(store, "people.csv")
    assert [d["documentId"] for d in client.iter_documents(store)] == ["policies/travel.md"]


GUIDE = (
    "# Guide\n\nRead this first.\n\n## Install\n\nRun the installer.\n\n"
    "## Upgrade\n\nStop the service first.\n"
)


def test_a_documents_chunks_come_in_order_with_their_sections_a_page_at_a_time(
    client: RetrievalClient, store: str, tmp_path: Path, url: str, read_key: str
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE)
    client.put_file(store, "docs/guide#1.md", guide)

    first = client.list_chunks(store, "docs/guide#1.md", limit=2)
    assert first["documentId"] == "docs/guide#1.md"
    assert [c["chunkIndex"] for c in first["chunks"]] == [0, 1] and first["nextCursor"]
    rest = client.list_chunks(store, "docs/guide#1.md", limit=2, cursor=first["nextCursor"])
    assert [c["chunkIndex"] for c in rest["chunks"]] == [2] and rest["nextCursor"] is None

    chunks = list(client.iter_chunks(store, "docs/guide#1.md", page_size=1))
    assert [(c["id"], c["section"], c["pageNumber"]) for c in chunks] == [
        ("docs/guide#1.md#0", "Guide", None),
        ("docs/guide#1.md#1", "Guide > Install", None),
        ("docs/guide#1.md#2", "Guide > Upgrade", None),
    ]
    assert chunks[1]["content"].endswith("Run the installer.")
    assert chunks[1]["metadata"]["fileName"] == "guide.md"

    with pytest.raises(DocumentNotFoundError):
        client.list_chunks(store, "docs/missing.md")
    with RetrievalClient(url, read_key) as reader:
        assert len(list(reader.iter_chunks(store, "docs/guide#1.md"))) == 3


def test_search_batch_vector_search_and_answers(client: RetrievalClient, handbook: str) -> None:
    store = handbook
    found = client.retrieve(
        query="How do I book a flight?", grade=0.0, store=store, metadataFilter={"team": "travel"}
    )
    assert [r["metadata"]["documentId"] for r in found["results"]] == ["travel"]

    batch = client.retrieve_batch(
        requests=[
            {"query": "badge", "grade": 0.0, "store": store},
            {"query": "x", "grade": 0.0, "store": "no-such-store"},
        ]
    )
    assert [item["status"] for item in batch["results"]] == [200, 404]

    unit = [1 / math.sqrt(384)] * 384
    nearest = client.similarity_search(queryEmbedding=unit, topK=2, store=store)
    assert len(nearest["results"]) == 2

    answer = client.answer(query="How far ahead must flights be booked?", grade=0.0, store=store)
    assert answer["grounded"] and answer["citations"] and "14 days" in answer["text"]

    events = list(
        client.answer_stream(
            query="How far ahead must flights be booked?", grade=0.0, store=store, cacheTTLms=0
        )
    )
    names = [e.event for e in events]
    assert names[-1] == "done" and "delta" in names and "citation" in names
    assert "".join(e.data["text"] for e in events if e.event == "delta") == events[-1].data["text"]


def test_stores_are_found_by_display_name_and_refresh_is_for_attached_tables(
    client: RetrievalClient, store: str
) -> None:
    resolved = client.resolve_store(f"Client test {store}")
    assert resolved["name"] == store and resolved["resolvedBy"] == "displayName"
    with pytest.raises(RetrievalApiError) as caught:
        client.refresh_store(store)
    assert caught.value.status == 409


def test_knowledge_search_without_gemini_names_the_missing_configuration(client: RetrievalClient) -> None:
    with pytest.raises(BackendNotConfiguredError) as caught:
        client.knowledge_search(query="anything", store="fileSearchStores/handbook")
    assert caught.value.status == 501


def test_a_missing_key_and_a_missing_scope_are_named(url: str, read_key: str) -> None:
    with RetrievalClient(url, api_key="") as anonymous, pytest.raises(UnauthorizedError) as caught:
        anonymous.list_stores()
    assert caught.value.status == 401
    with RetrievalClient(url, read_key) as reader:
        assert reader.get_store("sample")["name"] == "sample"
        with pytest.raises(ForbiddenError) as forbidden:
            reader.put_store("client-forbidden")
    assert forbidden.value.details["requiredScope"] == "admin"


def test_evaluate_scores_each_method_on_judged_queries(
    client: RetrievalClient, handbook: str, url: str, read_key: str
) -> None:
    queries: list[EvaluationQuery] = [
        {"id": "flights", "text": "How far ahead must flights be booked?"},
        {"id": "badges", "text": "What do visitors wear?"},
    ]
    judgments: list[Judgment] = [
        {"queryId": "flights", "documentId": "travel", "relevance": 1},
        {"queryId": "badges", "documentId": "visitors", "relevance": 0},
    ]
    methods: list[EvaluationMethod] = [
        {"name": "dense", "options": {"engineName": "naive"}},
        {"name": "rrf", "options": {"engineName": "naive", "useHybrid": True, "fusion": "rrf"}},
    ]
    with RetrievalClient(url, read_key) as reader:
        scored = reader.evaluate(handbook, queries, judgments, methods=methods, k=2)
    assert scored["complete"] is True and (scored["scoredQueries"], scored["skippedQueries"]) == (1, 1)
    assert [m["name"] for m in scored["methods"]] == ["dense", "rrf"]
    (flights,) = scored["queries"]
    assert (
        flights["scores"]["dense"]["topDocuments"][0] == "travel"
        and flights["scores"]["dense"]["ndcg"] == 1.0
    )

    defaults = client.evaluate(handbook, queries, judgments)
    assert defaults["k"] == 10 and [m["name"] for m in defaults["methods"]] == ["dense", "hybrid", "keyword"]

    with pytest.raises(RetrievalApiError) as refused:
        client.evaluate(
            handbook, queries, [*judgments, {"queryId": "q9", "documentId": "travel", "relevance": 1}]
        )
    assert refused.value.status == 422 and "q9" in str(refused.value)
    with pytest.raises(StoreNotFoundError):
        client.evaluate("no-such-store", queries, judgments)
