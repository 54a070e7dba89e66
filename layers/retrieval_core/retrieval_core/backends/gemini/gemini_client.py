"""The google-genai client, built on first use, and one call to the Gemini API with retries and error mapping.

google-genai costs ~0.5 s to import, so it (and httpx) is imported here, inside functions, and only when
a Gemini call is first needed. The API key never appears in a message raised or logged from this module.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pydantic import SecretStr

from retrieval_core.backends.gemini.debug import debug
from retrieval_core.clients.deadline import attempt_timeout_s, request_deadline, time_for_retry
from retrieval_core.clients.genai import build_genai_client, key_rejected
from retrieval_core.clients.provider_keys import ClientForKey, gemini_key
from retrieval_core.clients.retry import (
    MAX_DETAIL_CHARS,
    RETRY_ATTEMPTS,
    RETRY_BASE_DELAY_S,
    RETRYABLE_STATUSES,
    backoff_delay,
)
from retrieval_core.clients.secret_store import forget_cached_secrets
from retrieval_core.exceptions import (
    BackendNotConfiguredError,
    ConfigurationError,
    InvalidRequestError,
    RetrievalError,
    StoreNotFoundError,
    UpstreamAuthError,
    UpstreamError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from retrieval_core.settings import Settings

if TYPE_CHECKING:
    from google.genai import Client
    from google.genai.errors import APIError

T = TypeVar("T")

# File Search (fileSearchStores, the fileSearch tool) is documented on v1beta.
FILE_SEARCH_API_VERSION = "v1beta"
# Retry-After we send when Gemini gave none after its last 429/5xx.
DEFAULT_RETRY_AFTER_S = 5


def api_key_from_settings(settings: Settings) -> SecretStr:
    """GEMINI_API_KEY when set (local runs); else the key in the secret GEMINI_API_KEY_SECRET_ARN names.

    Neither configured: BackendNotConfiguredError (501), the Gemini backend is absent from this deployment.
    """
    return gemini_key(settings).read_required(BackendNotConfiguredError)


class GeminiCaller:
    """Builds the client on first use and runs calls with retries; Gemini errors become ours."""

    def __init__(
        self,
        key_source: Callable[[], SecretStr],
        *,
        base_url: str | None,
        timeout_s: float,
        attempts: int = RETRY_ATTEMPTS,
        base_delay_s: float = RETRY_BASE_DELAY_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._key_source = key_source
        self._base_url = base_url
        self._timeout_s = timeout_s
        self.attempts = attempts
        self.base_delay_s = base_delay_s
        self._sleep = sleep
        self._clients: ClientForKey[Client] = ClientForKey(self._build_client)

    @classmethod
    def from_settings(cls, settings: Settings) -> GeminiCaller:
        """From GEMINI_API_KEY (or GEMINI_API_KEY_SECRET_ARN), GEMINI_BASE_URL and the retry settings."""
        return cls(
            lambda: api_key_from_settings(settings),
            base_url=settings.gemini_base_url,
            timeout_s=settings.http_timeout_s,
            attempts=settings.gemini_retry_attempts,
            base_delay_s=settings.gemini_retry_base_delay_s,
        )

    def client(self) -> Client:
        """The google-genai client, built (and google-genai imported) on the first call, and again when
        the key changed (a key in a secret is read through its 5-minute cache: a rotation applies)."""
        return self._clients.get(self._key_source())

    def _build_client(self, key: SecretStr) -> Client:
        started = time.perf_counter()
        try:
            client = build_genai_client(
                api_key=key,
                base_url=self._base_url,
                timeout_s=self._timeout_s,
                api_version=FILE_SEARCH_API_VERSION,
            )
        except ImportError as exc:
            raise ConfigurationError("the Gemini API needs the google-genai package installed") from exc
        debug("gemini client built in %.1f ms", (time.perf_counter() - started) * 1000)
        return client

    def forget_client(self) -> None:
        """Drop the client and cached secrets: the next call reads the key again (a rotated key applies)."""
        self._clients.forget()
        forget_cached_secrets()

    def call(
        self,
        operation: str,
        call: Callable[[Client, int], T],
        *,
        store: str | None = None,
        blame: Callable[[str], str | None] | None = None,
    ) -> T:
        """Run `call(client, timeout_ms)`; 429, 5xx and transport errors are retried with backoff and jitter.

        `call` must pass `timeout_ms`, the attempt's timeout (HTTP_TIMEOUT_S cut to the request's deadline),
        to the SDK's `http_options`. No attempt or wait goes past the deadline: once it is spent, the call
        ends as UpstreamTimeoutError (504).

        `store` names the store a 404 is about (StoreNotFoundError); without it a 404 is an upstream error.
        `blame(message)` names the caller's field a Gemini 400 is about (a 422 naming it); a 400 it
        blames on no field is a fault in our request, a 502.
        """
        client = self.client()
        deadline = request_deadline()
        failure: _Failure | None = None
        made = 0
        for attempt in range(1, self.attempts + 1):
            timeout_s = attempt_timeout_s(self._timeout_s, deadline)
            if timeout_s is None:
                break
            made = attempt
            outcome = self._attempt(operation, call, client, timeout_s, attempt, store, blame)
            if not isinstance(outcome, _Failure):
                return outcome
            failure = outcome
            if attempt < self.attempts:
                delay = backoff_delay(attempt, self.base_delay_s)
                if not time_for_retry(delay, deadline):
                    break
                self._sleep(delay)
        raise _gave_up(operation, made, failure)

    def _attempt(
        self,
        operation: str,
        call: Callable[[Client, int], T],
        client: Client,
        timeout_s: float,
        attempt: int,
        store: str | None,
        blame: Callable[[str], str | None] | None,
    ) -> T | _Failure:
        """One attempt: its result, or the retryable failure; any other failure is raised, mapped."""
        import httpx
        from google.genai import errors

        started = time.perf_counter()
        try:
            result = call(client, max(1, int(timeout_s * 1000)))
        except errors.APIError as exc:
            elapsed_ms = (time.perf_counter() - started) * 1000
            debug("gemini %s: HTTP %s after %.1f ms (attempt %d)", operation, exc.code, elapsed_ms, attempt)
            if exc.code not in RETRYABLE_STATUSES:
                raise self._error_for(operation, exc, store, blame) from exc
            return _Failure(
                f"HTTP {exc.code} {exc.status or ''}".strip(), _retry_after_s(exc), timed_out=False
            )
        except httpx.TransportError as exc:
            debug("gemini %s: %s (attempt %d)", operation, type(exc).__name__, attempt)
            return _Failure(type(exc).__name__, None, timed_out=isinstance(exc, httpx.TimeoutException))
        debug("gemini %s: answered in %.1f ms", operation, (time.perf_counter() - started) * 1000)
        return result

    def _error_for(
        self,
        operation: str,
        exc: APIError,
        store: str | None,
        blame: Callable[[str], str | None] | None,
    ) -> Exception:
        if key_rejected(exc):
            self.forget_client()
            return UpstreamAuthError(
                f"the Gemini API rejected the API key (HTTP {exc.code}); "
                "check GEMINI_API_KEY or the secret GEMINI_API_KEY_SECRET_ARN names",
                {"operation": operation, "status": exc.code},
            )
        if exc.code == 404 and store is not None:
            return StoreNotFoundError(store)
        message = self._redacted(str(exc.message or exc.status or ""))[:MAX_DETAIL_CHARS]
        field = blame(message) if blame is not None and exc.code == 400 else None
        if field is not None:
            # e.g. a metadataFilter in a syntax Gemini refuses: the caller can fix it.
            return InvalidRequestError.for_field(
                field, f"the Gemini API refused it: {message}", "upstream_refused"
            )
        if exc.code == 400:
            return UpstreamError(
                f"the Gemini API refused our request (HTTP 400): {message}",
                {"operation": operation, "status": 400},
            )
        return UpstreamError(
            f"the Gemini API answered HTTP {exc.code} {exc.status or ''}: {message}".strip(),
            {"operation": operation, "status": exc.code},
        )

    def _redacted(self, text: str) -> str:
        key = self._clients.key.get_secret_value() if self._clients.key is not None else ""
        return text.replace(key, "***") if key else text


def _retry_after_s(exc: APIError) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class _Failure:
    """A retryable failure of one attempt."""

    what: str  # "HTTP 503 UNAVAILABLE", or the transport error's class name
    retry_after_s: float | None
    timed_out: bool


def _gave_up(operation: str, made: int, failure: _Failure | None) -> RetrievalError:
    """The error once no attempt is left: a time-out if the last one timed out or none could start."""
    if failure is None or failure.timed_out:
        return UpstreamTimeoutError(
            f"the Gemini API did not answer in time ({made} attempts, within the request's deadline "
            "REQUEST_DEADLINE_S and HTTP_TIMEOUT_S per attempt)",
            {"operation": operation, "attempts": made},
        )
    retry_after = failure.retry_after_s
    return UpstreamUnavailableError(
        f"the Gemini API is unavailable ({failure.what} after {made} attempts); retry later",
        {"operation": operation, "attempts": made},
        retry_after_s=max(1, math.ceil(retry_after)) if retry_after else DEFAULT_RETRY_AFTER_S,
    )
