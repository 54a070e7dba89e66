"""What the sync and async clients share: addresses, headers, errors from answers, and when to retry."""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode

import httpx

from retrieval_client.error_codes import ERRORS_BY_CODE
from retrieval_client.errors import (
    RetrievalApiError,
    RetrievalConnectionError,
    RetrievalError,
    RetrievalTimeoutError,
)

API = "/api/v1"
API_KEY_HEADER = "x-api-key"
REQUEST_ID_HEADER = "x-request-id"
# 429 and 503 say "later"; a 500 says so only when it carries Retry-After (database_unavailable does).
RETRIED_STATUSES = frozenset({429, 503})
MAX_BACKOFF_S = 8.0


@dataclass(frozen=True)
class Options:
    """How the client talks to the service.

    timeout_s: the longest one attempt may take (connect, send, wait, read).
    deadline_s: the longest a call may take, its retries and waits included.
    max_attempts: attempts per call, the first included (1: never retry).
    """

    base_url: str
    api_key: str | None = None
    timeout_s: float = 60.0
    deadline_s: float = 120.0
    max_attempts: int = 4

    def headers(self) -> dict[str, str]:
        """The headers of every request."""
        headers = {"accept": "application/json", "user-agent": "retrieval-service-client/0.1"}
        if self.api_key:
            headers[API_KEY_HEADER] = self.api_key
        return headers


def segment(value: str) -> str:
    """`value` as one path segment: every `/`, `#`, `?`, `%` and non-ASCII character percent-encoded."""
    return quote(value, safe="")


def store_path(store: str) -> str:
    """The path of a store."""
    return f"{API}/stores/{segment(store)}"


# As the service judges ids: `.` and `..` segments, also percent-encoded or between backslashes, with the
# tabs and newlines a URL drops left out, are steps up a path that HTTP libraries and proxies resolve.
_SEPARATORS = re.compile(r"[/\\]")
_DROPPED = str.maketrans("", "", "\t\n\r")


def path_safe(document_id: str) -> bool:
    """False for an id a URL path cannot carry: one with a `.` or `..` segment in any spelling. The
    service refuses to store such ids; ones stored before are deleted with `delete_document_by_query`."""
    text = document_id
    for _ in range(8):
        decoded = unquote(text.translate(_DROPPED))
        if decoded == text:
            break
        text = decoded
    return not any(part in {".", ".."} for part in _SEPARATORS.split(text))


def document_path(store: str, document_id: str) -> str:
    """The path of a document: its id percent-encoded whole, so an id may hold `/`, `#` or `?`.

    Raises ValueError for an id a path cannot carry (`path_safe`): sent, it would name another route."""
    if not path_safe(document_id):
        raise ValueError(
            f"document id {document_id!r} holds a '.' or '..' segment, which a URL reads as a step up the "
            "path: the service stores no such id; list one stored before with list_documents(store, "
            "prefix=...), read its chunks with list_chunks, delete it with delete_document"
        )
    return f"{store_path(store)}/documents/{segment(document_id)}"


def address(base_url: str, path: str, params: Mapping[str, Any]) -> str:
    """A request's URL with its query written here, each value percent-encoded whole, `%` included:
    httpx before 0.28 sends a value's `%2e` as it is, so a document id holding one would arrive decoded
    (another id); a list value repeats its parameter."""
    if not params:
        return base_url + path
    return f"{base_url}{path}?{urlencode(params, doseq=True, quote_via=quote)}"


def query(**params: Any) -> dict[str, Any]:
    """The query parameters given (None: left out)."""
    return {name: value for name, value in params.items() if value is not None}


def retry_after_s(response: httpx.Response) -> float | None:
    """Seconds the Retry-After header asks for (delay-seconds or an HTTP date), None without one."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return None if when is None else max(0.0, when.timestamp() - time.time())


def retry_delay_s(response: httpx.Response, attempt: int) -> float | None:
    """How long to wait after attempt `attempt` (1-based) got this answer; None when it is not retried."""
    after = retry_after_s(response)
    if response.status_code in RETRIED_STATUSES or (response.status_code >= 500 and after is not None):
        return after if after is not None else backoff_s(attempt)
    return None


def backoff_s(attempt: int) -> float:
    """The wait after failed attempt `attempt` (1-based) when the service named none: 0.5 s doubling."""
    return float(min(MAX_BACKOFF_S, 0.5 * 2 ** (attempt - 1)))


def attempt_timeout_s(options: Options, deadline: float) -> float:
    """The time-out of the next attempt: `timeout_s`, or what is left before the deadline if less."""
    return max(0.001, min(options.timeout_s, deadline - time.monotonic()))


def transport_failure(
    method: str, path: str, exc: httpx.TransportError, timeout_s: float, attempt: int, repeatable: bool
) -> tuple[RetrievalError, float | None]:
    """The error of an attempt that got no answer, and the wait before the next (None: not repeated)."""
    failure: RetrievalError
    if isinstance(exc, httpx.TimeoutException):
        failure = RetrievalTimeoutError(f"{method} {path}: no answer within {timeout_s:.1f} s")
    else:
        failure = RetrievalConnectionError(f"{method} {path}: {exc!r}")
    failure.__cause__ = exc
    return failure, backoff_s(attempt) if repeatable else None


def out_of_time(wait_s: float, attempt: int, options: Options, deadline: float) -> bool:
    """Whether a retry after attempt `attempt` and `wait_s` would be one attempt too many or end too late."""
    return attempt >= options.max_attempts or time.monotonic() + wait_s > deadline


def api_error(response: httpx.Response) -> RetrievalApiError:
    """The exception for an error answer: its code's class, with the message, details and request id."""
    request_id = response.headers.get(REQUEST_ID_HEADER)
    try:
        body = json.loads(response.content)
        error = body["error"]
        code, message, details = str(error["code"]), str(error["message"]), dict(error.get("details") or {})
    except (ValueError, KeyError, TypeError):
        # Not the service's error shape (a proxy's page, a HEAD answer): `http_error`, as the service names
        # an HTTP error of its framework; the status tells which.
        code, details = "http_error", {}
        message = response.text[:500] or response.reason_phrase
    cls = ERRORS_BY_CODE.get(code, RetrievalApiError)
    return cls(
        message,
        status=response.status_code,
        code=code,
        details=details,
        request_id=request_id,
        retry_after_s=retry_after_s(response),
    )
