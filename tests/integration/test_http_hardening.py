"""HTTP basics on the local app: x-request-id, Allow on 405, CORS, the body read
deadline, and DEBUG=retrieval-service lines for every stage of a request, each tagged with its id."""

from __future__ import annotations

import hashlib
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.api.app import create_app
from retrieval_core.api.request_id import RequestIdLogFilter
from tests.servers import free_port

RETRIEVE = "/api/v1/rag/retrieve"
MINTED = re.compile(r"[0-9a-f]{32}")
API_KEY = "rk-http-hardening-3c9d1e7a"


# x-request-id


def test_a_usable_request_id_is_echoed_on_answers_and_errors(client: TestClient) -> None:
    for method, path, body in (
        ("post", RETRIEVE, {"query": "q", "grade": 0, "store": "sample"}),
        ("post", RETRIEVE, {"query": "q"}),  # 422
        ("get", "/api/v1/no-such-route", None),  # 404
    ):
        response = client.request(method, path, json=body, headers={"x-request-id": "trace-01:a/b=c+d.e_f"})
        assert response.headers["x-request-id"] == "trace-01:a/b=c+d.e_f", (path, response.status_code)


@pytest.mark.parametrize("sent", [None, "", "a" * 129, "has space", 'quote"d', "naïve", "semi;colon"])
def test_an_unusable_or_missing_request_id_is_replaced_by_a_minted_one(
    client: TestClient, sent: str | None
) -> None:
    headers = {"x-request-id": sent.encode()} if sent is not None else {}
    first = client.get(
        "/api/v1/stores/resolve", params={"name": "sample", "backend": "pgvector"}, headers=headers
    )
    second = client.get(
        "/api/v1/stores/resolve", params={"name": "sample", "backend": "pgvector"}, headers=headers
    )
    assert MINTED.fullmatch(first.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


# Allow on 405


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("delete", RETRIEVE, "POST"),
        ("get", "/api/v1/chunks/similarity-search", "POST"),
        ("post", "/api/v1/stores/sample", "DELETE, GET, PUT"),
        ("patch", "/api/v1/stores/sample/documents/d1", "DELETE, GET, PUT"),
    ],
)
def test_a_405_names_every_method_of_the_path(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allowed
    error = response.json()["error"]
    assert error["code"] == "method_not_allowed" and error["details"] == {"allowed": allowed.split(", ")}


# CORS


def preflight(client: TestClient, origin: str) -> Any:
    return client.options(
        RETRIEVE,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, x-api-key",
        },
    )


def test_a_trailing_slash_redirects_to_the_path_alone_never_to_the_host_header(client: TestClient) -> None:
    hostile = {"host": "attacker.example"}
    listed = client.get("/api/v1/stores/?limit=1", headers=hostile, follow_redirects=False)
    assert listed.status_code == 307
    assert listed.headers["location"] == "/api/v1/stores?limit=1"  # no scheme, no host
    assert client.get(listed.headers["location"]).status_code == 200
    store = client.get("/api/v1/stores/sample/", headers=hostile, follow_redirects=False)
    assert (store.status_code, store.headers["location"]) == (307, "/api/v1/stores/sample")
    # A slash sent encoded is part of a name, not a trailing slash: no redirect (to itself, forever).
    for path in ("//attacker.example/", "/api/v1/no-such-route/", "/api/v1/stores/sample%2F"):
        response = client.get(path, headers=hostile, follow_redirects=False)
        assert response.status_code == 404 and "location" not in response.headers, path


def test_cors_is_off_by_default(client: TestClient) -> None:
    response = preflight(client, "https://app.example.com")
    assert response.status_code == 405
    assert "access-control-allow-origin" not in response.headers


def test_cors_answers_preflights_of_listed_origins_before_the_api_key_is_asked(
    sample_store: Any, configure: Any
) -> None:
    configure(
        CORS_ALLOW_ORIGINS="https://app.example.com, https://admin.example.com",
        API_KEY_HASHES=hashlib.sha256(API_KEY.encode()).hexdigest(),
    )
    with TestClient(create_app()) as client:
        allowed = preflight(client, "https://admin.example.com")
        assert allowed.status_code == 200, allowed.text
        assert allowed.headers["access-control-allow-origin"] == "https://admin.example.com"
        assert "POST" in allowed.headers["access-control-allow-methods"]
        assert "x-api-key" in allowed.headers["access-control-allow-headers"].lower()
        assert preflight(client, "https://evil.example.net").status_code == 400

        answered = client.post(
            RETRIEVE,
            json={"query": "q", "grade": 0, "store": "sample"},
            headers={"Origin": "https://app.example.com", "x-api-key": API_KEY},
        )
        assert answered.status_code == 200
        assert answered.headers["access-control-allow-origin"] == "https://app.example.com"
        assert "x-request-id" in answered.headers["access-control-expose-headers"].lower()
        # A refusal reaches the browser's script too.
        refused = client.post(RETRIEVE, json={}, headers={"Origin": "https://app.example.com"})
        assert refused.status_code == 401
        assert refused.headers["access-control-allow-origin"] == "https://app.example.com"


# Body read deadline on the local server


@pytest.fixture()
def server(sample_store: Any, configure: Any) -> Iterator[int]:
    """The app under uvicorn on 127.0.0.1, with a 1 s body deadline; yields its port."""
    import uvicorn

    configure(REQUEST_BODY_TIMEOUT_S="1")
    port = free_port()
    uvicorn_server = uvicorn.Server(
        uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=uvicorn_server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uvicorn_server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert uvicorn_server.started
    yield port
    uvicorn_server.should_exit = True
    thread.join(timeout=10)


def test_a_body_shorter_than_its_content_length_is_a_408_and_the_connection_closes(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(
            b"POST /api/v1/rag/retrieve HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"query": "q"'
        )
        received = b""
        while chunk := sock.recv(65536):  # until the server closes the connection
            received += chunk
        elapsed = time.monotonic() - started
    assert received.startswith(b"HTTP/1.1 408 "), received[:200]
    assert b'"code":"request_timeout"' in received
    assert 0.9 <= elapsed < 3.0, elapsed


def test_a_whole_body_is_served_normally(server: int) -> None:
    import httpx

    response = httpx.post(
        f"http://127.0.0.1:{server}{RETRIEVE}", json={"query": "q", "grade": 0, "store": "sample"}, timeout=30
    )
    assert response.status_code == 200


# DEBUG=retrieval-service


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.addFilter(RequestIdLogFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


# On the loggers themselves: a Lambda handler built in this process earlier may have stopped them
# propagating to the root logger (Powertools' copy_config_to_registered_loggers).
DEBUGGED = (
    "retrieval_core.api.auth",
    "retrieval_core.backends.pgvector.service",
    "retrieval_core.backends.pgvector.caching",
)


@pytest.fixture()
def kept_logs() -> Iterator[Keep]:
    handler = Keep()
    for name in DEBUGGED:
        logging.getLogger(name).addHandler(handler)
    yield handler
    for name in DEBUGGED:
        logging.getLogger(name).removeHandler(handler)


def test_debug_logs_every_stage_of_a_request_tagged_with_its_id_and_without_secrets(
    sample_store: Any, configure: Any, kept_logs: Keep
) -> None:
    configure(DEBUG="retrieval-service", API_KEY_HASHES=hashlib.sha256(API_KEY.encode()).hexdigest())
    body = {"query": "pod scheduling", "grade": 0, "store": "sample", "rerank": {"strategy": "mmr"}}
    with TestClient(create_app()) as client:
        for request_id in ("debug-trace-1", "debug-trace-2"):  # a miss, then a hit
            headers = {"x-api-key": API_KEY, "x-request-id": request_id}
            assert client.post(RETRIEVE, json=body, headers=headers).status_code == 200
    lines = {
        r.request_id: []
        for r in kept_logs.records
        if r.getMessage().startswith("retrieval-service ")  # type: ignore[attr-defined]
    }
    for record in kept_logs.records:
        if record.getMessage().startswith("retrieval-service "):
            lines[record.request_id].append(record.getMessage())  # type: ignore[attr-defined]
    assert set(lines) == {"debug-trace-1", "debug-trace-2"}, lines
    miss, hit = "\n".join(lines["debug-trace-1"]), "\n".join(lines["debug-trace-2"])
    for stage in ("auth: POST", "cache miss", "embed: 384 dimensions", "search sample: ", "rerank mmr: "):
        assert stage in miss, (stage, miss)
    assert "auth: POST" in hit and "cache hit" in hit and "embed:" not in hit
    everything = "\n".join(record.getMessage() for record in kept_logs.records)
    assert API_KEY not in everything and hashlib.sha256(API_KEY.encode()).hexdigest() not in everything
    assert "pod scheduling" not in everything  # the query's text stays out of the logs


def test_without_debug_there_are_no_debug_lines(client: TestClient, kept_logs: Keep) -> None:
    assert client.post(RETRIEVE, json={"query": "q", "grade": 0, "store": "sample"}).status_code == 200
    assert not [r for r in kept_logs.records if r.getMessage().startswith("retrieval-service ")]


def test_an_unexpected_error_still_answers_with_the_request_id(sample_store: Any) -> None:
    from fastapi import APIRouter

    broken = APIRouter()

    @broken.get("/api/v1/broken")
    async def fail() -> None:
        raise RuntimeError("a bug")

    with TestClient(create_app(broken), raise_server_exceptions=False) as client:
        response = client.get("/api/v1/broken", headers={"x-request-id": "bug-report-7"})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert response.headers["x-request-id"] == "bug-report-7"
