"""The documents routes through the real app, PostgreSQL and local model; a cache shared through moto."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.api import limits
from retrieval_core.api.app import create_app
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.cache.backends import DynamoDBBackend
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.cache.search_cache import SearchCache
from retrieval_core.documents.service import DocumentService
from retrieval_core.settings import Settings
from tests.files import corrupt_pdf_bytes, markdown_bytes, pdf_bytes, png_bytes, scanned_pdf
from tests.servers import MotoServer, create_cache_table
from tests.writing import doc_url

STORES = "/api/v1/stores"
RETRIEVE = "/api/v1/rag/retrieve"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def error_of(response: Any) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


def test_put_get_list_delete_a_text_document(client: TestClient, store: str) -> None:
    text = "Visitors sign in at the front desk and wear a badge."
    body = {"text": text, "metadata": {"team": "facilities"}}
    created = client.put(doc_url(store, "visitors"), json=body)
    assert created.status_code == 201, created.text
    assert created.json() == {
        "documentId": "visitors",
        "status": "created",
        "chunkCount": 1,
        "contentSha256": hashlib.sha256(text.encode()).hexdigest(),
        "contentType": "text/plain",
        "documents": None,
        "removed": None,
        "duplicateOf": [],
    }
    again = client.put(doc_url(store, "visitors"), json=body)
    assert (again.status_code, again.json()["status"]) == (200, "unchanged")

    got = client.get(doc_url(store, "visitors")).json()
    assert got["documentId"] == "visitors" and got["source"] == "visitors"
    assert got["metadata"] == {"team": "facilities", "contentType": "text/plain"}
    assert got["chunkCount"] == 1 and got["createdAt"] <= got["updatedAt"]

    found = client.post(
        RETRIEVE, json={"query": "badge at the front desk", "grade": 0.0, "store": store}
    ).json()
    top = found["results"][0]
    assert top["id"] == "visitors#0" and top["metadata"]["team"] == "facilities"

    assert client.delete(doc_url(store, "visitors")).status_code == 204
    missing = client.get(doc_url(store, "visitors"))
    assert missing.status_code == 404 and error_of(missing)["code"] == "document_not_found"
    assert client.delete(doc_url(store, "visitors")).status_code == 404


def test_ids_are_greedy_percent_encoded_path_segments(client: TestClient, store: str) -> None:
    ids = ["a/b#c", "team notes/ü 2026#7", "plain"]
    for doc_id in ids:
        response = client.put(doc_url(store, doc_id), json={"text": f"Document called {doc_id}."})
        assert response.status_code == 201 and response.json()["documentId"] == doc_id
    assert (
        client.put(f"{STORES}/{store}/documents/a%2Fb%23c", json={"text": "x"}).json()["documentId"]
        == "a/b#c"
    )
    assert client.get(f"{STORES}/{store}/documents/a/b%23c").json()["documentId"] == "a/b#c"
    found = client.post(
        RETRIEVE, json={"query": "document", "grade": 0.0, "store": store, "docIds": ["team notes/ü 2026#7"]}
    ).json()
    assert [r["id"] for r in found["results"]] == ["team notes/ü 2026#7#0"]


def test_list_pages_with_prefix_limit_and_cursor(client: TestClient, store: str) -> None:
    for doc_id in ["hr/leave", "hr/badges", "it/laptops", "hr/onboarding"]:
        client.put(doc_url(store, doc_id), json={"text": f"About {doc_id}."})
    first = client.get(f"{STORES}/{store}/documents", params={"prefix": "hr/", "limit": 2}).json()
    assert [d["documentId"] for d in first["documents"]] == ["hr/badges", "hr/leave"]
    second = client.get(
        f"{STORES}/{store}/documents", params={"prefix": "hr/", "limit": 2, "cursor": first["nextCursor"]}
    ).json()
    assert [d["documentId"] for d in second["documents"]] == ["hr/onboarding"] and second[
        "nextCursor"
    ] is None
    assert len(client.get(f"{STORES}/{store}/documents").json()["documents"]) == 4
    for params in ({"limit": 0}, {"limit": 1001}, {"cursor": "%%%"}):
        assert client.get(f"{STORES}/{store}/documents", params=params).status_code == 422


@pytest.mark.parametrize(
    ("method", "path", "params", "field"),
    [
        ("GET", "{store}/documents/a%00b", {}, "document_id"),
        ("DELETE", "{store}/documents/a%00b", {}, "document_id"),
        ("PUT", "{store}/documents/a%00b", {}, "document_id"),
        ("GET", "sa%00mple/documents/ab", {}, "store"),
        ("GET", "sa%00mple", {}, "store"),
        ("PUT", "sa%00mple", {}, "store"),
        ("DELETE", "sa%00mple", {}, "store"),
        ("POST", "sa%00mple/refresh", {}, "store"),
        ("GET", "{store}/documents", {"prefix": "a\x00"}, "prefix"),
    ],
)
def test_a_nul_in_a_store_name_document_id_or_prefix_is_a_422_naming_it(
    client: TestClient, store: str, method: str, path: str, params: dict[str, str], field: str
) -> None:
    # PostgreSQL text cannot hold NUL: sent on to the database, it was a 500 (found by the fuzz test).
    body = {"text": "About a."} if method == "PUT" else None
    if method == "PUT" and "/documents/" not in path:
        body = {"displayName": "A store"}
    response = client.request(method, f"{STORES}/{path.format(store=store)}", params=params, json=body)
    assert response.status_code == 422, response.text
    assert field in json.dumps(error_of(response)["details"])


def test_a_base64_pdf_and_markdown_keep_their_structure(client: TestClient, store: str) -> None:
    pdf = pdf_bytes(
        ["Badges are renewed every year.", "Laptops are replaced every four years."], title="Policy"
    )
    body = {"content": b64(pdf), "contentType": "application/pdf", "fileName": "policy.pdf"}
    written = client.put(doc_url(store, "policy.pdf"), json=body)
    assert written.status_code == 201, written.text
    assert written.json()["contentType"] == "application/pdf" and written.json()["chunkCount"] == 2
    found = client.post(RETRIEVE, json={"query": "laptop replacement", "grade": 0.0, "store": store}).json()
    top = found["results"][0]
    assert top["metadata"]["pageNumber"] == 2 and top["metadata"]["fileName"] == "policy.pdf"

    md = markdown_bytes("# Guide\n\n## Install\n\nRun the installer.\n")
    written = client.put(doc_url(store, "guide.md"), json={"content": b64(md), "fileName": "guide.md"})
    assert written.status_code == 201 and written.json()["contentType"] == "text/markdown"
    assert client.get(doc_url(store, "guide.md")).json()["title"] == "Guide"


@pytest.mark.parametrize(
    ("body", "status", "code", "needle"),
    [
        ({"content": "not base64!!"}, 422, "validation_error", "content"),
        (
            {"content": b64(png_bytes()), "contentType": "image/png"},
            415,
            "unsupported_content_type",
            "application/pdf",
        ),
        (
            {"content": b64(corrupt_pdf_bytes()), "contentType": "application/pdf"},
            422,
            "unreadable_document",
            "pdf",
        ),
        ({"text": "  \n  "}, 422, "empty_document", "no text"),
        (
            {"content": b64(scanned_pdf([None])), "fileName": "scan.pdf"},
            422,
            "no_text_layer",
            "a scanned PDF? OCR is not enabled",
        ),
        ({"text": "a", "content": b64(b"a")}, 422, "validation_error", "exactly one"),
        ({}, 422, "validation_error", "exactly one"),
        ({"text": "a", "metadata": {"documentId": "x"}}, 422, "validation_error", "metadata.documentId"),
        ({"text": "a", "extra": 1}, 422, "validation_error", "extra"),
    ],
)
def test_bad_documents_are_refused_and_change_nothing(
    client: TestClient, store: str, body: dict[str, Any], status: int, code: str, needle: str
) -> None:
    response = client.put(doc_url(store, "bad"), json=body)
    assert response.status_code == status, response.text
    assert error_of(response)["code"] == code
    assert needle.lower() in json.dumps(error_of(response)).lower()
    assert client.get(doc_url(store, "bad")).status_code == 404
    assert client.get(f"{STORES}/{store}").json()["documentCount"] == 0


def test_an_encrypted_pdf_is_refused_with_the_reason(client: TestClient, store: str) -> None:
    body = {"content": b64(pdf_bytes(["Secret."], password="pw")), "contentType": "application/pdf"}
    response = client.put(doc_url(store, "secret.pdf"), json=body)
    assert response.status_code == 422 and "encrypt" in error_of(response)["message"].lower()


def test_unknown_store_is_404(client: TestClient) -> None:
    response = client.put(doc_url("no-such-store", "doc"), json={"text": "a"})
    assert response.status_code == 404 and error_of(response)["code"] == "store_not_found"


def test_the_documents_route_has_its_own_body_limit_and_says_where_larger_files_go(
    client: TestClient, store: str, own_runtime: Any
) -> None:
    assert Settings().documents_max_body_bytes == limits.DOCUMENTS_BODY_BYTES == 5_934_464
    assert limits.LARGEST_FILE_BYTES == 4_435_488
    # 1.5 MB: over the general 1 MiB limit, under the documents one (refused for its type, not its size).
    big = {"content": b64(png_bytes() + b"\0" * 1_100_000), "contentType": "image/png"}
    assert client.put(doc_url(store, "big.png"), json=big).status_code == 415
    assert client.post(RETRIEVE, json={"query": "x" * 1_500_000}).status_code == 413

    own_runtime(DOCUMENTS_MAX_BODY_BYTES="30000")
    with TestClient(create_app()) as small:
        response = small.put(doc_url(store, "big.txt"), json={"text": "y" * 40_000})
    assert response.status_code == 413
    error = error_of(response)
    assert "documents S3 bucket" in error["message"] and "CLI (retrieval ingest)" in error["message"]
    assert error["details"] == {"maxBytes": 30_000, "largestFileBytes": 7140}


def shared_cache_service(moto: MotoServer, table: str, inner: RetrievalService) -> RetrievalService:
    backend = DynamoDBBackend(table, lambda: moto.client("dynamodb"))
    cache = SearchCache(
        JsonCache(backend, "search"), JsonCache(backend, "store"), shared=True, default_ttl_s=300
    )
    return RetrievalService(inner.database, inner.embedder, "sample", inner.ef_search, cache=cache)


def app_over(retrieval: RetrievalService) -> TestClient:
    from retrieval_core.container import get_document_service, get_service

    app = create_app()
    app.dependency_overrides[get_service] = lambda: retrieval
    app.dependency_overrides[get_document_service] = lambda: DocumentService(retrieval, 1000, 150)
    return TestClient(app)


def test_a_write_through_one_instance_is_visible_to_the_next_retrieve_on_another(
    moto: MotoServer, service: RetrievalService, sample_store: Any
) -> None:
    table = f"cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), table)
    a = app_over(shared_cache_service(moto, table, service))
    b = app_over(shared_cache_service(moto, table, service))
    name = f"shared-{uuid.uuid4().hex[:8]}"
    assert b.put(f"{STORES}/{name}", json={}).status_code == 201
    b.put(doc_url(name, "old"), json={"text": "The cafeteria opens at eight in the morning."})
    query = {"query": "When does the cafeteria open?", "grade": 0.0, "store": name}
    assert a.post(RETRIEVE, json=query).headers["X-Cache"] == "miss"
    assert a.post(RETRIEVE, json=query).headers["X-Cache"] == "hit"

    written = b.put(doc_url(name, "new"), json={"text": "From June the cafeteria opens at seven thirty."})
    assert written.status_code == 201
    after = a.post(RETRIEVE, json=query)
    assert after.headers["X-Cache"] == "miss"
    assert {r["metadata"]["documentId"] for r in after.json()["results"]} == {"old", "new"}

    assert b.delete(doc_url(name, "new")).status_code == 204
    assert {r["metadata"]["documentId"] for r in a.post(RETRIEVE, json=query).json()["results"]} == {"old"}
    assert b.delete(f"{STORES}/{name}").status_code == 204
    assert a.post(RETRIEVE, json=query).status_code == 404


def lambda_event(method: str, route: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """An HTTP API (payload 2.0) event. API Gateway hands Lambda the path percent-decoded, in rawPath and
    requestContext.http.path alike (Mangum routes on the latter as it is)."""
    text = json.dumps(body) if body is not None else None
    headers = {"content-type": "application/json", "content-length": str(len(text))} if text else {}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {route}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"host": "api.example.com", **headers},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9"},
            "requestId": f"req-{uuid.uuid4().hex[:8]}",
            "routeKey": f"{method} {route}",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    if text is not None:
        event["body"] = text
    return event


def test_the_lambda_handler_takes_the_greedy_decoded_document_id(store: str) -> None:
    from tests.functional.test_handlers import FakeLambdaContext, load_handler_module

    handler = load_handler_module("documents").handler
    route = "/api/v1/stores/{store}/documents/{documentId+}"
    # The client sent /documents/reports%2F2026%23q1%20draft; API Gateway decoded it.
    path = f"/api/v1/stores/{store}/documents/reports/2026#q1 draft"
    put = handler(
        lambda_event("PUT", route, path, {"text": "Quarterly report draft."}), FakeLambdaContext("documents")
    )
    assert put["statusCode"] == 201, put["body"]
    assert json.loads(put["body"])["documentId"] == "reports/2026#q1 draft"
    got = handler(lambda_event("GET", route, path), FakeLambdaContext("documents"))
    assert json.loads(got["body"])["documentId"] == "reports/2026#q1 draft"
    deleted = handler(lambda_event("DELETE", route, path), FakeLambdaContext("documents"))
    assert deleted["statusCode"] == 204


def test_a_jsonl_file_answers_with_each_record_and_the_removed_ones(client: TestClient, store: str) -> None:
    from tests.files import jsonl_bytes

    records = [
        {"_id": "d1", "text": "Parking is free after six."},
        {"_id": "d2", "text": "Bikes go in the cellar."},
    ]
    body = {"content": b64(jsonl_bytes(records)), "fileName": "corpus.jsonl"}
    first = client.put(doc_url(store, "corpus.jsonl"), json=body)
    assert first.status_code == 201, first.text
    assert [d["documentId"] for d in first.json()["documents"]] == ["d1", "d2"] and first.json()[
        "removed"
    ] == []
    body = {"content": b64(jsonl_bytes(records[:1])), "fileName": "corpus.jsonl"}
    second = client.put(doc_url(store, "corpus.jsonl"), json=body).json()
    assert second["status"] == "updated" and second["removed"] == ["d2"]
    assert second["documents"] == [
        {"documentId": "d1", "status": "unchanged", "chunkCount": 1, "duplicateOf": []}
    ]
    assert client.get(doc_url(store, "d1")).json()["source"] == "corpus.jsonl"
    assert client.delete(doc_url(store, "corpus.jsonl")).status_code == 204
    assert client.get(doc_url(store, "d1")).status_code == 404


def test_doc_ids_filters_take_the_same_1024_byte_ids(client: TestClient, store: str) -> None:
    long_id = "é" * 512  # 1,024 bytes
    assert client.put(doc_url(store, long_id), json={"text": "A document with a long id."}).status_code == 201
    for path, body in (
        (RETRIEVE, {"query": "long id", "grade": 0.0, "store": store}),
        ("/api/v1/chunks/similarity-search", {"queryEmbedding": [0.1] * 384, "store": store}),
    ):
        found = client.post(path, json={**body, "docIds": [long_id]})
        assert found.status_code == 200 and [r["id"] for r in found.json()["results"]] == [f"{long_id}#0"]
        refused = client.post(path, json={**body, "docIds": [long_id + "x"]})
        assert refused.status_code == 422 and "1024 bytes" in refused.json()["error"]["message"]
    assert client.put(doc_url(store, long_id + "x"), json={"text": "x"}).status_code == 422
