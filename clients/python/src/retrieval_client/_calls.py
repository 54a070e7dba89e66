"""Each operation of the HTTP API as a request to send: the one description both clients execute."""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_client._http import API, document_path, path_safe, query, store_path

# Types the service reads that Python's mimetypes table lacks or names otherwise.
CONTENT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".jsonl": "application/jsonl",
    ".ndjson": "application/jsonl",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


@dataclass(frozen=True)
class Call:
    """One request: `ok` lists the statuses that are answers rather than errors; `repeatable`, whether
    an attempt that got no answer (a time-out, a dropped connection) may be sent again."""

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    ok: frozenset[int] = frozenset({200, 201})
    headers: dict[str, str] = field(default_factory=dict)
    repeatable: bool = True


NO_CONTENT = frozenset({204})


def post(path: str, body: Mapping[str, Any]) -> Call:
    """A POST of a JSON body under /api/v1."""
    return Call("POST", f"{API}{path}", body=dict(body))


def health() -> Call:
    """GET /health: its report is the answer whether the service is healthy (200) or not (503)."""
    return Call("GET", f"{API}/health", ok=frozenset({200, 503}))


def healthy() -> Call:
    """HEAD /health: 200 or 503, no body."""
    return Call("HEAD", f"{API}/health", ok=frozenset({200, 503}))


def answer_stream(body: Mapping[str, Any]) -> Call:
    """POST /rag/answer asking for server-sent events (the local server streams; others answer JSON)."""
    return Call("POST", f"{API}/rag/answer", body=dict(body), headers={"accept": "text/event-stream"})


def resolve_store(name: str, backend: str | None) -> Call:
    """GET /stores/resolve."""
    return Call("GET", f"{API}/stores/resolve", params=query(name=name, backend=backend))


def list_stores(prefix: str | None, limit: int | None, cursor: str | None) -> Call:
    """GET /stores, one page."""
    return Call("GET", f"{API}/stores", params=query(prefix=prefix, limit=limit, cursor=cursor))


def put_store(store: str, body: Mapping[str, Any]) -> Call:
    """PUT /stores/{store}."""
    return Call("PUT", store_path(store), body=dict(body))


def get_store(store: str) -> Call:
    """GET /stores/{store}."""
    return Call("GET", store_path(store))


def delete_store(store: str) -> Call:
    """DELETE /stores/{store}."""
    return Call("DELETE", store_path(store), ok=NO_CONTENT)


def refresh_store(store: str) -> Call:
    """POST /stores/{store}/refresh: the one POST that changes state, so not sent again blindly."""
    return Call("POST", f"{store_path(store)}/refresh", repeatable=False)


def list_documents(
    store: str, prefix: str | None, limit: int | None, cursor: str | None, status: str | None = None
) -> Call:
    """GET /stores/{store}/documents, one page (of documents, or with `status` of ingestion outcomes)."""
    params = query(prefix=prefix, limit=limit, cursor=cursor, status=status)
    return Call("GET", f"{store_path(store)}/documents", params=params)


def evaluate(store: str, queries: Any, judgments: Any, methods: Any | None, k: int | None) -> Call:
    """POST /stores/{store}/evaluate; `methods` and `k` only when given (the service's defaults otherwise)."""
    body = {"queries": queries, "judgments": judgments, "methods": methods, "k": k}
    return Call(
        "POST", f"{store_path(store)}/evaluate", body={n: v for n, v in body.items() if v is not None}
    )


def list_chunks(store: str, document_id: str, limit: int | None, cursor: str | None) -> Call:
    """GET /stores/{store}/chunks?documentId=, one page of the document's chunks."""
    params = query(documentId=document_id, limit=limit, cursor=cursor)
    return Call("GET", f"{store_path(store)}/chunks", params=params)


def put_document(store: str, document_id: str, body: Mapping[str, Any], table: Mapping[str, Any]) -> Call:
    """PUT /stores/{store}/documents/{documentId}, with the table options of a CSV or JSON Lines file."""
    return Call("PUT", document_path(store, document_id), params=query(**table), body=dict(body))


def get_document(store: str, document_id: str) -> Call:
    """GET /stores/{store}/documents/{documentId}."""
    return Call("GET", document_path(store, document_id))


def delete_document(store: str, document_id: str) -> Call:
    """DELETE /stores/{store}/documents/{documentId}; for an id a path cannot carry, the same delete with
    the id as a query parameter."""
    if not path_safe(document_id):
        return delete_document_by_query(store, document_id)
    return Call("DELETE", document_path(store, document_id), ok=NO_CONTENT)


def delete_document_by_query(store: str, document_id: str) -> Call:
    """DELETE /stores/{store}/documents?documentId=."""
    return Call("DELETE", f"{store_path(store)}/documents", params={"documentId": document_id}, ok=NO_CONTENT)


def content_type_of(path: Path) -> str | None:
    """The content type of a file by its name; None when unknown (the service then looks at the bytes)."""
    suffix = path.suffix.lower()
    return CONTENT_TYPES.get(suffix) or mimetypes.guess_type(path.name)[0]


def file_body(
    data: bytes,
    file_name: str | None,
    content_type: str | None,
    metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The JSON body of a file upload: its bytes as base64, with its name, type and metadata if given."""
    body: dict[str, Any] = {"content": base64.b64encode(data).decode("ascii")}
    if content_type is None and file_name is not None:
        content_type = content_type_of(Path(file_name))
    if content_type is not None:
        body["contentType"] = content_type
    if file_name is not None:
        body["fileName"] = file_name
    if metadata is not None:
        body["metadata"] = dict(metadata)
    return body


def table_options(
    text_column: str | None,
    id_column: str | None,
    title_column: str | None,
    metadata_column: list[str] | None,
) -> dict[str, Any]:
    """The query parameters naming a CSV or JSON Lines file's columns (docs/formats.md)."""
    return query(
        textColumn=text_column, idColumn=id_column, titleColumn=title_column, metadataColumn=metadata_column
    )
