"""One resolution rule for store names: every path takes a store's name before its
display name, and no creator may make one name designate two stores."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.container import get_document_service
from retrieval_core.db import stores as store_sql
from retrieval_core.documents.models import SourceInput, StoreDefinition
from retrieval_core.exceptions import ConflictError


def unique(prefix: str = "names") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_resolve_and_retrieve_answer_the_same_store_when_names_clash(
    client: TestClient, service: Any
) -> None:
    # A clash left by data written before the rule: store B shows store A's name as its display name.
    named, shadow = unique(), unique()
    assert client.put(f"/api/v1/stores/{named}", json={}).status_code == 201
    assert client.put(f"/api/v1/stores/{shadow}", json={}).status_code == 201
    with service.database.connection() as conn:
        conn.execute("UPDATE stores SET display_name = %s WHERE name = %s", (named, shadow))

    resolved = client.get("/api/v1/stores/resolve", params={"name": named, "backend": "pgvector"})
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["name"] == named and resolved.json()["resolvedBy"] == "name"
    retrieved = client.post("/api/v1/rag/retrieve", json={"query": "anything", "store": named, "grade": 0})
    assert retrieved.status_code == 200, retrieved.text
    assert retrieved.json()["store"] == named


def test_a_document_write_cannot_create_a_store_whose_display_name_is_another_stores_name(
    client: TestClient,
) -> None:
    existing = unique()
    assert (
        client.put(f"/api/v1/stores/{existing}", json={"displayName": f"{existing} title"}).status_code == 201
    )
    documents = get_document_service()
    source = SourceInput("a.txt", b"some text", "text/plain")
    for taken in (existing, f"{existing} title"):
        with pytest.raises(ConflictError) as refused:
            documents.write_source(unique(), source, create=StoreDefinition(display_name=taken))
        assert refused.value.details == {"field": "displayName"}
        assert taken in refused.value.message


def test_no_creator_may_take_another_stores_display_name_as_a_name(client: TestClient, service: Any) -> None:
    existing, title = unique(), unique("title")
    assert client.put(f"/api/v1/stores/{existing}", json={"displayName": title}).status_code == 201

    response = client.put(f"/api/v1/stores/{title}", json={})
    assert response.status_code == 409
    assert response.json()["error"]["details"] == {"field": "name"}
    with pytest.raises(ConflictError) as refused:
        get_document_service().ensure_store(title)  # S3 sync and the CLI create stores this way
    assert refused.value.details == {"field": "name"} and title in refused.value.message
    # The name still designates the store that shows it, and no second store was made.
    assert service.get_store(title).name == existing
    listed = client.get("/api/v1/stores", params={"prefix": title}).json()
    assert listed == {"stores": [], "nextCursor": None}


def test_create_store_refuses_a_clash_whoever_calls_it(service: Any) -> None:
    existing = unique()
    embedder = service.embedder
    with service.database.connection() as conn:
        store_sql.create_store(conn, existing, "Clash title", embedder.model, embedder.dimension)
        for name, display in ((unique(), existing), (unique(), "Clash title"), ("Clash title", "x")):
            with pytest.raises(ConflictError):
                store_sql.create_store(conn, name, display, embedder.model, embedder.dimension)
        # The same name again is the existing store, whatever display name was asked for.
        again = store_sql.create_store(conn, existing, "other title", embedder.model, embedder.dimension)
        assert again.display_name == "Clash title"


def test_two_concurrent_creators_cannot_make_one_name_designate_two_stores(service: Any) -> None:
    # One creator shows "title" as a display name while the other creates a store named "title".
    import threading

    embedder = service.embedder
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def create(name: str, display: str) -> None:
        with service.database.connection() as conn:
            barrier.wait()
            try:
                store_sql.create_store(conn, name, display, embedder.model, embedder.dimension)
                outcomes.append("created")
            except ConflictError:
                outcomes.append("conflict")

    for _ in range(5):
        title = unique("contested")
        outcomes.clear()
        threads = [
            threading.Thread(target=create, args=(unique(), title)),
            threading.Thread(target=create, args=(title, "its own title " + title)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["conflict", "created"]
        with service.database.connection() as conn:
            rows = conn.execute(
                "SELECT count(*) FROM stores WHERE name = %s OR display_name = %s", (title, title)
            ).fetchone()
        assert rows is not None and rows[0] == 1
