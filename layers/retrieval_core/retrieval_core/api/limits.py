"""Refuse request bodies over MAX_BODY_BYTES (default 1 MiB) with 413, before anything parses them.

A pure ASGI middleware: a declared Content-Length over the limit is refused without reading the body;
otherwise the body is read (at most limit + 1 bytes are kept) and replayed to the app, so a chunked
body without a Content-Length cannot slip past.

The documents PUT route carries whole files, base64 in JSON, so it has its own limit,
DOCUMENTS_MAX_BODY_BYTES. Its default is what fits Lambda's synchronous request payload of 6 MB
(counted as 6,000,000 bytes, the lower reading) once API Gateway has wrapped the body in its event:
6,000,000 - 65,536 bytes of envelope = 5,934,464 bytes of body; less 20,480 bytes of JSON around the
base64 text, 4 characters per 3 bytes leave 4,435,488 bytes (4.4 MB) of file. Larger files go
through the documents S3 bucket, as the 413 says.

The body must also arrive within REQUEST_BODY_TIMEOUT_S: a client that sends less than its
Content-Length (or trickles) gets 408 and its connection closed, instead of holding a worker.
In Lambda the body is already whole, so the deadline never applies.
"""

from __future__ import annotations

import re

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retrieval_core.api.errors import retrieval_error_response
from retrieval_core.exceptions import (
    DocumentTooLargeError,
    RequestTimeoutError,
    RequestTooLargeError,
    RetrievalError,
)
from retrieval_core.search.reply_size import LAMBDA_PAYLOAD_BYTES
from retrieval_core.settings import get_settings

# The HTTP API event around the body: headers (a JWT, cookies), requestContext with authorizer claims.
EVENT_ENVELOPE_BYTES = 65_536
# The JSON around the base64 text: field names, contentType, fileName, metadata (at most 16 KiB).
JSON_FRAMING_BYTES = 20_480
DOCUMENTS_BODY_BYTES = LAMBDA_PAYLOAD_BYTES - EVENT_ENVELOPE_BYTES  # 5,934,464
# Base64 makes 4 characters of every 3 bytes.
LARGEST_FILE_BYTES = (DOCUMENTS_BODY_BYTES - JSON_FRAMING_BYTES) // 4 * 3  # 4,435,488

_DOCUMENT_PUT = re.compile(r"/api/v1/stores/[^/]+/documents/.+")


class BodySizeLimit:
    """ASGI middleware answering 413 (the JSON error body) to requests larger than the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = get_settings()
        documents = scope.get("method") == "PUT" and bool(_DOCUMENT_PUT.fullmatch(scope.get("path", "")))
        limit = self.max_bytes or (
            settings.documents_max_body_bytes if documents else settings.max_body_bytes
        )
        error = _too_large(limit, documents)
        declared = _content_length(Headers(scope=scope))
        if declared is not None and declared > limit:
            await _refuse(error, scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        with anyio.move_on_after(settings.request_body_timeout_s) as deadline:
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    # The client went away: let the app see the disconnect.
                    await self.app(scope, _replay([message], receive), send)
                    return
                body = message.get("body", b"")
                size += len(body)
                if size > limit:
                    await _refuse(error, scope, receive, send)
                    return
                chunks.append(body)
                more = message.get("more_body", False)
        if deadline.cancelled_caught:
            late = RequestTimeoutError(
                f"the request body did not arrive within {settings.request_body_timeout_s:g} s"
                " (REQUEST_BODY_TIMEOUT_S); send the whole body its Content-Length announces"
            )
            response = retrieval_error_response(late)
            response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return
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


def _too_large(limit: int, documents: bool) -> RetrievalError:
    if not documents:
        return RequestTooLargeError(limit)
    return DocumentTooLargeError(limit, max(0, limit - JSON_FRAMING_BYTES) // 4 * 3)


async def _refuse(error: RetrievalError, scope: Scope, receive: Receive, send: Send) -> None:
    await retrieval_error_response(error)(scope, receive, send)


def _replay(messages: list[Message], then: Receive) -> Receive:
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        return await then()  # after the body, only a disconnect can come

    return receive
