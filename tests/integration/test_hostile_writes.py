"""Writes are held to the rules reads rely on: whatever a write accepts, every read path serves; what
reads could not serve, or PostgreSQL could not store, is a 422 naming the field, the line or the limit;
a document id belongs to one source.

Through the real app (HTTP), the MCP SDK's client against the local server, and the CLI's write path
(`DocumentService.write_sources`), on the embedded PostgreSQL and the local model.
"""

from __future__ import annotations

import base64
import contextlib
import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.documents.cursors import encode_cursor
from retrieval_core.documents.models import SourceInput
from retrieval_core.documents.prepare import MAX_METADATA_BYTES, MAX_METADATA_DEPTH, MAX_METADATA_KEYS
from retrieval_core.exceptions import InvalidRequestError, StoreNotFoundError
from tests.integration.test_documents_api import STORES, doc_url, error_of

RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"
SEARCH = "/api/v1/chunks/similarity-search"


def nested(depth: int, leaf: Any = "bottom") -> Any:
    """Objects and arrays alternating, `depth` levels of them."""
    value = leaf
    for level in range(depth):
        value = {"d": value} if level % 2 else [value]
    return value


def nastiest_metadata() -> dict[str, Any]:
    """Metadata at every limit the write side allows at once: MAX_METADATA_KEYS keys, nested
    MAX_METADATA_DEPTH levels, close to MAX_METADATA_BYTES of JSON, and values that are hard to carry."""
    metadata: dict[str, Any] = {
        "": "",
        "deep": nested(MAX_METADATA_DEPTH - 1),
        "ключ 🔑\u200b": "ü\u0301 עברית \U0001f9ea \ufeff",
        'quote"back\\slash': "line\nbreak\ttab </script><b>%s{0}",
        "huge": 10**300,
        "negative": -(2**63) - 1,
        "tiny": 5e-324,
        "largest": 1.7976931348623157e308,
        "minus zero": -0.0,
        "none": None,
        "yes": True,
        "empty list": [],
        "empty object": {},
        "title": "a caller's title key",
        "contentType": "not/the-real-one",
        "score": "not a score",
    }
    for n in range(MAX_METADATA_KEYS - len(metadata)):
        metadata[f"k{n:02}"] = n
    size = len(json.dumps(metadata, ensure_ascii=False).encode())
    metadata["k00"] = "é" * ((MAX_METADATA_BYTES - size - 64) // 2)
    assert len(metadata) == MAX_METADATA_KEYS
    assert (
        MAX_METADATA_BYTES - 256
        < len(json.dumps(metadata, ensure_ascii=False).encode())
        <= MAX_METADATA_BYTES
    )
    return metadata


def test_the_nastiest_accepted_metadata_reads_back_through_every_read_path(
    client: TestClient, store: str
) -> None:
    metadata = nastiest_metadata()
    written = client.put(
        doc_url(store, "nasty"), json={"text": "Nasty metadata rides along.", "metadata": metadata}
    )
    assert written.status_code == 201, written.text
    record_metadata = {k: v for k, v in metadata.items() if k not in ("title", "contentType", "k62", "k63")}
    record = {
        "_id": "nasty-record",
        "title": "T",
        "text": "A record with nasty metadata.",
        "metadata": record_metadata,
    }
    put = client.put(
        doc_url(store, "nasty.jsonl"),
        json={"content": base64.b64encode(json.dumps(record).encode()).decode(), "fileName": "nasty.jsonl"},
    )
    assert put.status_code == 201, put.text

    got = client.get(doc_url(store, "nasty"))
    assert got.status_code == 200 and read_back(got.json()["metadata"]) == metadata
    record_got = client.get(doc_url(store, "nasty-record"))
    assert record_got.status_code == 200 and record_got.json()["metadata"]["deep"] == metadata["deep"]
    listed = client.get(f"{STORES}/{store}/documents")
    assert listed.status_code == 200 and len(listed.json()["documents"]) == 2

    query = {"query": "nasty metadata", "grade": 0.0, "store": store}
    for body in (query, {**query, "useHybrid": True}, {**query, "returnFormatted": True}):
        answer = client.post(RETRIEVE, json=body)
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        assert {r["metadata"]["documentId"] for r in results} == {"nasty", "nasty-record"}
        assert (
            next(r for r in results if r["metadata"]["documentId"] == "nasty")["metadata"]["deep"]
            == metadata["deep"]
        )
    batch = client.post(BATCH, json={"requests": [query, {**query, "useHybrid": True}]})
    assert batch.status_code == 200 and [i["status"] for i in batch.json()["results"]] == [200, 200]
    dimension = client.get(f"{STORES}/{store}").json()["dimension"]
    similar = client.post(SEARCH, json={"queryEmbedding": [1.0] * dimension, "store": store, "topK": 5})
    assert similar.status_code == 200 and len(similar.json()["results"]) == 2, similar.text

    found = mcp_memory_search(store, "nasty metadata")
    assert {r["documentId"] for r in found["results"]} == {"nasty", "nasty-record"}
    assert read_back(next(r for r in found["results"] if r["documentId"] == "nasty")["metadata"]) == metadata


def read_back(metadata: dict[str, Any]) -> dict[str, Any]:
    """`metadata` as written: jsonb keeps numbers as numeric, so 1.7976931348623157e308 comes back written
    out in full, as an integer of the same decimal value."""
    return {**metadata, "largest": float(metadata["largest"])}


def mcp_memory_search(store: str, query: str) -> dict[str, Any]:
    """memory_search through the MCP SDK's client against the local server (no API keys: open grant)."""
    pytest.importorskip("mcp")
    from tests.integration.test_mcp import call, run, serve, session
    from tests.servers import free_port

    port = free_port()
    stop = serve(port)
    found: dict[str, Any] = {}
    try:

        async def search() -> None:
            async with session(f"http://127.0.0.1:{port}/mcp", "unused") as client:
                found.update(
                    await call(client, "memory_search", {"query": query, "store": store, "limit": 10})
                )

        run(search)
    finally:
        stop()
    return found


def jsonl(*records: Any) -> dict[str, str]:
    lines = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records)
    return {"content": base64.b64encode(lines.encode()).decode(), "contentType": "application/x-ndjson"}


def csv_body(text: str) -> dict[str, str]:
    return {"content": base64.b64encode(text.encode()).decode(), "contentType": "text/csv"}


def test_records_of_unnamed_columns_beyond_the_metadata_rules_load_within_them(
    client: TestClient, store: str
) -> None:
    """A long cell, a long title, more keys or columns than a document holds: the record loads, its
    metadata cut to fit (docs/formats.md, "Tables"); a named metadata column over the rules is a 422."""
    bodies = {
        "big": jsonl({"text": "x", "big": "y" * 500_000, "small": 1}),
        "title": jsonl({"text": "x", "title": "t " * 10_000}),
        "keys": jsonl({"text": "x", **{f"c{n:02}": n for n in range(MAX_METADATA_KEYS)}}),
        "columns": csv_body("text," + ",".join(f"c{n:03}" for n in range(100)) + "\nx" + ",1" * 100 + "\n"),
    }
    for name, body in bodies.items():
        response = client.put(doc_url(store, name), json=body)
        assert response.status_code == 201, (name, response.text)
    documents = {d["documentId"]: d for d in client.get(f"{STORES}/{store}/documents").json()["documents"]}
    assert documents["big#1"]["metadata"]["small"] == 1 and "big" not in documents["big#1"]["metadata"]
    assert 0 < len(documents["title#1"]["title"]) <= 512
    assert (
        len(documents["keys#1"]["metadata"]) <= MAX_METADATA_KEYS and "c60" in documents["keys#1"]["metadata"]
    )
    assert "c060" in documents["columns#1"]["metadata"] and "c061" not in documents["columns#1"]["metadata"]

    named = doc_url(store, "named") + "?metadataColumn=big"
    refused = client.put(named, json=jsonl({"text": "x", "big": "y" * 20_000}))
    assert refused.status_code == 422, refused.text
    assert error_of(refused)["message"].startswith("records[1].metadata: at most 16384 bytes of JSON")


@pytest.mark.parametrize(
    ("body", "field", "kind"),
    [
        ({"text": "x", "metadata": {"m": nested(MAX_METADATA_DEPTH)}}, "metadata", "too_deep"),
        ({"text": "x", "metadata": {"m": nested(256)}}, "metadata", "too_deep"),
        (jsonl({"text": "x", "metadata": {"m": nested(256)}}), "records[1].metadata", "too_deep"),
        (jsonl({"text": "x", "m": nested(MAX_METADATA_DEPTH)}), "records[1].metadata", "too_deep"),
        (jsonl({"text": "x", "documentId": "d"}), "records[1].metadata.documentId", "reserved_key"),
        (
            jsonl({"text": "x", "metadata": {"chunkIndex": 3}}),
            "records[1].metadata.chunkIndex",
            "reserved_key",
        ),
        (csv_body("text,chunkIndex\nhello,1\n"), "records[1].metadata.chunkIndex", "reserved_key"),
    ],
    ids=[
        "caller-depth-33",
        "caller-depth-256",
        "record-depth-256",
        "record-field-depth-33",
        "record-documentId",
        "record-chunkIndex",
        "csv-chunkIndex-column",
    ],
)
def test_metadata_beyond_the_rules_is_a_422_naming_the_record_and_limit(
    client: TestClient, store: str, body: dict[str, Any], field: str, kind: str
) -> None:
    response = client.put(doc_url(store, "f"), json=body)
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "validation_error" and error["message"].startswith(f"{field}:"), error
    assert error["details"]["errors"][0]["type"] == kind
    assert client.get(f"{STORES}/{store}/documents").json()["documents"] == []
    assert client.post(RETRIEVE, json={"query": "x", "grade": 0.0, "store": store}).status_code == 200


def test_the_cli_and_s3_write_path_holds_records_to_the_same_rules(service: Any) -> None:
    from retrieval_core.container import get_document_service
    from retrieval_core.documents.models import StoreDefinition

    documents = get_document_service()
    name = f"hostile-cli-{uuid.uuid4().hex[:6]}"
    deep = json.dumps({"text": "x", "metadata": {"m": nested(256)}}).encode()
    try:
        [result] = documents.write_sources(
            name, [SourceInput("deep.jsonl", deep, "application/x-ndjson")], create=StoreDefinition()
        )
        assert isinstance(result, InvalidRequestError) and result.message.startswith("records[1].metadata:")
        with pytest.raises(InvalidRequestError, match="at most 32 levels"):
            documents.put_source_metadata(name, "deep.jsonl", {"m": nested(40)}, create=StoreDefinition())
    finally:
        with contextlib.suppress(StoreNotFoundError):  # never created: every write was refused
            documents.delete_store(name)


CHARSETS = ["rot13", "zlib", "base64", "hex", "uu", "bz2", "quopri", "undefined", "x-no-such"]


@pytest.mark.parametrize("charset", CHARSETS)
@pytest.mark.parametrize("content_type", ["text/plain", "text/markdown", "text/csv", "text/html"])
def test_a_charset_that_is_no_text_encoding_is_a_422_naming_it(
    client: TestClient, store: str, charset: str, content_type: str
) -> None:
    data = b"text\nhello\n" if content_type == "text/csv" else b"hello"
    body = {"content": base64.b64encode(data).decode(), "contentType": f"{content_type}; charset={charset}"}
    response = client.put(doc_url(store, "c"), json=body)
    assert response.status_code == 422, response.text
    assert (
        error_of(response)["code"] == "unreadable_document"
        and f"'{charset}'" in error_of(response)["message"]
    )


@pytest.mark.parametrize("charset", CHARSETS)
def test_an_html_meta_charset_that_is_no_text_encoding_is_a_422_naming_it(
    client: TestClient, store: str, charset: str
) -> None:
    page = f'<html><head><meta charset="{charset}"><title>T</title></head><body><p>Hi</p></body></html>'
    response = client.put(
        doc_url(store, "p.html"), json={"content": base64.b64encode(page.encode()).decode()}
    )
    assert response.status_code == 422, response.text
    assert f"'{charset}'" in error_of(response)["message"]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"text": "x", "v": ' + "[" * 2000 + "]" * 2000 + "}", "line 2: nested too deep"),
        ('{"text": "x", "v": NaN}', "line 2: not valid JSON (NaN"),
        ('{"text": "x", "v": Infinity}', "line 2: not valid JSON (Infinity"),
        ('{"text": "x", "v": -Infinity}', "line 2: not valid JSON (-Infinity"),
        ('{"text": "x", "v": 1e400}', "line 2: not valid JSON (1e400 is beyond"),
        ('{"text": "x", "v": {"w": ["a\\u0000b"]}}', "line 2: field 'v.w[0]' holds a NUL"),
        ('{"text": "x", "v": "\\ud800"}', "line 2: field 'v' holds a NUL (\\u0000) or a lone surrogate"),
        ('{"text": "x\\udfff"}', "line 2: field 'text' holds"),
        ('{"text": "x", "k\\u0000": 1}', "line 2: field 'k\\x00' has a key"),
    ],
    ids=[
        "nesting-2000",
        "nan",
        "infinity",
        "minus-infinity",
        "1e400",
        "nul",
        "surrogate",
        "text-surrogate",
        "nul-key",
    ],
)
def test_json_lines_jsonb_cannot_hold_is_a_422_naming_the_line_and_field(
    client: TestClient, store: str, line: str, said: str
) -> None:
    response = client.put(doc_url(store, "r.jsonl"), json=jsonl({"text": "fine"}, line))
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "unreadable_document" and said in error["message"], error


def test_text_decoded_to_a_lone_surrogate_is_a_422(client: TestClient, store: str) -> None:
    body = {
        "content": base64.b64encode(b"hello \\ud800 world").decode(),
        "contentType": "text/plain; charset=unicode_escape",
    }
    response = client.put(doc_url(store, "u"), json=body)
    assert response.status_code == 422, response.text
    assert error_of(response)["message"].startswith("document.text: is not valid Unicode")


@pytest.mark.parametrize("key", ["\x00", "a\x00b", "\udc80"])
def test_a_list_cursor_that_decodes_to_no_key_is_a_422(client: TestClient, store: str, key: str) -> None:
    cursor = base64.urlsafe_b64encode(key.encode("utf-8", "surrogatepass")).decode().rstrip("=")
    for path in (f"{STORES}/{store}/documents", STORES):
        response = client.get(path, params={"cursor": cursor})
        assert response.status_code == 422 and error_of(response)["code"] == "invalid_cursor", response.text
    assert client.get(STORES, params={"cursor": encode_cursor("a")}).status_code == 200


@pytest.mark.parametrize("escaped", ["%FF", "%FE", "%C0%AF", "a%E9b", "%ED%A0%80"])
@pytest.mark.parametrize("method", ["PUT", "GET", "DELETE"])
def test_an_id_that_is_not_utf8_once_percent_decoded_is_a_422(
    client: TestClient, store: str, escaped: str, method: str
) -> None:
    assert (
        client.put(
            doc_url(store, "\ufffd"), json={"text": "The replacement character's own document."}
        ).status_code
        == 201
    )
    body = {"text": "Another document."} if method == "PUT" else None
    response = client.request(method, f"{STORES}/{store}/documents/{escaped}", json=body)
    assert response.status_code == 422, response.text
    assert error_of(response)["message"].startswith("path: must be UTF-8 once percent-decoded")
    listed = client.get(f"{STORES}/{store}/documents").json()["documents"]
    assert [(d["documentId"], d["title"]) for d in listed] == [("\ufffd", "")]
    assert client.get(doc_url(store, "\ufffd")).json()["chunkCount"] == 1


def rows(*lines: str) -> dict[str, str]:
    return csv_body("\n".join(lines) + "\n")


def test_a_document_id_belongs_to_one_source(client: TestClient, store: str) -> None:
    assert client.put(doc_url(store, "f.csv"), json=rows("text", "first", "second")).status_code == 201
    assert client.put(doc_url(store, "g.csv"), json=rows("id,text", "g1,gee")).status_code == 201

    def refused(document_id: str, body: dict[str, Any], owned: str, owner: str) -> None:
        response = client.put(doc_url(store, document_id), json=body)
        assert response.status_code == 409, response.text
        error = error_of(response)
        assert error["code"] == "document_of_another_source", error
        assert error["details"] == {"documentId": owned, "source": owner}
        assert f"'{owner}'" in error["message"]

    # A plain document over a record of f.csv; a record of g.csv taking one of f.csv's ids, or its source id.
    refused("f.csv#1", {"text": "overwrite"}, "f.csv#1", "f.csv")
    refused("g.csv", rows("id,text", "g1,gee", "f.csv#2,moved"), "f.csv#2", "f.csv")
    refused("g.csv", rows("id,text", "g1,gee", "f.csv,named like a source"), "f.csv", "f.csv")
    # A row source named like another source's document.
    refused("g.csv#x", rows("id,text", "g1,taken"), "g1", "g.csv")
    # A source whose id is another source's record.
    refused("f.csv#2", rows("text", "new"), "f.csv#2", "f.csv")

    listed = {
        d["documentId"]: d["source"] for d in client.get(f"{STORES}/{store}/documents").json()["documents"]
    }
    assert listed == {"f.csv#1": "f.csv", "f.csv#2": "f.csv", "g1": "g.csv"}
    assert (
        client.get(doc_url(store, "f.csv#1")).json()["contentSha256"]
        != client.get(doc_url(store, "f.csv#2")).json()["contentSha256"]
    )
    # The owner may rewrite its records; as documented, DELETE of a record's id deletes that record.
    assert (
        client.put(doc_url(store, "f.csv"), json=rows("text", "first", "second", "third")).status_code == 200
    )
    assert client.delete(doc_url(store, "f.csv#3")).status_code == 204
    assert client.get(doc_url(store, "f.csv#1")).status_code == 200


def test_memory_delete_deletes_a_memory_never_another_sources_records(client: TestClient, store: str) -> None:
    pytest.importorskip("mcp")
    from tests.integration.test_mcp import call, run, serve, session, tool_error
    from tests.servers import free_port

    assert client.put(doc_url(store, "f.csv"), json=rows("text", "first", "second")).status_code == 201
    port = free_port()
    stop = serve(port)
    try:

        async def scenario() -> None:
            async with session(f"http://127.0.0.1:{port}/mcp", "unused") as mcp:
                record = await tool_error(mcp, "memory_delete", {"id": "f.csv#1", "store": store})
                assert record["code"] == "document_of_another_source" and record["status"] == 409
                assert record["details"] == {"documentId": "f.csv#1", "source": "f.csv"}
                source = await tool_error(mcp, "memory_delete", {"id": "f.csv", "store": store})
                assert source["code"] == "document_not_found"
                taken = await tool_error(
                    mcp, "memory_store", {"id": "f.csv#2", "text": "over it", "store": store}
                )
                assert taken["code"] == "document_of_another_source"
                await call(
                    mcp, "memory_store", {"id": "note", "text": "A memory of its own.", "store": store}
                )
                assert (await call(mcp, "memory_delete", {"id": "note", "store": store}))["deleted"] is True

        run(scenario)
    finally:
        stop()
    listed = [d["documentId"] for d in client.get(f"{STORES}/{store}/documents").json()["documents"]]
    assert listed == ["f.csv#1", "f.csv#2"]
