"""GET /api/v1/stores/resolve: the five steps over Gemini's paginated store list (real google-genai
client, fake Gemini API) and over our pgvector stores table."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fakes.gemini import FakeGemini
from tests.fakes.http import Reply
from tests.integration.knowledge_support import (  # noqa: F401 (gemini, gemini_client: fixtures)
    GEMINI_KEY,
    HVAC_DISPLAY,
    HVAC_STORE,
    knowledge_client,
    knowledge_env,
    stock_fake,
)
from tests.servers import MotoServer, create_cache_table

RESOLVE = "/api/v1/stores/resolve"


@pytest.fixture()
def client(gemini_client: TestClient) -> TestClient:
    return gemini_client


def resolve(client: TestClient, name: str, backend: str | None = "gemini") -> Any:
    params = {"name": name} if backend is None else {"name": name, "backend": backend}
    return client.get(RESOLVE, params=params)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (HVAC_DISPLAY, {"name": HVAC_STORE, "displayName": HVAC_DISPLAY, "resolvedBy": "displayName"}),
        (HVAC_STORE, {"name": HVAC_STORE, "displayName": HVAC_DISPLAY, "resolvedBy": "name"}),
        ("hvac-kb-7f3a", {"name": HVAC_STORE, "displayName": HVAC_DISPLAY, "resolvedBy": "pattern"}),
        ("hr-03", {"name": "fileSearchStores/hr-03", "displayName": None, "resolvedBy": "pattern"}),
        (
            "not-listed",
            {"name": "fileSearchStores/not-listed", "displayName": None, "resolvedBy": "fallback"},
        ),
    ],
    ids=["display-name", "full-name", "short-name", "no-display-name", "fallback"],
)
def test_each_form_resolves_after_listing_every_page(
    client: TestClient, gemini: FakeGemini, name: str, expected: dict[str, Any]
) -> None:
    response = resolve(client, name)
    assert response.status_code == 200, response.text
    assert response.json() == {**expected, "backend": "gemini"}
    # Five stores at two per page: three list calls, following nextPageToken.
    calls = gemini.list_calls()
    assert [c.query.get("pageToken", [""])[0] for c in calls] == ["", "2", "4"]
    assert all(c.headers["x-goog-api-key"] == GEMINI_KEY for c in calls)


def test_second_resolution_comes_from_the_cache(client: TestClient, gemini: FakeGemini) -> None:
    assert resolve(client, "hvac-kb-7f3a").json()["resolvedBy"] == "pattern"
    gemini.reset()
    cached = resolve(client, "hvac-kb-7f3a").json()
    assert cached == {
        "name": HVAC_STORE,
        "displayName": HVAC_DISPLAY,
        "resolvedBy": "cache",
        "backend": "gemini",
    }
    assert gemini.requests == []


def test_a_fallback_is_not_cached_so_a_store_created_later_is_found(
    client: TestClient, gemini: FakeGemini
) -> None:
    assert resolve(client, "Later KB").json()["resolvedBy"] == "fallback"
    gemini.add_store("later-9", "Later KB")
    again = resolve(client, "Later KB").json()
    assert again["name"] == "fileSearchStores/later-9" and again["resolvedBy"] == "displayName"


def test_display_name_wins_over_a_short_name(client: TestClient, gemini: FakeGemini) -> None:
    # The order: step 2 (display name) before step 4 (fileSearchStores/{name}).
    gemini.add_store("shadow-1", "hvac-kb-7f3a")
    assert resolve(client, "hvac-kb-7f3a").json()["name"] == "fileSearchStores/shadow-1"


def test_backend_defaults_by_the_name_prefix(client: TestClient) -> None:
    assert resolve(client, HVAC_STORE, backend=None).json()["backend"] == "gemini"
    assert resolve(client, "sample", backend=None).json()["backend"] == "pgvector"


def test_pgvector_stores_resolve_by_name_and_display_name_through_the_cache(
    client: TestClient, gemini: FakeGemini, sample_store: Any
) -> None:
    by_name = resolve(client, "sample", backend="pgvector").json()
    assert by_name == {
        "name": "sample",
        "displayName": sample_store.display_name,
        "resolvedBy": "name",
        "backend": "pgvector",
    }
    by_display = resolve(client, sample_store.display_name, backend="pgvector").json()
    assert by_display["name"] == "sample" and by_display["resolvedBy"] == "displayName"
    assert resolve(client, "sample", backend="pgvector").json()["resolvedBy"] == "cache"
    missing = resolve(client, "no-such-store", backend="pgvector")
    assert missing.status_code == 404
    assert missing.json()["error"]["details"] == {"store": "no-such-store"}
    assert gemini.requests == []


def test_missing_name_is_a_422(client: TestClient) -> None:
    response = client.get(RESOLVE, params={"backend": "gemini"})
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"][0]["field"] == "name"


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_key_while_listing_is_a_502(client: TestClient, gemini: FakeGemini, status: int) -> None:
    gemini.fail_next(1, status, f"key {GEMINI_KEY} denied")
    response = resolve(client, HVAC_DISPLAY)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_auth_rejected"
    assert GEMINI_KEY not in response.text


def test_wrong_key_is_rejected_by_the_fake_itself(gemini: FakeGemini, sample_store: Any) -> None:
    with knowledge_client(gemini, GEMINI_API_KEY="gm-wrong-key") as client:
        response = resolve(client, HVAC_DISPLAY)
    assert response.status_code == 502
    assert "gm-wrong-key" not in response.text


def test_listing_retries_a_transient_failure_mid_pagination(client: TestClient, gemini: FakeGemini) -> None:
    first_page = Reply(200, {"fileSearchStores": gemini.stores[:2], "nextPageToken": "2"})
    gemini.script(first_page, gemini.error_reply(500, "boom"))
    response = resolve(client, HVAC_DISPLAY)
    assert response.status_code == 200 and response.json()["resolvedBy"] == "displayName"
    # Page 1, page 2 failing, then the whole listing again (3 pages).
    assert [c.query.get("pageToken", [""])[0] for c in gemini.list_calls()] == ["", "2", "", "2", "4"]


def test_listing_that_stays_rate_limited_is_a_503_with_retry_after(
    client: TestClient, gemini: FakeGemini
) -> None:
    gemini.fail_always(429, "quota")
    response = resolve(client, HVAC_DISPLAY)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert len(gemini.list_calls()) == 3


def test_listing_404_is_an_upstream_error_not_a_missing_store(client: TestClient, gemini: FakeGemini) -> None:
    gemini.fail_next(1, 404, "Method not found.")
    response = resolve(client, HVAC_DISPLAY)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_error"


def test_resolutions_are_shared_through_dynamodb_by_every_instance(
    gemini: FakeGemini, moto: MotoServer, aws_env: None, sample_store: Any
) -> None:
    from retrieval_core.api.app import create_app
    from retrieval_core.api.routers import stores

    table = f"cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), table)
    env = {"CACHE_TABLE_NAME": table, "DYNAMODB_ENDPOINT_URL": moto.endpoint_url}
    params = {"name": HVAC_DISPLAY, "backend": "gemini"}
    with knowledge_env(gemini, **env):
        first = TestClient(create_app(stores.router)).get(RESOLVE, params=params)
    assert first.json()["resolvedBy"] == "displayName"
    # Another instance: a new service and an empty process cache, the same table.
    gemini.reset()
    with knowledge_env(gemini, **env):
        second = TestClient(create_app(stores.router)).get(RESOLVE, params=params)
    assert second.json() == {
        "name": HVAC_STORE,
        "displayName": HVAC_DISPLAY,
        "resolvedBy": "cache",
        "backend": "gemini",
    }
    assert gemini.requests == []
