"""/docs and /redoc work offline, and stay public when API keys are configured.

A browser opening /docs cannot send `x-api-key`, and a machine without internet access cannot reach a
CDN: the pages, every asset they load and the OpenAPI document come from the app, without a key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

pytest.importorskip("fastapi_offline", reason="the `local` extra's fastapi-offline serves the docs assets")

KEY = "rk_live_" + "d0" * 20
# Every URL a page loads: src/href attributes, Swagger UI's `url:` and ReDoc's `spec-url`.
LOADED = re.compile(r"""(?:src|href|spec-url)="([^"]+)"|url: ?'([^']+)'""")


@pytest.fixture()
def keyed_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The full app with one API key configured."""
    from retrieval_core.api.app import create_app
    from retrieval_core.settings import get_settings

    monkeypatch.setenv("API_KEY_HASHES", hashlib.sha256(KEY.encode()).hexdigest())
    get_settings.cache_clear()
    with TestClient(create_app()) as client:
        yield client
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_and_their_assets_are_served_by_the_app_without_a_key(
    keyed_client: TestClient, page: str
) -> None:
    response = keyed_client.get(page)
    assert response.status_code == 200, response.text
    html = response.text
    assert not re.search(r"https?://", html), "the page loads something from outside the app"
    urls = {a or b for a, b in LOADED.findall(html)}
    assert "/openapi.json" in urls
    assets = urls - {"/openapi.json"}
    assert any(url.endswith(".js") for url in assets), urls
    for url in sorted(urls):
        loaded = keyed_client.get(url)
        assert loaded.status_code == 200, (url, loaded.status_code)
        assert loaded.content, url
    assert keyed_client.get("/openapi.json").json()["info"]["title"] == "Retrieval service"


def test_the_api_itself_still_needs_the_key(keyed_client: TestClient) -> None:
    assert keyed_client.get("/api/v1/stores").status_code == 401
    # A path that merely starts like the docs is not public.
    assert keyed_client.get("/docsx").status_code == 401
