"""No input makes a write route answer 5xx: random bodies, files, content types, metadata and ids at the
document PUT (every content type), the store PUT and the MCP write tools, through the real app on the
embedded PostgreSQL and the local model. A refusal is a 4xx; nothing is a 500.

Example counts are bounded so the file runs in `make test` (about a minute on the 2-core CI machine).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import Counter
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_documents_api import STORES

# Every character, lone surrogates and NUL included: JSON can carry them all as escapes.
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=[]), max_size=40)
CHARSETS = [
    "utf-8",
    "latin-1",
    "utf-16",
    "utf-7",
    "unicode_escape",
    "punycode",
    "idna",
    "rot13",
    "base64",
    "zlib",
    "hex",
    "uu",
    "bz2",
    "quopri",
    "undefined",
    "nope",
    "",
    "utf-8\x00",
    "\ud800",
]
CONTENT_TYPES = [
    "text/plain",
    "text/markdown",
    "text/html",
    "text/csv",
    "application/x-ndjson",
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/octet-stream",
    "image/png",
]
SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**400), max_value=10**400) | st.floats() | ANY_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3),
    max_leaves=12,
) | st.integers(min_value=0, max_value=900).map(nested)  # json.dumps itself stops near 1,000
METADATA = st.dictionaries(
    ANY_TEXT | st.sampled_from(["documentId", "chunkIndex", "title", ""]), JSON_VALUES, max_size=6
) | st.integers(min_value=60, max_value=80).map(lambda n: {f"k{i}": i for i in range(n)})


def json_text(value: Any) -> str:
    """JSON with NaN and Infinity as Python writes them, and lone surrogates escaped."""
    return json.dumps(value, allow_nan=True)


@st.composite
def files(draw: st.DrawFn) -> bytes:
    """Bytes of a file as a client might send it: a JSON Lines, CSV, HTML or Markdown text, or anything."""
    kind = draw(st.sampled_from(["jsonl", "csv", "html", "markdown", "binary"]))
    if kind == "jsonl":
        records = draw(
            st.lists(
                st.dictionaries(ANY_TEXT | st.sampled_from(["text", "_id", "metadata"]), JSON_VALUES),
                max_size=4,
            )
        )
        lines = [json_text({"text": "some text", **r}) for r in records]
        lines += draw(
            st.lists(st.sampled_from(['{"text": "x", "v": NaN}', "[" * 3000, '{"text": 1e999}']), max_size=1)
        )
        return "\n".join(lines).encode("utf-8", "surrogatepass")
    if kind == "csv":
        header = draw(
            st.lists(ANY_TEXT | st.sampled_from(["text", "id", "chunkIndex"]), min_size=1, max_size=6)
        )
        rows = draw(st.lists(st.lists(ANY_TEXT, max_size=7), max_size=4))
        text = "\n".join(",".join(r) for r in [["text", *header], *rows])
        return text.encode("utf-8", "surrogatepass")
    if kind == "html":
        charset = draw(st.sampled_from(CHARSETS))
        body = draw(ANY_TEXT)
        return f'<html><head><meta charset="{charset}"></head><body><p>{body}</p></body></html>'.encode(
            "utf-8", "surrogatepass"
        )
    if kind == "markdown":
        return ("# " + draw(ANY_TEXT) + "\n\n" + draw(ANY_TEXT)).encode("utf-8", "surrogatepass")
    return draw(st.binary(max_size=300))


CONTENT_TYPE = st.none() | st.builds(
    lambda bare, charset: bare if charset is None else f"{bare}; charset={charset}",
    st.sampled_from(CONTENT_TYPES) | ANY_TEXT,
    st.none() | st.sampled_from(CHARSETS),
)
FILE_FIELDS = {
    "contentType": CONTENT_TYPE,
    "fileName": ANY_TEXT | st.sampled_from(["f.csv", "f.jsonl", "f.pdf", "f.docx", "f.html", "f.md"]),
    "metadata": METADATA,
}
DOCUMENT_BODIES = st.one_of(
    st.fixed_dictionaries({"text": ANY_TEXT}, optional=FILE_FIELDS),
    st.fixed_dictionaries(
        {"content": files().map(lambda data: base64.b64encode(data).decode())}, optional=FILE_FIELDS
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "text": JSON_VALUES,
            "content": ANY_TEXT | JSON_VALUES,
            **FILE_FIELDS,
            "metadata": JSON_VALUES,
        },
    ),
)
IDS = ANY_TEXT.map(lambda text: quote(text.encode("utf-8", "surrogatepass"), safe="")) | st.binary(
    min_size=1, max_size=12
).map(lambda data: "".join(f"%{b:02X}" for b in data))


def put(client: TestClient, path: str, body: Any) -> Any:
    return client.put(path, content=json_text(body), headers={"content-type": "application/json"})


def test_document_puts_of_random_files_bodies_and_ids_answer_no_5xx(client: TestClient, store: str) -> None:
    @settings(SETTINGS, max_examples=150)
    @given(body=DOCUMENT_BODIES, document_id=IDS)
    def write(body: dict[str, Any], document_id: str) -> None:
        response = put(client, f"{STORES}/{store}/documents/{document_id or 'x'}", body)
        assert response.status_code < 500, (body, document_id, response.text)
        statuses[response.status_code] += 1

    statuses: Counter[int] = Counter()
    write()
    print(sorted(statuses.items()))
    # Both written documents and refusals were among them (422s of every kind, 415s).
    assert statuses[201] + statuses[200] > 0 and statuses[422] > 0, statuses
    # The store still answers every read.
    assert client.get(f"{STORES}/{store}/documents").status_code == 200
    assert (
        client.post("/api/v1/rag/retrieve", json={"query": "text", "grade": 0.0, "store": store}).status_code
        == 200
    )


def test_random_ids_at_every_document_route_answer_no_5xx(client: TestClient, store: str) -> None:
    @settings(SETTINGS, max_examples=60)
    @given(document_id=IDS, method=st.sampled_from(["GET", "DELETE", "PUT"]))
    def call(document_id: str, method: str) -> None:
        body = json_text({"text": "A document."}) if method == "PUT" else None
        response = client.request(
            method,
            f"{STORES}/{store}/documents/{document_id or 'x'}",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert response.status_code < 500, (document_id, response.text)

    call()


STORE_BODIES = (
    st.fixed_dictionaries(
        {},
        optional={
            "displayName": ANY_TEXT | JSON_VALUES,
            "storage": st.sampled_from(["vector", "halfvec", "other"]) | JSON_VALUES,
            "allowedMetadataKeys": st.none() | st.lists(ANY_TEXT, max_size=4) | JSON_VALUES,
            "textSearch": st.sampled_from(["english", "simple", "german", "pg_catalog.english", "nope"])
            | ANY_TEXT,
            "source": st.dictionaries(
                ANY_TEXT | st.sampled_from(["table", "columns", "preset"]), JSON_VALUES, max_size=3
            ),
        },
    )
    | JSON_VALUES
)


def test_store_puts_of_random_bodies_answer_no_5xx(client: TestClient) -> None:
    made: set[str] = set()

    @settings(SETTINGS, max_examples=80)
    @given(body=STORE_BODIES, name=st.sampled_from([f"fuzz-store-{uuid.uuid4().hex[:6]}", "sample"]) | IDS)
    def write(body: Any, name: str) -> None:
        if name == "sample":  # never redefine the shared corpus' store
            return
        response = put(client, f"{STORES}/{name}", body)
        assert response.status_code < 500, (name, body, response.text)
        if response.status_code in (200, 201):
            made.add(response.json()["name"])

    try:
        write()
    finally:
        for name in made:
            client.delete(f"{STORES}/{name}")


MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
    "content-type": "application/json",
}
MCP_CALLS = st.one_of(
    st.fixed_dictionaries(
        {"name": st.just("memory_store")},
        optional={
            "arguments": st.fixed_dictionaries(
                {},
                optional={
                    "text": ANY_TEXT | JSON_VALUES,
                    "metadata": METADATA | JSON_VALUES,
                    "id": ANY_TEXT | JSON_VALUES,
                },
            )
        },
    ),
    st.fixed_dictionaries(
        {"name": st.just("memory_delete")},
        optional={"arguments": st.fixed_dictionaries({}, optional={"id": ANY_TEXT | JSON_VALUES})},
    ),
    st.fixed_dictionaries(
        {"name": st.sampled_from(["memory_store", "memory_delete"]), "arguments": JSON_VALUES}
    ),
)


def test_mcp_write_tools_with_random_arguments_answer_no_5xx(client: TestClient, store: str) -> None:
    pytest.importorskip("mcp")

    @settings(SETTINGS, max_examples=100)
    @given(params=MCP_CALLS)
    def call(params: dict[str, Any]) -> None:
        arguments = params.get("arguments")
        if isinstance(arguments, dict):
            arguments = {**arguments, "store": store}
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {**params, "arguments": arguments},
        }
        response = client.post("/mcp", content=json_text(body), headers=MCP_HEADERS)
        assert response.status_code < 500, (params, response.text)
        answer = response.json()
        error = answer.get("error") or {}
        assert error.get("code") != -32603, (params, answer)  # JSON-RPC internal error
        result = answer.get("result") or {}
        if result.get("isError"):
            assert result["structuredContent"]["error"]["status"] < 500, (params, result)

    call()
