"""GET /console: the console's files, public and under a Content-Security-Policy, and nothing else.

What the pages do in a browser is tests/browser's (make check-browser); here, what the server sends.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from fastapi.testclient import TestClient

from retrieval_core.console import ASSETS

KEY = "rk_console_" + "c3" * 16


def test_the_console_and_its_files_are_served_without_a_key_when_keys_are_configured(
    client: TestClient, configure: Any
) -> None:
    configure(API_KEY_HASHES=hashlib.sha256(KEY.encode()).hexdigest())
    page = client.get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"].startswith("default-src 'self';")
    assert page.headers["x-content-type-options"] == "nosniff"
    module = client.get("/console/app.js")
    assert module.headers["content-type"] == "text/javascript; charset=utf-8"
    # The API behind the pages still needs the key.
    assert client.get("/api/v1/stores").status_code == 401
    assert client.get("/api/v1/stores", headers={"x-api-key": KEY}).status_code == 200


def test_a_path_naming_no_console_file_is_a_404_that_says_so(client: TestClient) -> None:
    outside = ("/console/nope.js", "/console/__init__.py", "/console/..%2F__init__.py", "/console/a/app.js")
    for path in outside:
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["code"] == "not_found"
        assert "The console has no file named" in answer.json()["error"]["message"]


def test_the_pages_learn_the_largest_document_a_put_may_carry(client: TestClient, configure: Any) -> None:
    configure(DOCUMENTS_MAX_BODY_BYTES="2000000")
    assert client.get("/console/config.json").json() == {"documentsMaxBodyBytes": 2_000_000}


def test_every_file_the_pages_load_is_served(client: TestClient) -> None:
    # The page's stylesheet and entry module, and every module each module imports, by absolute path.
    wanted = set(re.findall(r'(?:href|src)="(/console/[^"]+)"', client.get("/console").text))
    for module in ASSETS.glob("*.js"):
        wanted |= set(re.findall(r'from "(/console/[^"]+)"', module.read_text()))
    assert {"/console/console.css", "/console/app.js", "/console/api.js"} <= wanted
    for path in sorted(wanted):
        assert client.get(path).status_code == 200, path
