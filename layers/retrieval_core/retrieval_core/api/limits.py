"""Refuse request bodies over MAX_BODY_BYTES (default 1 MiB) with 413, before anything parses them.

A pure ASGI middleware: a declared Content-Length over the limit is refused without reading the body;
otherwise the body is read (at most limit + 1 bytes are kept) and replayed to the app, so a chunked
body without a Content-Length cannot slip past.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..exceptions import RequestTooLargeError
from ..settings import get_settings
from .errors import retrieval_error_response


class BodySizeLimit:
    """ASGI middleware answering 413 (the JSON error body) to requests larger than the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes or get_settings().max_body_bytes
        declared = _content_length(Headers(scope=scope))
        if declared is not None and declared > limit:
            await _refuse(limit, scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                # The client went away: let the app see the disconnect.
                await self.app(scope, _replay([message], receive), send)
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await _refuse(limit, scope, receive, send)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        await self.app(
            scope,
            _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}], receive),
            send,
        )


def _content_length(headers: Headers) -> int | None:
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


async def _refuse(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    await retrieval_error_response(RequestTooLargeError(limit))(scope, receive, send)


def _replay(messages: list[Message], then: Receive) -> Receive:
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        return await then()  # after the body, only a disconnect can come

    return receive
