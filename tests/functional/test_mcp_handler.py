"""functions/mcp: the Lambda handler of POST /mcp, invoked like Lambda with API Gateway events.

A warm Lambda instance serves many events in one process; the SDK's session manager runs only once per
instance (modelcontextprotocol/python-sdk#3121), so each event is served by a manager of its own. These
tests invoke one imported handler many times, as a warm instance does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import EVENTS_DIR
from tests.functional.test_handlers import (
    EXPECTED,
    FakeLambdaContext,
    body_of,
    load_event,
    load_handler_module,
)

pytest.importorskip("mcp")

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MCP_EVENTS = sorted(EVENTS_DIR.glob("mcp-*.json"))
STORE = f"mcp-lambda-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def handler(sample_store: Any) -> Iterator[Handler]:
    from retrieval_core.container import get_document_service
    from retrieval_core.documents.models import StoreDefinition

    get_document_service().put_store(STORE, StoreDefinition())
    yield load_handler_module("mcp").handler
    get_document_service().delete_store(STORE)


def invoke(handler: Handler, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = handler(event, FakeLambdaContext(function_name="McpFunction"))
    return response["statusCode"], body_of(response)


def tool_call(name: str, arguments: dict[str, Any], request_id: int) -> dict[str, Any]:
    """events/mcp-03-memory-search.json with another tools/call in its body."""
    event = load_event(EVENTS_DIR / "mcp-03-memory-search.json")
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    event["body"] = json.dumps(body)
    event["headers"]["content-length"] = str(len(event["body"].encode()))
    return event


def test_a_warm_instance_answers_every_mcp_event_again_and_again(handler: Handler) -> None:
    assert len(MCP_EVENTS) == 4
    for _ in range(3):
        for path in MCP_EVENTS:
            status, body = invoke(handler, load_event(path))
            EXPECTED[path.name](status, body)


def test_store_then_search_then_delete_in_separate_invocations(handler: Handler) -> None:
    text = "The VPN certificate is renewed every ninety days by the platform team."
    status, stored = invoke(handler, tool_call("memory_store", {"text": text, "store": STORE}, 1))
    assert status == 200 and stored["result"]["isError"] is False
    memory = stored["result"]["structuredContent"]["id"]
    search = {"query": "How often is the VPN certificate renewed?", "store": STORE}
    _, found = invoke(handler, tool_call("memory_search", search, 2))
    assert [r["content"] for r in found["result"]["structuredContent"]["results"]] == [text]
    _, deleted = invoke(handler, tool_call("memory_delete", {"id": memory, "store": STORE}, 3))
    assert deleted["result"]["structuredContent"] == {"id": memory, "store": STORE, "deleted": True}
    _, gone = invoke(handler, tool_call("memory_search", search, 4))
    assert gone["result"]["structuredContent"]["results"] == []


def test_get_on_mcp_is_405_not_a_stream_that_never_ends(handler: Handler) -> None:
    event = load_event(EVENTS_DIR / "mcp-02-tools-list.json")
    event["requestContext"]["http"]["method"] = "GET"
    event["body"] = ""
    event["headers"].pop("content-length")
    status, body = invoke(handler, event)
    assert status == 405 and body["error"]["details"] == {"allowed": ["POST"]}
