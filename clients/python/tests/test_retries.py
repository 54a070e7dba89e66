"""Retries honour Retry-After within the deadline; time-outs and unreachable services are named errors."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import env

from retrieval_client import (
    DatabaseUnavailableError,
    HttpErrorError,
    RateLimitedError,
    RetrievalClient,
    RetrievalConnectionError,
    RetrievalTimeoutError,
)


def limited_client(url: str, **options: float) -> RetrievalClient:
    return RetrievalClient(url, env("RETRIEVAL_LIMITED_KEY"), **options)  # type: ignore[arg-type]


def at_a_window_start() -> None:
    """Wait for the limited key's next window (windows are aligned on the epoch), so that its requests
    all fall in one window and the one over the limit meets a Retry-After of the whole window."""
    window_s = float(env("LIMITED_WINDOW_S"))
    time.sleep(window_s - time.time() % window_s + 0.05)


def test_a_rate_limited_call_waits_what_retry_after_says_and_then_succeeds(url: str) -> None:
    requests, window_s = int(env("LIMITED_REQUESTS")), float(env("LIMITED_WINDOW_S"))
    with limited_client(url) as client:
        at_a_window_start()
        started = time.monotonic()
        for _ in range(requests + 1):
            assert client.get_store("sample")["name"] == "sample"
        elapsed = time.monotonic() - started
    # The last call met a 429 and waited for the next window (Retry-After: the whole seconds left).
    assert window_s - 0.5 < elapsed < window_s + 3


def test_a_deadline_shorter_than_retry_after_raises_the_429_at_once(url: str) -> None:
    requests = int(env("LIMITED_REQUESTS"))
    with limited_client(url, deadline_s=0.3) as client:
        at_a_window_start()
        for _ in range(requests):
            client.get_store("sample")
        started = time.monotonic()
        with pytest.raises(RateLimitedError) as caught:
            client.get_store("sample")
    assert time.monotonic() - started < 0.3
    assert caught.value.status == 429 and caught.value.retry_after_s and caught.value.retry_after_s >= 1


class OnceUnavailable(BaseHTTPRequestHandler):
    """Answers the first request 500 database_unavailable with Retry-After: 1, then 200; a request for
    /proxy-page gets a proxy's HTML 502."""

    calls = 0

    def do_GET(self) -> None:  # noqa: N802
        type(self).calls += 1
        if self.path.endswith("/proxy-page"):
            body = b"<html><body>502 Bad Gateway</body></html>"
            self.send_response(502)
        elif type(self).calls == 1:
            body = b'{"error": {"code": "database_unavailable", "message": "down", "details": {}}}'
            self.send_response(500)
            self.send_header("Retry-After", "1")
        else:
            body = b'{"name": "sample"}'
            self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def flaky_url() -> Iterator[str]:
    OnceUnavailable.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), OnceUnavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_500_with_retry_after_is_retried_and_one_without_time_is_raised(flaky_url: str) -> None:
    with RetrievalClient(flaky_url) as client:
        started = time.monotonic()
        assert client.get_store("sample")["name"] == "sample"
        assert time.monotonic() - started >= 0.9
    OnceUnavailable.calls = 0
    with (
        RetrievalClient(flaky_url, max_attempts=1) as client,
        pytest.raises(DatabaseUnavailableError) as caught,
    ):
        client.get_store("sample")
    assert caught.value.status == 500 and caught.value.retry_after_s == 1


def test_an_answer_that_is_not_the_service_s_error_shape_is_http_error_with_its_status(
    flaky_url: str,
) -> None:
    with RetrievalClient(flaky_url) as client, pytest.raises(HttpErrorError) as caught:
        client.get_store("proxy-page")
    assert caught.value.status == 502 and "502 Bad Gateway" in caught.value.message


def test_a_service_that_never_answers_times_out_by_name_after_its_attempts() -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    try:
        base = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with RetrievalClient(base, timeout_s=0.5, max_attempts=2) as client:
            started = time.monotonic()
            with pytest.raises(RetrievalTimeoutError, match="no answer within 0.5 s"):
                client.health()
            # Two attempts of 0.5 s with 0.5 s between them: a read is sent again.
            assert 1.4 < time.monotonic() - started < 3
            started = time.monotonic()
            with pytest.raises(RetrievalTimeoutError):
                client.refresh_store("sample")
            # A refresh changes state: sent once.
            assert time.monotonic() - started < 1.2
    finally:
        listener.close()


def test_an_unreachable_service_is_named_after_its_attempts() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed again: nothing listens there
    with (
        RetrievalClient(f"http://127.0.0.1:{port}", max_attempts=2) as client,
        pytest.raises(RetrievalConnectionError, match="GET /api/v1/health"),
    ):
        client.health()


def test_the_address_and_key_come_from_the_environment(url: str) -> None:
    assert os.environ["RETRIEVAL_URL"] == url
    with RetrievalClient() as client:
        assert client.options.base_url == url and client.options.api_key == env("RETRIEVAL_API_KEY")
        assert client.get_store("sample")["name"] == "sample"
