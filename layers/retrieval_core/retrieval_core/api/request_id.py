"""`x-request-id`: the caller's id (when usable) or one we mint, echoed on the response and in every log line.

An id is usable when it is 1 to 128 characters of `A-Z a-z 0-9 . _ : = + / -`: enough for UUIDs, ULIDs,
W3C trace ids and API Gateway's request ids, and nothing that could forge a log line or a header. Any
other value is replaced by a minted id rather than refused: the id serves diagnosis, not the request.
In Lambda the handler decides the id first (API Gateway's requestId when the caller sent none) and makes
it the Powertools correlation id; locally `RequestIdLogFilter` puts it in each log record.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER = "x-request-id"
_USABLE = re.compile(r"[A-Za-z0-9._:=+/-]{1,128}")
_current: ContextVar[str | None] = ContextVar("request_id", default=None)


def usable_request_id(value: object) -> str | None:
    """`value` when it is a usable request id, else None."""
    return value if isinstance(value, str) and _USABLE.fullmatch(value) else None


def mint_request_id() -> str:
    """A new random request id (32 hex digits)."""
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    """The id of the request being served in this context (None outside a request)."""
    return _current.get()


class RequestIdMiddleware:
    """ASGI middleware: picks the request's id, keeps it in a context variable, echoes it on the response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = usable_request_id(Headers(scope=scope).get(REQUEST_ID_HEADER)) or mint_request_id()
        token = _current.set(request_id)
        # Also on request.state: the 500 handler runs outside this middleware, after the reset below.
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _current.reset(token)


class RequestIdLogFilter(logging.Filter):
    """Sets `request_id` on every record ("-" outside a request), for a format holding `%(request_id)s`."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keeps the record."""
        record.request_id = _current.get() or "-"
        return True


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """Add `RequestIdLogFilter` to every handler of `logger` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RequestIdLogFilter) for f in handler.filters):
            handler.addFilter(RequestIdLogFilter())
