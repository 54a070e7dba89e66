"""Store definitions over HTTP: PUT/GET/DELETE /api/v1/stores/{store}, GET /api/v1/stores, and their rules."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.api.app import create_app
from retrieval_core.container import get_document_service
from retrieval_core.documents.models import StoreDefinition
from retrieval_core.documents.service import DocumentService
from retrieval_core.exceptions import ConflictError

STORES = "/api/v1/stores"


def unique(prefix: str = "def") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def error_of(response: Any) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


def test_put_creates_then_the_same_definition_is_a_no_op(client: TestClient, service: Any) -> None:
    name = unique()
    body = {"displayName": "Handbook ü", "storage": "halfvec", "allowedMetadataKeys": ["team", "year"]}
    created = client.put(f"{STORES}/{name}", json=body)
    assert created.status_code == 201, created.text
    assert created.json() == {
        "name": name,
        "displayName": "Handbook ü",
        "storage": "halfvec",
        "embeddingModel": service.embedder.model,
        "dimension": service.embedder.dimension,
        "allowedMetadataKeys": ["team", "year"],
        "textSearch": "english",
        "documentCount": 0,
        "chunkCount": 0,
        "pipeline": {
            "embedder": {"model": service.embedder.model, "dimension": service.embedder.dimension},
            "chunking": {"strategy": "fixed", "size": 1000, "overlap": 150, "own": False},
        },
    }
    version = service.get_store(name).version
    again = client.put(f"{STORES}/{name}", json=body)
    assert again.status_code == 200 and again.json() == created.json()
    assert service.get_store(name).version == version  # nothing changed, nothing invalidated

    changed = client.put(f"{STORES}/{name}", json={**body, "allowedMetadataKeys": ["team"]})
    assert changed.status_code == 200 and changed.json()["allowedMetadataKeys"] == ["team"]
    assert service.get_store(name).version > version  # cached answers depended on the allow-list

    renamed = client.put(f"{STORES}/{name}", json={**body, "displayName": "Staff handbook"})
    assert renamed.json()["displayName"] == "Staff handbook"
    assert client.get(f"{STORES}/{name}").json()["displayName"] == "Staff handbook"


def test_storage_cannot_change(client: TestClient) -> None:
    name = unique()
    client.put(f"{STORES}/{name}", json={"storage": "vector"})
    response = client.put(f"{STORES}/{name}", json={"storage": "halfvec"})
    assert response.status_code == 409
    assert error_of(response)["code"] == "conflict" and error_of(response)["details"]["field"] == "storage"


def test_display_name_never_takes_another_stores_name_or_display_name(client: TestClient) -> None:
    first, second = unique(), unique()
    client.put(f"{STORES}/{first}", json={"displayName": "Shared title"})
    client.put(f"{STORES}/{second}", json={})
    for taken in ("Shared title", first):
        response = client.put(f"{STORES}/{second}", json={"displayName": taken})
        assert response.status_code == 409 and error_of(response)["details"]["field"] == "displayName"
    assert client.put(f"{STORES}/{unique()}", json={"displayName": "Shared title"}).status_code == 409


def test_two_concurrent_puts_cannot_both_take_a_display_name(service: Any) -> None:
    from retrieval_core.settings import get_settings

    settings = get_settings()
    docs = DocumentService(service, settings.chunk_size, settings.chunk_overlap)
    title = f"Contested {uuid.uuid4().hex[:6]}"
    names = [unique(), unique(), unique(), unique()]
    barrier = threading.Barrier(len(names))
    outcomes: list[str] = []

    def put(name: str) -> None:
        barrier.wait()
        try:
            docs.put_store(name, StoreDefinition(display_name=title))
            outcomes.append("won")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=put, args=(n,)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["conflict"] * 3 + ["won"]


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [
        ("bad name!", {}, "store"),
        ("-leading-dash", {}, "store"),
        ("x" * 129, {}, "store"),
        ("ok-name", {"storage": "float8"}, "storage"),
        ("ok-name", {"dimension": 3}, "dimension"),
        ("ok-name", {"displayName": ""}, "displayName"),
    ],
)
def test_invalid_definitions_are_422_naming_the_field(
    client: TestClient, name: str, body: dict[str, Any], field: str
) -> None:
    response = client.put(f"{STORES}/{name}", json=body)
    assert response.status_code == 422, response.text
    assert error_of(response)["details"]["errors"][0]["field"] == field


def test_resolve_is_reserved_and_stays_the_resolve_route(client: TestClient, service: Any) -> None:
    response = client.put(f"{STORES}/resolve", json={})
    assert response.status_code == 422 and "reserved" in error_of(response)["message"]
    resolved = client.get(f"{STORES}/resolve", params={"name": "sample", "backend": "pgvector"})
    assert resolved.status_code == 200 and resolved.json()["backend"] == "pgvector"


def test_get_list_and_delete(client: TestClient, service: Any) -> None:
    name = unique()
    client.put(f"{STORES}/{name}", json={})
    client.put(f"{STORES}/{name}/documents/a", json={"text": "One document about parking."})
    info = client.get(f"{STORES}/{name}").json()
    assert (info["documentCount"], info["chunkCount"]) == (1, 1)
    assert client.get(STORES, params={"prefix": name}).json() == {"stores": [info], "nextCursor": None}
    assert "sample" in {s["name"] for s in client.get(STORES, params={"prefix": "sample"}).json()["stores"]}

    assert client.delete(f"{STORES}/{name}").status_code == 204
    gone = client.get(f"{STORES}/{name}")
    assert gone.status_code == 404 and error_of(gone)["code"] == "store_not_found"
    assert client.delete(f"{STORES}/{name}").status_code == 404
    with service.database.connection() as conn:
        orphans = conn.execute(
            "SELECT count(*) FROM documents WHERE id = 'a' AND store_id NOT IN (SELECT id FROM stores)"
        )
        assert orphans.fetchone()[0] == 0


@pytest.fixture()
def read_only_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """API_KEY_HASHES configured: its keys are read-only keys on every store."""
    from retrieval_core.settings import get_settings

    key = "test-read-only-key"
    monkeypatch.setenv("API_KEY_HASHES", hashlib.sha256(key.encode()).hexdigest())
    get_settings.cache_clear()
    yield key
    monkeypatch.undo()
    get_settings.cache_clear()


def test_scopes_come_before_anything_else(sample_store: Any, read_only_key: str) -> None:
    with TestClient(create_app()) as client:
        headers = {"x-api-key": read_only_key}
        assert client.get(STORES, headers=headers).status_code == 200
        for response in (
            client.put(f"{STORES}/{unique()}", json={}, headers=headers),
            client.delete(f"{STORES}/sample", headers=headers),
            client.put(f"{STORES}/sample/documents/x", json={"text": "x"}, headers=headers),
            client.delete(f"{STORES}/sample/documents/x", headers=headers),
        ):
            assert response.status_code == 403, response.text
            assert error_of(response)["code"] == "forbidden"
        assert client.get(f"{STORES}/sample", headers=headers).status_code == 200
        assert client.put(f"{STORES}/{unique()}", json={}).status_code == 401


def test_the_document_service_dependency_is_the_runtime_one(sample_store: Any) -> None:
    assert isinstance(get_document_service(), DocumentService)
