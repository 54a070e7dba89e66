"""Embeddings from any server speaking OpenAI's `POST /embeddings`: OpenAI, Ollama, TEI, vLLM."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import SecretStr

from retrieval_core.clients.deadline import attempt_timeout_s, request_deadline, time_for_retry
from retrieval_core.clients.httpx_client import bearer, json_client
from retrieval_core.clients.provider_keys import ProviderKey, openai_embedding_key
from retrieval_core.clients.retry import (
    MAX_DETAIL_CHARS,
    RETRY_ATTEMPTS,
    RETRY_BASE_DELAY_S,
    backoff_delay,
    is_retryable_status,
)
from retrieval_core.embeddings.base import EmbeddingKind, check_vectors
from retrieval_core.exceptions import EmbeddingProviderError, UpstreamTimeoutError
from retrieval_core.settings import Settings

logger = logging.getLogger(__name__)


class OpenAICompatibleEmbedder:
    """Calls `{base_url}/embeddings` in batches, retrying 408/429/5xx and transport errors.

    The key is read on each call (`api_key.read()`, a secret through its 5-minute cache), never when
    the embedder is built: built before a SnapStart snapshot, it holds no key.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimension: int,
        api_key: ProviderKey | None = None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        retry_attempts: int = RETRY_ATTEMPTS,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self.model = model
        self.dimension = dimension
        self._key = api_key or ProviderKey("OPENAI_API_KEY", required=False)
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self.retry_attempts = retry_attempts
        self.retry_base_delay_s = retry_base_delay_s
        # Only the host goes into messages: a base URL may carry credentials in its userinfo.
        self._label = f"embedding endpoint {httpx.URL(self._base_url).host or self._base_url}"
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleEmbedder:
        """From OPENAI_BASE_URL, OPENAI_API_KEY (or EMBEDDING_API_KEY_SECRET_ARN) and EMBEDDING_*."""
        return cls(
            base_url=settings.openai_base_url,
            model=settings.resolved_embedding_model,
            dimension=settings.resolved_embedding_dimension,
            api_key=openai_embedding_key(settings),
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.http_timeout_s,
        )

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        # OpenAI-style endpoints take no query/document hint: `kind` does not reach the wire.
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self._batch_size])))
        return vectors

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = json_client(self._timeout_s, self._base_url)
            return self._client

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        response = self._post_with_retries({"model": self.model, "input": batch})
        try:
            payload: Any = response.json()
            items = sorted(payload["data"], key=lambda item: int(item["index"]))
            vectors = [[float(value) for value in item["embedding"]] for item in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingProviderError(
                f"{self._label} answered with a body that is not an embeddings list"
            ) from exc
        return check_vectors(vectors, len(batch), self.dimension, self._label)

    def _post_with_retries(self, body: dict[str, Any]) -> httpx.Response:
        client = self._http()
        key = self._key.read()
        deadline = request_deadline()
        for attempt in range(1, self.retry_attempts + 1):
            timeout_s = attempt_timeout_s(self._timeout_s, deadline)
            if timeout_s is None:
                raise UpstreamTimeoutError(
                    f"{self._label} did not answer before the request's deadline (REQUEST_DEADLINE_S), "
                    f"{attempt - 1} attempts",
                    {"attempts": attempt - 1},
                )
            delay = backoff_delay(attempt, self.retry_base_delay_s)
            try:
                response = client.post("/embeddings", json=body, headers=bearer(key), timeout=timeout_s)
            except httpx.TransportError as exc:
                last_try = attempt == self.retry_attempts or not time_for_retry(delay, deadline)
                if last_try and isinstance(exc, httpx.TimeoutException):
                    raise UpstreamTimeoutError(
                        f"{self._label} did not answer within {self._timeout_s:g} s, {attempt} attempts "
                        "(HTTP_TIMEOUT_S)",
                        {"attempts": attempt},
                    ) from exc
                if last_try:
                    raise EmbeddingProviderError(
                        f"{self._label} could not be reached after {attempt} attempts ({type(exc).__name__})"
                    ) from exc
                logger.warning("%s: %s, retrying", self._label, type(exc).__name__)
            else:
                last_try = attempt == self.retry_attempts or not time_for_retry(delay, deadline)
                if response.is_success:
                    return response
                if not is_retryable_status(response.status_code):
                    raise self._error_for(response, key)
                if last_try:
                    raise EmbeddingProviderError(
                        f"{self._label} still answered HTTP {response.status_code} after {attempt} attempts",
                        {"status": response.status_code, "attempts": attempt},
                    )
                logger.warning("%s answered HTTP %d, retrying", self._label, response.status_code)
            time.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _error_for(self, response: httpx.Response, key: SecretStr | None) -> EmbeddingProviderError:
        status = response.status_code
        if status in (401, 403):
            # The body is left out on purpose: OpenAI echoes (part of) the rejected key in it.
            return EmbeddingProviderError(
                f"{self._label} refused the credentials (HTTP {status}); check {self._key.source}",
                {"status": status},
            )
        return EmbeddingProviderError(
            f"{self._label} answered HTTP {status}: {self._detail(response, key)}", {"status": status}
        )

    def _detail(self, response: httpx.Response, key: SecretStr | None) -> str:
        try:
            payload: Any = response.json()
            error = payload.get("error", payload) if isinstance(payload, dict) else payload
            detail = str(error.get("message", error) if isinstance(error, dict) else error)
        except ValueError:
            detail = response.text
        if key is not None and key.get_secret_value():
            detail = detail.replace(key.get_secret_value(), "***")
        return detail[:MAX_DETAIL_CHARS]
