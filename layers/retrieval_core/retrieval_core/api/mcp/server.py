"""POST /mcp: the tools of `tools.py` over MCP Streamable HTTP, stateless, with JSON responses.

Built on the official SDK's low-level server. Every request gets a session manager of its own, entered
for that request only: the SDK lets a manager run once per instance, so one shared manager started by
an ASGI lifespan fails on the second event of a warm Lambda instance, since Mangum enters the lifespan
per event (modelcontextprotocol/python-sdk#3121); our handlers turn Mangum's lifespan off, where a
shared manager would never start. Stateless, a manager holds nothing worth keeping between requests.

The route sits behind the app's middleware like every other: the API key (or JWT) gives the request
its grant before the SDK sees it, and a tool call reads that grant from the request.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
import mcp_types as types
import pydantic_core
from fastapi import APIRouter
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from retrieval_core import __version__
from retrieval_core.api.auth import current_grant
from retrieval_core.api.errors import log_refusal
from retrieval_core.api.mcp.tools import TOOLS, Tool, call_tool, tools_for
from retrieval_core.exceptions import RetrievalError
from retrieval_core.grants import Grant

PATH = "/mcp"
INSTRUCTIONS = (
    "Long-term memory and document retrieval. memory_store saves a text with metadata; memory_search finds "
    "memories by meaning (similarity: higher is closer); memory_delete removes one by id. retrieve is the "
    "full retrieval request over document stores; list_stores shows the stores you may use."
)


def build_server() -> Server[Any]:
    """The MCP server: tools/list and tools/call over the caller's grant."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[describe(tool) for tool in tools_for(grant_of(ctx))])

    async def call(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            # Not a tool of this server: a protocol error (JSON-RPC invalid params), as the spec asks.
            raise MCPError(types.INVALID_PARAMS, f"unknown tool '{params.name}'; tools: {', '.join(TOOLS)}")
        grant = grant_of(ctx)
        request_id = request_id_of(ctx)
        try:
            result = await anyio.to_thread.run_sync(call_tool, tool, params.arguments, grant, request_id)
        except RetrievalError as exc:
            if exc.status_code == 403:
                log_refusal("MCP", params.name, exc, grant.name)
            return tool_error(exc)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
        )

    return Server(
        "retrieval-service",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
    )


def describe(tool: Tool) -> types.Tool:
    """A tool as tools/list shows it."""
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema(),
        annotations=types.ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


def tool_error(exc: RetrievalError) -> types.CallToolResult:
    """A tool's failure, as MCP wants it: a result with isError, whose text the model can read and act on.

    The structured part is the HTTP API's error body (code, message, details), plus the HTTP status the
    same request would have had, and retryAfterSeconds when waiting helps."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message, "details": exc.details}
    error["status"] = exc.status_code
    if exc.retry_after_s is not None:
        error["retryAfterSeconds"] = exc.retry_after_s
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{exc.code}: {exc.message}")],
        structured_content={"error": error},
        is_error=True,
    )


def grant_of(ctx: ServerRequestContext[Any, Any]) -> Grant:
    """The grant the app's authentication middleware gave the HTTP request carrying this message."""
    request = ctx.request
    if not isinstance(request, Request):
        raise MCPError(types.INTERNAL_ERROR, "no HTTP request behind this message")
    try:
        return current_grant(request)
    except RetrievalError as exc:
        raise MCPError(types.INVALID_REQUEST, exc.message) from None


def request_id_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The x-request-id of the HTTP request carrying this message (api/request_id.py)."""
    request = ctx.request
    return request.scope.get("state", {}).get("request_id") if isinstance(request, Request) else None


class McpEndpoint:
    """The ASGI app of POST /mcp: one stateless session manager per request (see the module docstring)."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, receive = await _read_body(receive)
        refusal = _refuse_request_id(body)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        manager = StreamableHTTPSessionManager(self.server, json_response=True, stateless=True)
        async with manager.run():
            await manager.handle_request(scope, receive, send)


# The SDK's own type of a request id: a string or an integer (MCP: never null; JSON-RPC: no fractions).
_REQUEST_ID: TypeAdapter[types.RequestId] = TypeAdapter(types.RequestId)


def _refuse_request_id(body: bytes) -> Response | None:
    """A 400 JSON-RPC -32600 for a request (a message with a method) whose id is not a string or an
    integer; None for anything else (the SDK answers it). The SDK would read such a message as a
    notification, answer 202 with an empty body, and the client would wait for an answer forever."""
    try:
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    try:
        _REQUEST_ID.validate_python(message["id"], strict=True)
    except ValidationError:
        error = types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(
                code=types.INVALID_REQUEST,
                message="Invalid Request: a request's id must be a string or an integer",
            ),
        )
        return Response(
            error.model_dump_json(by_alias=True, exclude_unset=True),
            status_code=400,
            media_type="application/json",
        )
    return None


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's body, and a `receive` that hands it over again before what follows (a disconnect)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return body, replay


def mcp_router() -> APIRouter:
    """A router holding the /mcp route, for `create_app` (the local app) and the MCP Lambda function."""
    router = APIRouter()
    # POST only: GET (a stream for the server to speak first) and DELETE (end a session) are 405, since a
    # stateless server has neither. Passed on, a GET would open an SSE stream that never closes.
    router.routes.append(Route(PATH, McpEndpoint(build_server()), methods=["POST"]))
    return router
