"""Scoped API keys through the real app, database, cache and fake Gemini.

Keys come from API_KEYS. A key without the read scope gets 403 on every read route; a store outside a
key's grant is answered exactly as an unknown store (404), before any cached answer could be served.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fakes.gemini import FakeGemini
from tests.integration.knowledge_support import HVAC_DISPLAY, HVAC_STORE, knowledge_client
from tests.integration.test_search_cache import make_harness
from tests.servers import MotoServer
from tests.writing import TextDocument, ensure_store, write_documents

RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"
SEARCH = "/api/v1/chunks/similarity-search"
RESOLVE = "/api/v1/stores/resolve"
KNOWLEDGE = "/api/v1/knowledge/search"
OTHER = "grants-other"
OTHER_DISPLAY = "Grants Other"
MISSING = "grants-xyzzy"  # as long as OTHER: the 404 bodies differ only in the name, not in length

FULL = "rk_full_" + "f0" * 16
SAMPLE_ONLY = "rk_samp_" + "5a" * 16
OTHER_ONLY = "rk_othr_" + "07" * 16
WRITER = "rk_wrtr_" + "3e" * 16
GEMINI_READER = "rk_gemi_" + "9c" * 16


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


API_KEYS = [
    {"name": "full", "sha256": digest(FULL), "stores": ["*"], "scopes": ["read"]},
    {"name": "sample-reader", "sha256": digest(SAMPLE_ONLY), "stores": ["sample"], "scopes": ["read"]},
    {"name": "other-reader", "sha256": digest(OTHER_ONLY), "stores": [OTHER], "scopes": ["read"]},
    {"name": "uploader", "sha256": digest(WRITER), "stores": ["*"], "scopes": ["write", "admin"]},
    {"name": "kb-reader", "sha256": digest(GEMINI_READER), "stores": [HVAC_STORE], "scopes": ["read"]},
]
VECTOR = [0.05] * 384


def as_key(key: str) -> dict[str, str]:
    return {"x-api-key": key}


@pytest.fixture(scope="module")
def other_store(service: Any) -> Any:
    """A second pgvector store, with a display name, beside `sample`."""
    store = ensure_store(service, OTHER, display_name=OTHER_DISPLAY)
    documents = [
        TextDocument(id="g-1", text="Quarterly budget review for the grants team.", metadata={"team": "a"}),
        TextDocument(
            id="g-2", text="Espresso machine descaling schedule.", metadata={"team": "b", "year": 2024}
        ),
    ]
    write_documents(service, store, documents, 1000, 0)
    return service.get_store(OTHER)


@pytest.fixture()
def keys(monkeypatch: pytest.MonkeyPatch, other_store: Any, sample_store: Any) -> Iterator[None]:
    """API_KEYS holds the test's keys for one test."""
    from retrieval_core.settings import get_settings

    monkeypatch.setenv("API_KEYS", json.dumps(API_KEYS))
    get_settings.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()


def read_requests(client: TestClient, key: str, store: str | None) -> dict[str, Any]:
    where = {"store": store} if store is not None else {}
    headers = as_key(key)
    return {
        "retrieve": client.post(RETRIEVE, json={"query": "budget", "grade": 0.0, **where}, headers=headers),
        "search": client.post(SEARCH, json={"queryEmbedding": VECTOR, **where}, headers=headers),
        "resolve": client.get(RESOLVE, params={"name": store or "sample"}, headers=headers),
    }


def test_read_routes_need_the_read_scope(client: TestClient, keys: None) -> None:
    refused = read_requests(client, WRITER, OTHER)
    refused["batch"] = client.post(
        BATCH, json={"requests": [{"query": "q", "grade": 0.0}]}, headers=as_key(WRITER)
    )
    for route, response in refused.items():
        assert response.status_code == 403, route
        assert response.json() == {
            "error": {
                "code": "forbidden",
                "message": "this credential lacks the 'read' scope needed here",
                "details": {"requiredScope": "read"},
            }
        }
    for route, response in read_requests(client, FULL, OTHER).items():
        assert response.status_code == 200, (route, response.text)


def test_a_store_outside_the_grant_is_answered_exactly_as_an_unknown_store(
    client: TestClient, keys: None
) -> None:
    outside = read_requests(client, SAMPLE_ONLY, OTHER)
    unknown = read_requests(client, SAMPLE_ONLY, MISSING)
    for route in outside:
        assert outside[route].status_code == unknown[route].status_code == 404, route
        assert outside[route].content == unknown[route].content.replace(MISSING.encode(), OTHER.encode())
        # x-request-id differs between any two requests (minted per request), and says nothing of stores.
        same_headers = [
            {k: v for k, v in r.headers.items() if k != "x-request-id"}
            for r in (outside[route], unknown[route])
        ]
        assert same_headers[0] == same_headers[1]
    assert outside["retrieve"].json()["error"] == {
        "code": "store_not_found",
        "message": f"store '{OTHER}' not found",
        "details": {"store": OTHER},
    }
    # By display name too: the store is matched after resolution, and the 404 names it as written.
    by_display = client.post(
        RETRIEVE, json={"query": "q", "grade": 0.0, "store": OTHER_DISPLAY}, headers=as_key(SAMPLE_ONLY)
    )
    assert by_display.status_code == 404 and by_display.json()["error"]["details"] == {"store": OTHER_DISPLAY}
    resolved = client.get(RESOLVE, params={"name": OTHER_DISPLAY}, headers=as_key(SAMPLE_ONLY))
    assert resolved.status_code == 404 and resolved.json()["error"]["details"] == {"store": OTHER_DISPLAY}
    # Uncached (cacheTTLms 0), the search itself refuses the store.
    for path, extra in ((RETRIEVE, {"query": "budget", "grade": 0.0}), (SEARCH, {"queryEmbedding": VECTOR})):
        uncached = client.post(
            path, json={**extra, "store": OTHER, "cacheTTLms": 0}, headers=as_key(SAMPLE_ONLY)
        )
        assert uncached.status_code == 404 and uncached.json()["error"]["details"] == {"store": OTHER}
    # The key's own store answers.
    for route, response in read_requests(client, SAMPLE_ONLY, "sample").items():
        assert response.status_code == 200, route
    assert (
        client.get(RESOLVE, params={"name": OTHER_DISPLAY}, headers=as_key(OTHER_ONLY)).json()["name"]
        == OTHER
    )


def test_the_default_store_is_checked_too(client: TestClient, keys: None) -> None:
    for route, response in read_requests(client, OTHER_ONLY, None).items():
        if route != "resolve":
            assert response.status_code == 404, route
            assert response.json()["error"]["details"] == {"store": "sample"}
    ok = client.post(
        RETRIEVE, json={"query": "budget", "grade": 0.0, "store": OTHER}, headers=as_key(OTHER_ONLY)
    )
    assert ok.status_code == 200 and ok.json()["store"] == OTHER


def test_batch_items_are_checked_one_by_one(client: TestClient, keys: None) -> None:
    body = {
        "requests": [
            {"query": "scheduler", "grade": 0.0, "store": "sample"},
            {"query": "budget", "grade": 0.0, "store": OTHER},
            {"query": "budget", "grade": 0.0, "store": MISSING},
            {"query": "budget", "grade": 0.0},
        ]
    }
    items = client.post(BATCH, json=body, headers=as_key(SAMPLE_ONLY)).json()["results"]
    assert [item["status"] for item in items] == [200, 404, 404, 200]
    assert items[1]["error"] == {
        "code": "store_not_found",
        "message": f"store '{OTHER}' not found",
        "details": {"store": OTHER},
    }
    assert items[2]["error"]["details"] == {"store": MISSING}
    full = client.post(BATCH, json=body, headers=as_key(FULL)).json()["results"]
    assert [item["status"] for item in full] == [200, 200, 404, 200]


@pytest.mark.parametrize("path", [RETRIEVE, SEARCH])
def test_a_cached_answer_is_not_served_to_a_key_without_the_store(
    moto: MotoServer, service: Any, keys: None, path: str
) -> None:
    # DynamoDB, shared: a hit reads the store's row (its version) and the answer item, nothing else.
    harness = make_harness(moto, service)
    body: dict[str, Any] = {"store": OTHER, "grade": 0.0, "query": "budget"}
    if path == SEARCH:
        body = {"store": OTHER, "queryEmbedding": VECTOR}
    warm = [harness.client.post(path, json=body, headers=as_key(FULL)) for _ in range(2)]
    assert [r.headers["X-Cache"] for r in warm] == ["miss", "hit"]
    checkouts = harness.database.checkouts
    for key in (SAMPLE_ONLY, WRITER):
        refused = harness.client.post(path, json=body, headers=as_key(key))
        assert refused.status_code in (403, 404) and "X-Cache" not in refused.headers
        assert "results" not in refused.text
    # The key without the read scope is refused before anything is read; the key without the store
    # after reading the store's row only.
    assert harness.database.checkouts == checkouts + 1
    by_display = harness.client.post(path, json={**body, "store": OTHER_DISPLAY}, headers=as_key(SAMPLE_ONLY))
    assert by_display.status_code == 404
    again = harness.client.post(path, json=body, headers=as_key(OTHER_ONLY))
    assert again.headers["X-Cache"] == "hit" and again.json() == warm[0].json()


@pytest.fixture()
def store_keys(service: Any, other_store: Any) -> Iterator[Any]:
    """Set OTHER's own allowedMetadataKeys in SQL (bumping its version, as the write side does)."""

    def apply(keys: list[str] | None) -> None:
        with service.database.connection() as conn:
            conn.execute(
                "UPDATE stores SET allowed_metadata_keys = %s, version = version + 1 WHERE name = %s",
                (keys, OTHER),
            )

    yield apply
    apply(None)


def test_a_store_allows_only_its_own_metadata_keys(client: TestClient, keys: None, store_keys: Any) -> None:
    def search(metadata_filter: Any, store: str = OTHER) -> Any:
        body = {"queryEmbedding": VECTOR, "store": store, "metadataFilter": metadata_filter}
        return client.post(SEARCH, json=body, headers=as_key(FULL))

    assert search({"year": 2024}).status_code == 200  # warm the cache under no restriction
    store_keys(["team"])
    for refused in (search({"year": 2024}), search("year = 2024"), search("team = 'a' OR year > 1")):
        assert refused.status_code == 422
        assert refused.json()["error"] == {
            "code": "metadata_key_not_allowed",
            "message": "metadataFilter: key 'year' is not allowed; allowed keys: team",
            "details": {"field": "metadataFilter", "key": "year", "allowedKeys": ["team"]},
        }
    allowed = search({"team": "a"})
    assert allowed.status_code == 200 and [r["id"] for r in allowed.json()["results"]] == ["g-1#0"]
    assert search({"year": 2024}, store="sample").status_code == 200  # another store's list is its own
    retrieve = client.post(
        RETRIEVE,
        json={"query": "budget", "grade": 0.0, "store": OTHER, "metadataFilter": {"year": 2024}},
        headers=as_key(FULL),
    )
    assert retrieve.status_code == 422 and retrieve.json()["error"]["code"] == "metadata_key_not_allowed"
    # A key without the store learns nothing about its list: 404 first.
    assert search({"year": 2024}).status_code == 422
    outside = client.post(
        SEARCH,
        json={"queryEmbedding": VECTOR, "store": OTHER, "metadataFilter": {"year": 1}},
        headers=as_key(SAMPLE_ONLY),
    )
    assert outside.status_code == 404


def test_the_store_list_meets_the_global_one(
    own_runtime: Any, sample_store: Any, other_store: Any, store_keys: Any
) -> None:
    from retrieval_core.api.app import create_app

    own_runtime(ALLOWED_METADATA_KEYS="team,year")
    store_keys(["team", "region"])
    with TestClient(create_app()) as client:
        response = client.post(
            SEARCH, json={"queryEmbedding": VECTOR, "store": OTHER, "metadataFilter": {"year": 2024}}
        )
        region = client.post(
            SEARCH, json={"queryEmbedding": VECTOR, "store": OTHER, "metadataFilter": {"region": "x"}}
        )
    assert response.json()["error"]["details"]["allowedKeys"] == ["team"]  # allowed by both lists
    assert region.json()["error"]["details"]["allowedKeys"] == ["team", "year"]  # refused globally first


# Gemini File Search stores: grants name them by their full fileSearchStores/... name.


@pytest.fixture()
def gemini_keys(gemini: FakeGemini, sample_store: Any, keys: None) -> Iterator[TestClient]:
    with knowledge_client(gemini) as client:
        yield client


def test_gemini_stores_are_granted_by_full_name(gemini_keys: TestClient, gemini: FakeGemini) -> None:
    client = gemini_keys
    search = {"query": "cold room?", "store": HVAC_DISPLAY}
    retrieve = {"query": "cold room?", "grade": 0.0, "store": HVAC_DISPLAY, "backend": "gemini"}
    resolve = {"name": HVAC_DISPLAY, "backend": "gemini"}
    for key in (GEMINI_READER, FULL):
        assert client.post(KNOWLEDGE, json=search, headers=as_key(key)).status_code == 200
        assert client.post(RETRIEVE, json=retrieve, headers=as_key(key)).status_code == 200
        assert client.get(RESOLVE, params=resolve, headers=as_key(key)).json()["name"] == HVAC_STORE
    assert client.post(KNOWLEDGE, json=search, headers=as_key(FULL)).headers["X-Cache"] == "hit"
    gemini.reset()
    expected = {
        "code": "store_not_found",
        "message": f"store '{HVAC_DISPLAY}' not found",
        "details": {"store": HVAC_DISPLAY},
    }
    for response in (
        client.post(KNOWLEDGE, json=search, headers=as_key(SAMPLE_ONLY)),
        client.post(RETRIEVE, json=retrieve, headers=as_key(SAMPLE_ONLY)),
        client.get(RESOLVE, params=resolve, headers=as_key(SAMPLE_ONLY)),
    ):
        assert response.status_code == 404 and response.json()["error"] == expected
        assert "X-Cache" not in response.headers
    assert gemini.generate_calls() == []  # neither Gemini nor the cached answer was asked
    # A name the listing does not hold resolves by fallback; outside the grant, that is a 404 too.
    for key, status in ((SAMPLE_ONLY, 404), (GEMINI_READER, 404), (FULL, 200)):
        assert (
            client.get(
                RESOLVE, params={"name": "not-listed", "backend": "gemini"}, headers=as_key(key)
            ).status_code
            == status
        )
    refused = client.post(KNOWLEDGE, json=search, headers=as_key(WRITER))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"


def test_the_global_allow_list_applies_to_gemini_filters(gemini: FakeGemini, sample_store: Any) -> None:
    with knowledge_client(gemini, ALLOWED_METADATA_KEYS="source_type") as client:

        def search(metadata_filter: str) -> Any:
            return client.post(
                KNOWLEDGE, json={"query": "q", "store": HVAC_STORE, "metadataFilter": metadata_filter}
            )

        def retrieve(metadata_filter: Any) -> Any:
            body = {
                "query": "q",
                "grade": 0.0,
                "store": HVAC_STORE,
                "backend": "gemini",
                "metadataFilter": metadata_filter,
            }
            return client.post(RETRIEVE, json=body)

        assert search('source_type = "s3"').status_code == 200
        assert retrieve({"source_type": "s3"}).status_code == 200
        gemini.reset()
        for refused in (
            search('source_type = "s3" AND year > 2020'),
            retrieve({"year": 2024}),
            retrieve("year = 2024"),
            retrieve(
                {"andAll": [{"equals": {"key": "source_type", "value": "s3"}}, {"exists": {"key": "year"}}]}
            ),
        ):
            assert refused.status_code == 422
            assert refused.json()["error"]["details"] == {
                "field": "metadataFilter",
                "key": "year",
                "allowedKeys": ["source_type"],
            }
        # With an allow-list, a filter whose keys cannot be read is refused rather than passed on unchecked.
        assert search('source_type : "s3"').status_code == 422
        assert gemini.generate_calls() == []
