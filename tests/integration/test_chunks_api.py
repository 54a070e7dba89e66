"""GET /api/v1/stores/{store}/chunks through the real app, PostgreSQL and local model: what the parser made
of a document, a page at a time."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.files import markdown_bytes, pdf_bytes
from tests.writing import doc_url

STORES = "/api/v1/stores"
READER = "rk_chrd_" + "c4" * 16
SAMPLE_READER = "rk_chsm_" + "5c" * 16
WRITER = "rk_chwr_" + "77" * 16


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


API_KEYS = [
    {"name": "chunks-reader", "sha256": digest(READER), "stores": ["*"], "scopes": ["read"]},
    {"name": "sample-reader", "sha256": digest(SAMPLE_READER), "stores": ["sample"], "scopes": ["read"]},
    {"name": "chunks-writer", "sha256": digest(WRITER), "stores": ["*"], "scopes": ["write", "admin"]},
]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chunks_of(client: TestClient, store: str, document_id: str, **params: Any) -> Any:
    return client.get(f"{STORES}/{store}/chunks", params={"documentId": document_id, **params})


def put_file(client: TestClient, store: str, document_id: str, data: bytes, file_name: str) -> None:
    written = client.put(doc_url(store, document_id), json={"content": b64(data), "fileName": file_name})
    assert written.status_code == 201, written.text


def test_a_pdf_gives_each_chunk_its_page_number(client: TestClient, store: str) -> None:
    pdf = pdf_bytes(
        ["Badges are renewed every year.", "Laptops are replaced every four years."], title="Policy"
    )
    put_file(client, store, "hr/policy.pdf", pdf, "policy.pdf")

    response = chunks_of(client, store, "hr/policy.pdf")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["documentId"] == "hr/policy.pdf" and body["nextCursor"] is None
    assert [(c["id"], c["chunkIndex"], c["pageNumber"], c["section"]) for c in body["chunks"]] == [
        ("hr/policy.pdf#0", 0, 1, None),
        ("hr/policy.pdf#1", 1, 2, None),
    ]
    first, second = body["chunks"]
    assert first["content"] == "Badges are renewed every year."
    assert second["content"] == "Laptops are replaced every four years."
    assert second["metadata"]["pageNumber"] == 2 and second["metadata"]["fileName"] == "policy.pdf"
    assert second["metadata"]["title"] == "Policy"


def test_markdown_headings_give_each_chunk_its_section(client: TestClient, store: str) -> None:
    md = markdown_bytes(
        "# Guide\n\nRead this first.\n\n## Install\n\nRun the installer.\n\n"
        "## Upgrade\n\nStop the service first.\n"
    )
    put_file(client, store, "guide.md", md, "guide.md")

    chunks = chunks_of(client, store, "guide.md").json()["chunks"]
    assert [(c["section"], c["pageNumber"]) for c in chunks] == [
        ("Guide", None),
        ("Guide > Install", None),
        ("Guide > Upgrade", None),
    ]
    assert chunks[1]["content"] == "Install\n\nRun the installer."


def test_a_page_number_or_section_the_caller_wrote_as_another_type_is_not_lifted(
    client: TestClient, store: str
) -> None:
    body = {"text": "Plain notes.", "metadata": {"pageNumber": "ten", "section": 3}}
    assert client.put(doc_url(store, "notes"), json=body).status_code == 201
    (chunk,) = chunks_of(client, store, "notes").json()["chunks"]
    assert (chunk["pageNumber"], chunk["section"]) == (None, None)
    assert chunk["metadata"]["pageNumber"] == "ten" and chunk["metadata"]["section"] == 3


def test_pages_of_one_chunk_follow_the_cursor_to_the_last_page(client: TestClient, store: str) -> None:
    pages = ["First page about badges.", "Second page about laptops.", "Third page about parking."]
    put_file(client, store, "three.pdf", pdf_bytes(pages), "three.pdf")

    seen: list[tuple[int, int]] = []
    cursor: str | None = None
    for _ in range(4):
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = chunks_of(client, store, "three.pdf", **params).json()
        seen += [(c["chunkIndex"], c["pageNumber"]) for c in page["chunks"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [(0, 1), (1, 2), (2, 3)] and cursor is None

    two = chunks_of(client, store, "three.pdf", limit=2).json()
    assert [c["chunkIndex"] for c in two["chunks"]] == [0, 1] and two["nextCursor"] is not None
    rest = chunks_of(client, store, "three.pdf", limit=2, cursor=two["nextCursor"]).json()
    assert [c["chunkIndex"] for c in rest["chunks"]] == [2] and rest["nextCursor"] is None


def test_unknown_store_and_unknown_document_are_404s(client: TestClient, store: str) -> None:
    missing_store = chunks_of(client, "no-such-store", "doc")
    assert missing_store.status_code == 404
    assert missing_store.json()["error"]["code"] == "store_not_found"
    missing_document = chunks_of(client, store, "no-such-document")
    assert missing_document.status_code == 404
    assert missing_document.json()["error"] == {
        "code": "document_not_found",
        "message": f"document 'no-such-document' not found in store '{store}'",
        "details": {"store": store, "documentId": "no-such-document"},
    }


@pytest.mark.parametrize(
    ("cursor", "cause"),
    [
        ("%%%", "not_base64"),
        (base64.urlsafe_b64encode(b"hr/leave").decode().rstrip("="), "not_a_chunk_index"),
        (base64.urlsafe_b64encode(b"99999999999").decode().rstrip("="), "not_a_chunk_index"),
        (base64.urlsafe_b64encode(b"\xff\xfe").decode().rstrip("="), "not_text"),
    ],
)
def test_a_cursor_no_chunk_page_gave_is_a_422(
    client: TestClient, store: str, cursor: str, cause: str
) -> None:
    assert client.put(doc_url(store, "doc"), json={"text": "One chunk."}).status_code == 201
    response = chunks_of(client, store, "doc", cursor=cursor)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_cursor"
    assert error["details"]["errors"][0]["field"] == "cursor"
    assert error["details"]["errors"][0]["type"] == cause


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({}, "documentId"),
        ({"documentId": ""}, "documentId"),
    ],
)
def test_a_limit_out_of_bounds_or_no_document_id_is_a_422_naming_it(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    response = client.get(f"{STORES}/sample/chunks", params={"documentId": "x", **params} if params else {})
    assert response.status_code == 422, response.text
    assert field in json.dumps(response.json()["error"]["details"])


def test_a_read_only_key_lists_chunks_and_a_key_without_the_store_gets_404(
    client: TestClient, store: str, configure: Any
) -> None:
    assert client.put(doc_url(store, "doc"), json={"text": "Visitors sign in."}).status_code == 201
    configure(API_KEYS=json.dumps(API_KEYS))

    read = client.get(f"{STORES}/{store}/chunks", params={"documentId": "doc"}, headers={"x-api-key": READER})
    assert read.status_code == 200, read.text
    assert [c["content"] for c in read.json()["chunks"]] == ["Visitors sign in."]

    outside = client.get(
        f"{STORES}/{store}/chunks", params={"documentId": "doc"}, headers={"x-api-key": SAMPLE_READER}
    )
    assert outside.status_code == 404 and outside.json()["error"]["code"] == "store_not_found"

    no_read = client.get(
        f"{STORES}/{store}/chunks", params={"documentId": "doc"}, headers={"x-api-key": WRITER}
    )
    assert no_read.status_code == 403 and no_read.json()["error"]["code"] == "forbidden"
