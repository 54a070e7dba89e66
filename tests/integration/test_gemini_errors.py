"""Gemini paths: unconfigured is a 501, a 400 is blamed on the caller only when it is about what
the caller sent, and ALLOWED_METADATA_KEYS holds there too. Real google-genai client, fake Gemini API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fakes.gemini import FakeGemini
from tests.integration.knowledge_support import HVAC_DISPLAY, HVAC_STORE, knowledge_client

SEARCH = "/api/v1/knowledge/search"
RETRIEVE = "/api/v1/rag/retrieve"
QUESTION = "Why is the room cold?"


def warm_resolution(client: TestClient, gemini: FakeGemini) -> None:
    assert client.get("/api/v1/stores/resolve", params={"name": HVAC_DISPLAY, "backend": "gemini"}).is_success
    gemini.reset()


@pytest.fixture()
def unconfigured(gemini: FakeGemini, sample_store: Any) -> Iterator[TestClient]:
    """The full app with no Gemini API key (nor secret) configured."""
    from retrieval_core.container import reset_knowledge_service
    from retrieval_core.settings import get_settings

    with knowledge_client(gemini) as client, pytest.MonkeyPatch.context() as mp:
        mp.delenv("GEMINI_API_KEY", raising=False)
        mp.delenv("GEMINI_API_KEY_SECRET_ARN", raising=False)
        get_settings.cache_clear()
        reset_knowledge_service()
        yield client
    get_settings.cache_clear()
    reset_knowledge_service()


@pytest.mark.parametrize(
    ("method", "path", "body", "params"),
    [
        ("post", SEARCH, {"query": QUESTION, "store": HVAC_DISPLAY}, None),
        ("post", RETRIEVE, {"query": QUESTION, "grade": 0, "store": HVAC_DISPLAY, "backend": "gemini"}, None),
        ("post", RETRIEVE, {"query": QUESTION, "grade": 0, "store": HVAC_STORE}, None),
        ("get", "/api/v1/stores/resolve", None, {"name": HVAC_DISPLAY, "backend": "gemini"}),
    ],
    ids=["knowledge-search", "retrieve-backend-gemini", "retrieve-fileSearchStores", "resolve"],
)
def test_gemini_unconfigured_is_a_501(
    unconfigured: TestClient,
    gemini: FakeGemini,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    params: dict[str, str] | None,
) -> None:
    response = unconfigured.request(method, path, json=body, params=params)
    assert response.status_code == 501, response.text
    error = response.json()["error"]
    assert error["code"] == "backend_not_configured"
    assert "GEMINI_API_KEY" in error["message"]
    assert gemini.requests == []
    # pgvector stores are still served.
    sample = unconfigured.post(RETRIEVE, json={"query": QUESTION, "grade": 0, "store": "sample"})
    assert sample.status_code == 200


@pytest.fixture()
def client(gemini: FakeGemini, sample_store: Any) -> Iterator[TestClient]:
    with knowledge_client(gemini) as test_client:
        yield test_client


def test_a_400_about_the_callers_filter_is_a_422_naming_it(client: TestClient, gemini: FakeGemini) -> None:
    warm_resolution(client, gemini)
    gemini.fail_next(1, 400, "Invalid metadata filter: unexpected token '=='")
    response = client.post(
        SEARCH, json={"query": QUESTION, "store": HVAC_DISPLAY, "metadataFilter": "a == b"}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert [e["field"] for e in error["details"]["errors"]] == ["metadataFilter"]
    assert "Invalid metadata filter" in error["message"]


@pytest.mark.parametrize("with_filter", [False, True], ids=["no-filter", "filter-not-blamed"])
def test_a_400_about_our_request_is_a_502(client: TestClient, gemini: FakeGemini, with_filter: bool) -> None:
    warm_resolution(client, gemini)
    gemini.fail_next(1, 400, "Request contains an invalid argument: tools[0] is malformed.")
    extra = {"metadataFilter": 'source_type = "s3"'} if with_filter else {}
    response = client.post(SEARCH, json={"query": QUESTION, "store": HVAC_DISPLAY, **extra})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_error" and "invalid argument" in error["message"]
    assert len(gemini.generate_calls()) == 1  # not retried


@pytest.fixture()
def allow_listed(gemini: FakeGemini, sample_store: Any) -> Iterator[TestClient]:
    with knowledge_client(gemini, ALLOWED_METADATA_KEYS="year") as test_client:
        yield test_client


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        (SEARCH, {"store": HVAC_DISPLAY, "metadataFilter": 'source_type = "s3"'}, "metadata_key_not_allowed"),
        (SEARCH, {"store": HVAC_DISPLAY, "metadataFilter": "year >= 2023 OR ("}, "invalid_metadata_filter"),
        (
            RETRIEVE,
            {"store": HVAC_STORE, "grade": 0, "metadataFilter": {"source_type": "s3"}},
            "metadata_key_not_allowed",
        ),
        (
            RETRIEVE,
            {
                "store": HVAC_DISPLAY,
                "backend": "gemini",
                "grade": 0,
                "metadataFilter": 'NOT source_type = "s3"',
            },
            "metadata_key_not_allowed",
        ),
    ],
    ids=["search-key", "search-unreadable", "retrieve-equalities", "retrieve-expression"],
)
def test_the_allow_list_holds_on_gemini_paths(
    allow_listed: TestClient, gemini: FakeGemini, path: str, body: dict[str, Any], code: str
) -> None:
    response = allow_listed.post(path, json={"query": QUESTION, **body})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code
    assert gemini.generate_calls() == []
    allowed = allow_listed.post(
        SEARCH, json={"query": QUESTION, "store": HVAC_DISPLAY, "metadataFilter": "year >= 2023"}
    )
    assert allowed.status_code == 200, allowed.text


def test_a_hanging_gemini_is_our_504_within_the_request_deadline(
    gemini: FakeGemini, sample_store: Any
) -> None:
    # HTTP_TIMEOUT_S 30 s x 3 attempts would outlast any function timeout; the deadline (2 s here, 25 s
    # by default) cuts the attempt and leaves no time for another.
    with knowledge_client(gemini, REQUEST_DEADLINE_S="2", HTTP_TIMEOUT_S="30") as client:
        warm_resolution(client, gemini)
        gemini.generate_delay_s = 30
        started = time.monotonic()
        response = client.post(SEARCH, json={"query": QUESTION, "store": HVAC_DISPLAY})
        elapsed_s = time.monotonic() - started
    assert response.status_code == 504, response.text
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert 1.8 < elapsed_s < 3.0
    assert len(gemini.generate_calls()) == 1
