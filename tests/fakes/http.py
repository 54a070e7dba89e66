"""A small scriptable HTTP server for tests: real sockets on 127.0.0.1, real clients, nothing patched.

Subclasses register routes with `add_route(method, regex, handler)`; the regex must match the whole
(URL-decoded) path and its named groups reach the handler through the `re.Match`. Tests can script
answers that take precedence over the routes, e.g. `server.fail_next(2, 429)` or
`server.fail_always(500)`, and read back every request in `server.requests`. A `Streamed` body is
sent piece by piece as its iterator yields, so a test can script a stream that pauses or stalls.
"""

from __future__ import annotations

import json
import re
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str  # URL-decoded, without the query string
    raw_path: str  # as sent, query string included
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: bytes
    client_address: tuple[str, int]  # the same port across requests means one reused connection

    def json(self) -> Any:
        """The body parsed as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True)
class Streamed:
    """A body sent with chunked transfer encoding, each piece as soon as `pieces` yields it."""

    pieces: Iterable[bytes]


@dataclass(frozen=True)
class Reply:
    """An answer: `body` is sent as JSON unless it is bytes or `Streamed`."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[RecordedRequest, "re.Match[str]"], Reply]


@dataclass(frozen=True)
class Route:
    """A handler for one method and a regex over the whole path."""

    method: str
    pattern: re.Pattern[str]
    handler: Handler


class FakeHTTPServer:
    """A ThreadingHTTPServer on an ephemeral port, in a daemon thread, used as a context manager."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        self.requests: list[RecordedRequest] = []
        self.handler_errors: list[str] = []
        self._scripted: deque[Reply] = deque()
        self._always: Reply | None = None
        self._in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Routes and scripts.

    def add_route(self, method: str, pattern: str, handler: Handler) -> None:
        """Serve `method` requests whose decoded path fully matches `pattern`.

        A route added later takes precedence, so a subclass can override one of its base's routes.
        """
        self.routes.insert(0, Route(method.upper(), re.compile(pattern), handler))

    def script(self, *replies: Reply) -> None:
        """Answer the next requests, whatever their path, with `replies` in order."""
        with self._lock:
            self._scripted.extend(replies)

    def fail_next(self, count: int, status: int, message: str = "scripted failure") -> None:
        """Answer the next `count` requests with an error in this fake's error shape."""
        self.script(*[self.error_reply(status, message)] * count)

    def fail_always(self, status: int, message: str = "scripted failure") -> None:
        """Answer every request with an error until `reset()`."""
        with self._lock:
            self._always = self.error_reply(status, message)

    def reset(self) -> None:
        """Forget recorded requests and scripted answers."""
        with self._lock:
            self.requests.clear()
            self.handler_errors.clear()
            self._scripted.clear()
            self._always = None
            self.max_in_flight = 0

    def error_reply(self, status: int, message: str) -> Reply:
        """The provider's error body; subclasses override it with their API's shape."""
        return Reply(status, {"error": {"code": status, "message": message}})

    def requests_to(self, method: str, pattern: str) -> list[RecordedRequest]:
        """Recorded requests with this method whose path fully matches `pattern`."""
        regex = re.compile(pattern)
        with self._lock:
            return [r for r in self.requests if r.method == method.upper() and regex.fullmatch(r.path)]

    # Lifecycle.

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`, without a trailing slash."""
        if self._server is None:
            raise RuntimeError("the fake server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        """Bind to 127.0.0.1 on a free port and serve in a daemon thread."""
        fake = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real clients expect

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = RecordedRequest(
                    method=self.command,
                    path=unquote(parts.path),
                    raw_path=self.path,
                    query=parse_qs(parts.query),
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=body,
                    client_address=(str(self.client_address[0]), int(self.client_address[1])),
                )
                reply = fake._dispatch(request)
                if isinstance(reply.body, Streamed):
                    self._send_streamed(reply.status, reply.headers, reply.body)
                    return
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _send_streamed(self, status: int, headers: Mapping[str, str], body: Streamed) -> None:
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for piece in body.pieces:
                        if piece:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    # The client stopped reading (it gave up on a stalled stream).
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            # A short poll interval keeps shutdown (one per test) from costing half a second.
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-http",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # Dispatch.

    def _dispatch(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            scripted = self._scripted.popleft() if self._scripted else self._always
        try:
            if scripted is not None:
                return scripted
            for route in self.routes:
                match = route.pattern.fullmatch(request.path)
                if route.method == request.method and match:
                    return route.handler(request, match)
            return self.error_reply(404, f"no route for {request.method} {request.path}")
        except Exception:
            # A broken fake must fail the test loudly, not hang the client.
            self.handler_errors.append(traceback.format_exc())
            return self.error_reply(500, "the fake's handler raised; see handler_errors")
        finally:
            with self._lock:
                self._in_flight -= 1
