"""An HTTP proxy on 127.0.0.1 in front of moto_server that fails on demand, as DynamoDB can and moto never
does: throttling, answers slower than the client waits, connections reset.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import urlsplit

Mode = Literal["pass", "throttle", "slow", "reset"]
# Longer than the fail-open clients' 1 s read timeout (clients/aws.py).
SLOW_S = 1.5
_THROTTLED = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException",'
    b'"message":"Rate of requests exceeds the allowed throughput."}'
)


class FaultProxy:
    """Forwards every request to `target` while `mode` is "pass"; counts the requests it sees."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.mode: Mode = "pass"
        self.requests = 0
        self._in_flight = 0
        self._last_seen = time.monotonic()
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                with proxy._lock:
                    proxy.requests += 1
                    proxy._in_flight += 1
                try:
                    self._answer()
                finally:
                    with proxy._lock:
                        proxy._in_flight -= 1
                        proxy._last_seen = time.monotonic()

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                mode = proxy.mode
                if mode == "reset":
                    # SO_LINGER 0: close with a TCP RST, as a dropped connection does.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                    self.close_connection = True
                    return
                if mode == "throttle":
                    self._reply(400, _THROTTLED, "application/x-amz-json-1.0")
                    return
                if mode == "slow":
                    time.sleep(SLOW_S)
                upstream = http.client.HTTPConnection(*proxy._target, timeout=10)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                    upstream.request("POST", self.path, body, headers)
                    answer = upstream.getresponse()
                    self._reply(answer.status, answer.read(), answer.getheader("Content-Type", ""))
                finally:
                    upstream.close()

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def wait_until_quiet(self, quiet_s: float = 1.5, timeout_s: float = 20.0) -> None:
        """Wait until no request has been in flight for `quiet_s`: longer than botocore's first retry
        backoff (at most 1 s), so every client call of a fault has given up, and a failure cannot land
        after the test has moved on."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                quiet = self._in_flight == 0 and time.monotonic() - self._last_seen >= quiet_s
            if quiet:
                return
            time.sleep(0.05)
        raise TimeoutError(f"requests still reached the proxy after {timeout_s} s")

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
