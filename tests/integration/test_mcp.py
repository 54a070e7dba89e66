"""/mcp driven by the official MCP SDK's client over Streamable HTTP, against the local server.

The app runs under uvicorn on 127.0.0.1 with scoped API keys (API_KEYS), on the embedded PostgreSQL and
the local model; each test opens `ClientSession`s through `streamable_http_client`, as an agent would.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

# The `mcp` extra; `make check-min-deps` runs without it (pyproject.toml says why).
pytest.importorskip("mcp")

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from retrieval_core.api.app import create_app
from retrieval_core.api.mcp.tools import memory_id
from retrieval_core.documents.models import StoreDefinition
from tests.fakes.gemini import FakeGemini
from tests.files import pdf_bytes
from tests.integration.knowledge_support import GEMINI_KEY, HVAC_STORE, knowledge_env, stock_fake
from tests.integration.test_grants import digest
from tests.servers import MotoServer, free_port

MEMORY = f"mcp-memory-{uuid.uuid4().hex[:6]}"
ALLOWED = ["project", "topic", "year"]

READER = "rk_mcpr_" + "a1" * 16
WRITER = "rk_mcpw_" + "b2" * 16  # read and write, on MEMORY only
SAMPLE_WRITER = "rk_mcps_" + "c3" * 16  # read and write, on sample only
API_KEYS = [
    {"name": "mcp-reader", "sha256": digest(READER), "stores": ["*"], "scopes": ["read"]},
    {"name": "mcp-writer", "sha256": digest(WRITER), "stores": [MEMORY], "scopes": ["read", "write"]},
    {
        "name": "mcp-sample",
        "sha256": digest(SAMPLE_WRITER),
        "stores": ["sample"],
        "scopes": ["read", "write"],
    },
]


@pytest.fixture(scope="module")
def memory_store(service: Any, sample_store: Any) -> Iterator[str]:
    """A store whose definition allows three metadata keys; dropped after the module."""
    from retrieval_core.container import get_document_service

    documents = get_document_service()
    documents.put_store(
        MEMORY, StoreDefinition(display_name="MCP memory", allowed_metadata_keys=tuple(ALLOWED))
    )
    yield MEMORY
    get_document_service().delete_store(MEMORY)


def serve(port: int) -> Callable[[], None]:
    """The full app under uvicorn on 127.0.0.1:`port`, as `retrieval serve` runs it; returns its stop."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return stop


@pytest.fixture()
def url(memory_store: str, configure: Any) -> Iterator[str]:
    configure(API_KEYS=json.dumps(API_KEYS))
    port = free_port()
    stop = serve(port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop()


@asynccontextmanager
async def session(url: str, key: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session carrying `key`."""
    async with (
        httpx2.AsyncClient(headers={"x-api-key": key}) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def run(test: Callable[[], Awaitable[None]]) -> None:
    anyio.run(test)


async def call(client: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A successful tool call's structured result (its text content is the same JSON)."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == result.structured_content
    structured: dict[str, Any] = result.structured_content
    return structured


async def tool_error(client: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A failed tool call's error: isError, a text naming the code, the HTTP API's error body."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    error: dict[str, Any] = result.structured_content["error"]
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == f"{error['code']}: {error['message']}"
    return error


def test_initialize_names_the_server_and_tools_are_listed_by_scope_with_schemas(url: str) -> None:
    async def test() -> None:
        async with session(url, WRITER) as writer:
            tools = {t.name: t for t in (await writer.list_tools()).tools}
            assert set(tools) == {
                "memory_search",
                "memory_store",
                "memory_delete",
                "retrieve",
                "answer",
                "list_stores",
            }
            search = tools["memory_search"].input_schema
            assert search["required"] == ["query"]
            assert set(search["properties"]) == {"query", "limit", "filter", "store"}
            assert search["properties"]["limit"]["maximum"] == 50
            assert search["additionalProperties"] is False
            assert set(tools["memory_store"].input_schema["properties"]) == {
                "text",
                "metadata",
                "id",
                "store",
            }
            assert {"query", "grade", "useHybrid", "rerank", "docIds"} <= set(
                tools["retrieve"].input_schema["properties"]
            )
            assert all(t.description and len(t.description) > 60 for t in tools.values())
            assert tools["memory_delete"].annotations is not None
            assert tools["memory_delete"].annotations.destructive_hint is True
            assert tools["memory_search"].annotations is not None
            assert tools["memory_search"].annotations.read_only_hint is True
        async with session(url, READER) as reader:
            # A read-only key is not offered the write tools.
            assert {t.name for t in (await reader.list_tools()).tools} == {
                "memory_search",
                "retrieve",
                "answer",
                "list_stores",
            }

    run(test)


def test_initialize_reports_the_server_and_json_responses_without_a_session(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "curl", "version": "0"},
        },
    }
    headers = {"x-api-key": READER, "accept": "application/json, text/event-stream"}
    answer = httpx.post(url, json=body, headers=headers, timeout=30)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in answer.headers  # stateless: nothing to resume
    result = answer.json()["result"]
    assert result["serverInfo"]["name"] == "retrieval-service"
    assert result["capabilities"]["tools"] is not None
    # A stateless server keeps no stream open for the server to speak first.
    assert httpx.get(url, headers=headers, timeout=30).status_code == 405


def test_store_search_and_delete_a_memory(url: str) -> None:
    text = "The staging database is restored from the nightly snapshot every Sunday at 03:00 UTC."

    async def test() -> None:
        async with session(url, WRITER) as client:
            stored = await call(
                client,
                "memory_store",
                {"text": text, "metadata": {"project": "atlas", "year": 2024}, "store": MEMORY},
            )
            assert stored == {
                "id": memory_id(text),
                "store": MEMORY,
                "status": "created",
                "chunkCount": 1,
                "duplicateOf": [],
            }
            # A retry without an id lands on the same memory: nothing duplicated, nothing re-embedded.
            again = await call(
                client,
                "memory_store",
                {"text": text, "metadata": {"project": "atlas", "year": 2024}, "store": MEMORY},
            )
            assert again["id"] == stored["id"] and again["status"] == "unchanged"

            found = await call(
                client, "memory_search", {"query": "When is staging restored?", "limit": 3, "store": MEMORY}
            )
            assert found["count"] == len(found["results"]) == 1
            (hit,) = found["results"]
            assert hit["id"] == f"{stored['id']}#0" and hit["content"] == text
            assert (hit["documentId"], hit["chunkIndex"]) == (stored["id"], 0) and "page" not in hit
            assert hit["metadata"] == {"project": "atlas", "year": 2024, "contentType": "text/plain"}
            assert 0.4 < hit["similarity"] <= 1.0

            # The string filter finds the typed year; another year finds nothing.
            by_string = await call(
                client,
                "memory_search",
                {"query": "staging restore", "filter": {"year": "2024", "project": "atlas"}, "store": MEMORY},
            )
            assert [r["documentId"] for r in by_string["results"]] == [stored["id"]]
            other_year = await call(
                client,
                "memory_search",
                {"query": "staging restore", "filter": {"year": "2023"}, "store": MEMORY},
            )
            assert other_year["results"] == []

            # With an id: an upsert of that memory.
            await call(client, "memory_store", {"text": "Old note.", "id": "notes/1", "store": MEMORY})
            replaced = await call(
                client, "memory_store", {"text": "New note about rotas.", "id": "notes/1", "store": MEMORY}
            )
            assert replaced == {
                "id": "notes/1",
                "store": MEMORY,
                "status": "updated",
                "chunkCount": 1,
                "duplicateOf": [],
            }
            notes = await call(client, "memory_search", {"query": "note", "limit": 10, "store": MEMORY})
            assert [r["content"] for r in notes["results"] if r["documentId"] == "notes/1"] == [
                "New note about rotas."
            ]

            for memory in (stored["id"], "notes/1"):
                deleted = await call(client, "memory_delete", {"id": memory, "store": MEMORY})
                assert deleted == {"id": memory, "store": MEMORY, "deleted": True}
            gone = await call(
                client, "memory_search", {"query": "When is staging restored?", "store": MEMORY}
            )
            assert gone["results"] == []
            missing = await tool_error(client, "memory_delete", {"id": stored["id"], "store": MEMORY})
            assert missing["code"] == "document_not_found" and missing["status"] == 404

    run(test)


def test_search_results_are_chunks_with_their_own_ids_index_and_page(url: str) -> None:
    """A long memory and a two-page PDF: each chunk is one result with its own id, as on the HTTP API."""
    pages = ["Boiler rota: the night shift bleeds the radiators.", "Boiler rota: Sunday checks the pump."]
    base = url.removesuffix("/mcp")
    put = httpx.put(
        f"{base}/api/v1/stores/{MEMORY}/documents/rota.pdf",
        json={"content": base64.b64encode(pdf_bytes(pages)).decode(), "contentType": "application/pdf"},
        headers={"x-api-key": WRITER},
    )
    assert put.status_code == 201, put.text
    long_text = " ".join(
        f"Boiler rota note {n}: the pump and the radiators are checked weekly." for n in range(40)
    )

    async def test() -> None:
        async with session(url, WRITER) as client:
            stored = await call(
                client, "memory_store", {"text": long_text, "id": "rota-notes", "store": MEMORY}
            )
            assert stored["chunkCount"] > 1
            found = await call(
                client, "memory_search", {"query": "boiler rota", "limit": 50, "store": MEMORY}
            )
            ids = [r["id"] for r in found["results"]]
            assert len(ids) == len(set(ids)) == found["count"]
            notes = [r for r in found["results"] if r["documentId"] == "rota-notes"]
            assert sorted(r["chunkIndex"] for r in notes) == list(range(stored["chunkCount"]))
            assert all(r["id"] == f"rota-notes#{r['chunkIndex']}" for r in notes)
            pdf = {r["page"]: r for r in found["results"] if r["documentId"] == "rota.pdf"}
            assert sorted(pdf) == [1, 2] and pdf[2]["content"] == pages[1]
            for memory in ("rota-notes", "rota.pdf"):
                await call(client, "memory_delete", {"id": memory, "store": MEMORY})

    run(test)


def test_each_memory_stored_leaves_its_outcome_and_the_same_memory_again_is_unchanged(url: str) -> None:
    from retrieval_core.container import get_document_service

    async def test() -> None:
        async with session(url, WRITER) as client:
            blank = await tool_error(
                client, "memory_store", {"text": "   ", "id": "notes/blank", "store": MEMORY}
            )
            assert blank["code"] == "empty_document"
            kept = {"text": "The rota changes on Mondays.", "id": "notes/rota", "store": MEMORY}
            assert (await call(client, "memory_store", kept))["status"] == "created"
            assert (await call(client, "memory_store", kept))["status"] == "unchanged"

    run(test)
    documents = get_document_service()
    skipped, _, counts = documents.document_statuses(MEMORY, "skipped", prefix="notes/")
    assert [(r.document_id, r.code, r.written_by) for r in skipped] == [
        ("notes/blank", "empty_document", "mcp-writer")
    ]
    ok, _, _ = documents.document_statuses(MEMORY, "ok", prefix="notes/rota")
    assert [(r.document_id, r.change) for r in ok] == [("notes/rota", "unchanged")]
    assert counts.skipped >= 1 and counts.unchanged >= 1
    documents.delete_source(MEMORY, "notes/rota")


def test_tool_errors_name_the_missing_scope_the_store_the_field_and_the_allowed_keys(url: str) -> None:
    async def test() -> None:
        async with session(url, READER) as reader:
            forbidden = await tool_error(reader, "memory_store", {"text": "x", "store": MEMORY})
            assert forbidden["code"] == "forbidden" and forbidden["details"] == {"requiredScope": "write"}
            assert forbidden["status"] == 403
            forbidden = await tool_error(reader, "memory_delete", {"id": "x", "store": MEMORY})
            assert forbidden["code"] == "forbidden"
        async with session(url, WRITER) as writer:
            # A store outside the key's grant answers as an unknown one.
            outside = await tool_error(writer, "memory_store", {"text": "x", "store": "sample"})
            unknown = await tool_error(writer, "memory_store", {"text": "x", "store": "no-such-store"})
            assert outside["code"] == unknown["code"] == "store_not_found"
            assert outside["details"] == {"store": "sample"}
            outside = await tool_error(writer, "memory_search", {"query": "pods", "store": "sample"})
            assert outside["code"] == "store_not_found"

            key = await tool_error(
                writer, "memory_store", {"text": "x", "metadata": {"owner": "me"}, "store": MEMORY}
            )
            assert key["code"] == "metadata_key_not_allowed"
            assert (
                key["message"] == "metadata: key 'owner' is not allowed; allowed keys: project, topic, year"
            )
            assert key["details"]["allowedKeys"] == ALLOWED
            key = await tool_error(
                writer, "memory_search", {"query": "x", "filter": {"owner": "me"}, "store": MEMORY}
            )
            assert key["message"] == "filter: key 'owner' is not allowed; allowed keys: project, topic, year"

            invalid = await tool_error(writer, "memory_search", {"query": "x", "limit": 0})
            assert invalid["code"] == "validation_error" and invalid["message"].startswith("limit:")
            invalid = await tool_error(writer, "memory_store", {"text": "x", "colour": "red"})
            assert invalid["details"]["errors"][0]["field"] == "colour"
            # An id a URL would read as a step up the path is refused, as on every other way in.
            climbing = await tool_error(
                writer, "memory_store", {"text": "x", "id": "../sample", "store": MEMORY}
            )
            assert climbing["code"] == "validation_error" and climbing["status"] == 422
            assert climbing["details"]["errors"][0]["type"] == "dot_segment"

            # A tool this server does not have is a protocol error (JSON-RPC invalid params).
            with pytest.raises(MCPError) as raised:
                await writer.call_tool("memory_forget", {})
            assert raised.value.code == types.INVALID_PARAMS
            assert "memory_search" in raised.value.message

    run(test)


@pytest.mark.parametrize("request_id", [{"a": 1}, None, 1.5, True, [1]])
def test_a_request_whose_id_is_not_a_string_or_an_integer_is_invalid_request(
    url: str, request_id: Any
) -> None:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    headers = {
        "x-api-key": READER,
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    answer = httpx.post(url, json=body, headers=headers, timeout=30)
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "id must be a string or an integer" in error["error"]["message"]
    # Ids of the right types are answered; a notification (no id) is accepted as before.
    for good in ("seven", 7):
        answered = httpx.post(url, json={**body, "id": good}, headers=headers, timeout=30)
        assert answered.status_code == 200 and answered.json()["id"] == good
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(url, json=notification, headers=headers, timeout=30).status_code == 202


def test_without_a_valid_api_key_the_endpoint_answers_401_before_mcp(url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    for extra in ({}, {"x-api-key": "rk_wrong"}):
        answer = httpx.post(url, json=body, headers=headers | extra, timeout=30)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "unauthorized"


def test_retrieve_takes_the_full_request_and_list_stores_the_grant(url: str) -> None:
    async def test() -> None:
        async with session(url, READER) as reader:
            answer = await call(
                reader,
                "retrieve",
                {
                    "query": "How does Kubernetes decide which node runs a pod?",
                    "grade": 0.2,
                    "useHybrid": True,
                    "fusion": "rrf",
                    "metadataFilter": "year >= 2024 AND project_name = 'Platform'",
                    "similarityTopK": 10,
                    "rerank": {"strategy": "mmr", "topK": 2},
                },
            )
            assert answer["store"] == "sample" and answer["pipeline"]["hybrid"] is True
            assert answer["pipeline"]["rerankStrategy"] == "mmr" and answer["totalResults"] == 2
            assert answer["results"][0]["metadata"]["documentId"] == "k8s-scheduling"
            assert all(r["metadata"]["project_name"] == "Platform" for r in answer["results"])
            only = await call(
                reader,
                "retrieve",
                {"query": "pods", "grade": 0.0, "docIds": ["k8s-probes"], "engineName": "naive"},
            )
            assert {r["metadata"]["documentId"] for r in only["results"]} == {"k8s-probes"}
            strict = await call(reader, "retrieve", {"query": "pods", "grade": 0.99})
            assert strict["results"] == []  # a threshold nothing meets: an empty answer, not an error
            invalid = await tool_error(reader, "retrieve", {"query": "pods", "grade": 2})
            assert invalid["message"].startswith("grade:")
            keyword = await call(
                reader,
                "retrieve",
                {"query": "liveness probes", "searchMode": "keyword", "engineName": "naive"},
            )
            assert keyword["pipeline"]["searchMode"] == "keyword" and keyword["results"]
            assert all(r["score"] is None and r["matchedTerms"] for r in keyword["results"])
            graded = await tool_error(
                reader, "retrieve", {"query": "pods", "searchMode": "keyword", "grade": 0.1}
            )
            assert graded["message"].startswith('grade: does not apply with searchMode "keyword"')

            stores = await call(reader, "list_stores", {"prefix": MEMORY})
            assert [s["name"] for s in stores["stores"]] == [MEMORY] and stores["nextCursor"] is None
            assert stores["defaultStore"] == "sample"
            assert stores["stores"][0]["allowedMetadataKeys"] == ALLOWED
            sample = (await call(reader, "list_stores", {"prefix": "sample", "limit": 1}))["stores"][0]
            assert sample["name"] == "sample"
            assert sample["documentCount"] > 0 and sample["allowedMetadataKeys"] is None
        async with session(url, WRITER) as writer:
            assert [s["name"] for s in (await call(writer, "list_stores", {}))["stores"]] == [MEMORY]

    run(test)


def test_answer_cites_the_chunks_it_stands_on_and_refuses_what_the_grant_does_not_hold(url: str) -> None:
    async def test() -> None:
        question = "How does Kubernetes decide which node runs a pod?"
        async with session(url, READER) as reader:
            answer = await call(reader, "answer", {"query": question, "grade": 0.3, "cacheTTLms": 0})
            assert answer["grounded"] is True and answer["store"] == "sample"
            assert answer["sources"][0]["metadata"]["documentId"] == "k8s-scheduling"
            for citation in answer["citations"]:
                assert answer["text"][citation["start"] : citation["end"]] == citation["text"]
                assert set(citation["chunkIds"]) <= {s["id"] for s in answer["sources"]}
            nothing = await call(reader, "answer", {"query": question, "grade": 0.99})
            assert nothing["grounded"] is False and nothing["text"] == ""
            assert nothing["pipeline"]["ungroundedReason"] == "nothing_above_threshold"
        async with session(url, WRITER) as writer:
            # The writer's grant holds MEMORY only: sample answers as an unknown store would.
            outside = await tool_error(writer, "answer", {"query": question, "grade": 0.3, "store": "sample"})
            assert outside["code"] == "store_not_found"

    run(test)


def test_list_stores_pages_by_name_with_a_prefix_and_a_cursor(url: str) -> None:
    from retrieval_core.container import get_document_service

    prefix = f"mcp-pages-{uuid.uuid4().hex[:6]}-"
    names = [f"{prefix}{c}{i:02d}" for i, c in enumerate("aZ_-.9aZ_-.9")]
    documents = get_document_service()
    for name in names:
        documents.put_store(name, StoreDefinition())

    async def test() -> None:
        async with session(url, READER) as reader:
            pages, cursor = [], None
            while True:
                arguments = {"prefix": prefix, "limit": 5} | ({"cursor": cursor} if cursor else {})
                answer = await call(reader, "list_stores", arguments)
                pages.append([s["name"] for s in answer["stores"]])
                cursor = answer["nextCursor"]
                if cursor is None:
                    break
            assert pages == [sorted(names)[:5], sorted(names)[5:10], sorted(names)[10:]]
            assert answer["defaultStore"] == "sample"
            refused = await tool_error(reader, "list_stores", {"cursor": "not a cursor"})
            assert (
                refused["code"] == "invalid_cursor" and refused["details"]["errors"][0]["field"] == "cursor"
            )
            too_many = await tool_error(reader, "list_stores", {"limit": 1001})
            assert too_many["code"] == "validation_error" and too_many["message"].startswith("limit:")
        async with session(url, WRITER) as writer:  # a grant of MEMORY only
            assert await call(writer, "list_stores", {"prefix": prefix}) == {
                "stores": [],
                "nextCursor": None,
                "defaultStore": "sample",
            }

    try:
        run(test)
    finally:
        for name in names:
            documents.delete_store(name)


def test_retrieve_on_a_file_search_store_is_answered_by_gemini_file_search(url: str) -> None:
    with FakeGemini(api_key=GEMINI_KEY) as fake:
        stock_fake(fake)

        async def test() -> None:
            async with session(url, READER) as reader:
                answer = await call(
                    reader, "retrieve", {"query": "Why is the room cold?", "grade": 0.0, "store": HVAC_STORE}
                )
                assert answer["engineUsed"] == "gemini-file-search" and answer["store"] == HVAC_STORE
                assert answer["totalResults"] == 3

        with knowledge_env(fake):
            run(test)
        assert len(fake.generate_calls()) == 1


def test_the_handler_serves_many_requests_from_one_process(url: str) -> None:
    """The SDK's session manager runs once per instance; the endpoint must not (python-sdk#3121)."""

    async def test() -> None:
        for _ in range(3):
            async with session(url, READER) as reader:
                assert len((await reader.list_tools()).tools) == 4

    run(test)


# Read-your-writes through the shared cache


@pytest.fixture()
def cached_url(
    memory_store: str, configure: Any, own_runtime: Any, moto: MotoServer, table: str, aws_env: None
) -> Iterator[str]:
    """The server with API keys and its answers cached in DynamoDB (`table` on moto_server), as deployed."""
    configure(API_KEYS=json.dumps(API_KEYS))
    own_runtime(CACHE_TABLE_NAME=table, DYNAMODB_ENDPOINT_URL=moto.endpoint_url)
    port = free_port()
    stop = serve(port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop()


def test_a_memory_stored_by_one_client_is_found_by_another_at_once_through_the_dynamodb_cache(
    cached_url: str, moto: MotoServer, table: str
) -> None:
    text = f"Deploy freeze {uuid.uuid4().hex[:6]}: no production deploys during the December holidays."
    search = {"query": "When are production deploys frozen?", "store": MEMORY, "filter": {"topic": "release"}}

    async def test() -> None:
        async with session(cached_url, WRITER) as agent_a, session(cached_url, WRITER) as agent_b:
            before = await call(agent_b, "memory_search", search)
            assert before["results"] == []
            # The empty answer is cached now, in DynamoDB: a stale cache would keep serving it.
            items = moto.client("dynamodb").scan(TableName=table)["Items"]
            assert any(item["pk"]["S"].startswith("search#") for item in items)
            stored = await call(
                agent_a, "memory_store", {"text": text, "metadata": {"topic": "release"}, "store": MEMORY}
            )
            after = await call(agent_b, "memory_search", search)
            assert [r["documentId"] for r in after["results"]] == [stored["id"]]
            await call(agent_a, "memory_delete", {"id": stored["id"], "store": MEMORY})
            assert (await call(agent_b, "memory_search", search))["results"] == []

    run(test)
