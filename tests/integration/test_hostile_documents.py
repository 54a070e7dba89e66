"""Hostile files through the document PUT, on the real database: each is refused with a named 4xx within
its budget's time; a client that goes away stops the reading; parse slots bound the files read at once."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from typing import Any

from fastapi.testclient import TestClient

from retrieval_core.api.app import create_app
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.documents.service import DocumentService, parse_slots_of
from retrieval_core.parsers import ParseBudget
from retrieval_core.search.concurrency import ExpensiveSlots
from tests.files import csv_bytes, html_bytes, paragraph_bomb_docx, shared_stream_pdf
from tests.writing import doc_url

STORES = "/api/v1/stores"
MIB = 1024 * 1024


def file_body(data: bytes, name: str) -> dict[str, Any]:
    return {"content": base64.b64encode(data).decode(), "fileName": name}


def app_with(
    service: RetrievalService, budget: ParseBudget, slots: ExpensiveSlots | None = None
) -> TestClient:
    """The full app, its documents service reading within `budget` (and `slots`)."""
    from retrieval_core.container import get_document_service

    app = create_app()
    app.dependency_overrides[get_document_service] = lambda: DocumentService(
        service, 1000, 150, budget, slots
    )
    return TestClient(app)


def refusal(response: Any) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["details"].get("limit", "")


def test_a_pdf_of_pages_sharing_one_huge_stream_is_refused_before_it_is_read(
    client: TestClient, service: RetrievalService, store: str
) -> None:
    data = shared_stream_pdf(pages=10, stream_bytes=2_000_000)  # 6.9 KB; 36 s of CPU unbounded
    hostile = app_with(service, ParseBudget(max_content_bytes=MIB))
    started = time.monotonic()
    response = hostile.put(doc_url(store, "attack.pdf"), json=file_body(data, "attack.pdf"))
    assert time.monotonic() - started < 2.0
    assert refusal(response) == (422, "document_limit_exceeded", "DOCUMENT_MAX_CONTENT_BYTES")
    assert "raise DOCUMENT_MAX_CONTENT_BYTES" in response.json()["error"]["message"]
    assert client.get(doc_url(store, "attack.pdf")).status_code == 404


def test_a_docx_of_millions_of_empty_paragraphs_is_refused_by_the_default_budget(
    client: TestClient, store: str
) -> None:
    data = paragraph_bomb_docx(3_000_000)  # 60 KB: once 5.8 GB of memory and 159 s
    started = time.monotonic()
    response = client.put(doc_url(store, "bomb.docx"), json=file_body(data, "bomb.docx"))
    assert time.monotonic() - started < 3.0
    assert refusal(response) == (422, "document_limit_exceeded", "DOCUMENT_MAX_ELEMENTS")


def test_html_with_twenty_thousand_empty_main_elements_is_written_at_once(
    client: TestClient, store: str
) -> None:
    data = html_bytes("<main></main>" * 20_000 + "<main><p>Badges are kept at the desk.</p></main>")
    started = time.monotonic()
    response = client.put(doc_url(store, "mains.html"), json=file_body(data, "mains.html"))
    assert time.monotonic() - started < 3.0
    assert response.status_code == 201, response.text
    assert response.json()["chunkCount"] == 1


def test_a_csv_with_a_4_mb_cell_is_refused_naming_the_cell_limit(client: TestClient, store: str) -> None:
    data = csv_bytes([{"id": "big", "text": "word " * 800_000}])
    started = time.monotonic()
    response = client.put(doc_url(store, "big.csv"), json=file_body(data, "big.csv"))
    assert time.monotonic() - started < 3.0
    assert refusal(response) == (422, "document_limit_exceeded", "DOCUMENT_MAX_FIELD_CHARS")


def test_writes_beyond_the_parse_slots_wait_then_get_503_overloaded(
    client: TestClient, service: RetrievalService, store: str
) -> None:
    slots = parse_slots_of(1, 0.05)
    busy = app_with(service, ParseBudget(), slots)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with slots.hold():
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(5)
        response = busy.put(doc_url(store, "notes"), json={"text": "Visitors sign in."})
        assert refusal(response) == (503, "overloaded", "PARSE_CONCURRENCY")
        assert response.headers["Retry-After"] == "1"
    finally:
        release.set()
        holder.join()
    assert busy.put(doc_url(store, "notes"), json={"text": "Visitors sign in."}).status_code == 201


def test_a_client_that_goes_away_stops_the_reading_of_its_file(
    client: TestClient, service: RetrievalService, store: str
) -> None:
    # About 10 s of reading under this budget, if nothing stopped it.
    data = shared_stream_pdf(pages=40, stream_bytes=200_000)
    generous = ParseBudget(max_content_bytes=100 * MIB, parse_timeout_s=60)
    app = app_with(service, generous).app
    path = doc_url(store, "slow.pdf")
    started = time.monotonic()
    status, body = asyncio.run(put_then_leave(app, path, json.dumps(file_body(data, "slow.pdf")).encode()))
    assert time.monotonic() - started < 3.0
    assert (status, body["error"]["code"]) == (499, "client_closed_request")
    assert client.get(path).status_code == 404


async def put_then_leave(app: Any, path: str, body: bytes, after_s: float = 0.3) -> tuple[int, Any]:
    """PUT `body` to `path` on the ASGI `app` from a client that disconnects `after_s` after sending it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"test"),
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("test", 80),
    }
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    gone = asyncio.Event()
    asyncio.get_running_loop().call_later(after_s, gone.set)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(payload)
