"""Gemini embeddings through google-genai, which is imported on first use (it adds ~0.5 s of cold start)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import httpx
from pydantic import SecretStr

from retrieval_core.clients.deadline import attempt_timeout_s, request_deadline
from retrieval_core.clients.genai import build_genai_client, key_rejected, retry_options
from retrieval_core.clients.provider_keys import ClientForKey, ProviderKey, gemini_embedding_key
from retrieval_core.clients.retry import (
    MAX_DETAIL_CHARS,
    RETRY_ATTEMPTS,
    RETRY_BASE_DELAY_S,
    RETRYABLE_STATUSES,
    Deadline,
    worst_case_s,
)
from retrieval_core.embeddings.base import EmbeddingKind, check_vectors
from retrieval_core.exceptions import ConfigurationError, EmbeddingProviderError, UpstreamTimeoutError
from retrieval_core.settings import Settings

if TYPE_CHECKING:
    from google.genai import Client
    from google.genai.errors import APIError

# batchEmbedContents refuses more than 100 requests in one call.
MAX_BATCH_SIZE = 100
TASK_TYPES: dict[EmbeddingKind, str] = {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"}
# Named rather than left to the SDK, whose default moved from v1beta to v1 in google-genai 3.0: every
# release we allow then calls the same, stable endpoint.
EMBEDDINGS_API_VERSION = "v1"
_PROVIDER = "Gemini embeddings"


def _normalize(vector: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(value * value for value in vector))
    return [value / norm for value in vector] if norm > 0 else vector


class GeminiEmbedder:
    """`models.embed_content` on the Gemini API, with the retrieval task type set per call.

    Vectors are L2-normalised: Gemini returns unit vectors only at the full 3072 dimensions. The key is
    read on each call (a secret through its 5-minute cache), never when the embedder is built; the
    client is built again when the key changed.
    """

    def __init__(
        self,
        *,
        api_key: ProviderKey,
        model: str,
        dimension: int,
        base_url: str | None = None,
        batch_size: int = MAX_BATCH_SIZE,
        timeout_s: float = 30.0,
        retry_attempts: int = RETRY_ATTEMPTS,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        self._key = api_key
        self.model = model
        self.dimension = dimension
        self._base_url = base_url
        self._batch_size = min(batch_size, MAX_BATCH_SIZE)
        self._timeout_s = timeout_s
        # Read when the client is built, on the first embed call.
        self.retry_attempts = retry_attempts
        self.retry_base_delay_s = retry_base_delay_s
        self._clients: ClientForKey[Client] = ClientForKey(self._build_client)

    @classmethod
    def from_settings(cls, settings: Settings) -> GeminiEmbedder:
        """Configure from GEMINI_API_KEY (or a key secret, see `gemini_embedding_key`), GEMINI_BASE_URL
        and the EMBEDDING_* settings."""
        return cls(
            api_key=gemini_embedding_key(settings),
            model=settings.resolved_embedding_model,
            dimension=settings.resolved_embedding_dimension,
            base_url=settings.gemini_base_url,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.http_timeout_s,
        )

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self._batch_size]), kind))
        return vectors

    def _build_client(self, key: SecretStr) -> Client:
        try:
            return build_genai_client(
                api_key=key,
                base_url=self._base_url,
                timeout_s=self._timeout_s,
                retry_attempts=self.retry_attempts,
                retry_base_delay_s=self.retry_base_delay_s,
                retryable_statuses=RETRYABLE_STATUSES,
                api_version=EMBEDDINGS_API_VERSION,
            )
        except ImportError as exc:
            raise ConfigurationError(
                "EMBEDDING_PROVIDER=gemini needs the google-genai package installed"
            ) from exc

    def _embed_batch(self, batch: list[str], kind: EmbeddingKind) -> list[list[float]]:
        key = self._key.read_required()
        client = self._clients.get(key)
        from google.genai import errors, types

        # One Content per text: a bare list of strings is merged into a single multi-part
        # Content for multimodal embedding models, which would yield one vector for the batch.
        contents = [types.Content(parts=[types.Part(text=text)]) for text in batch]
        timeout_s, attempts = self._attempts_within(request_deadline())
        config = types.EmbedContentConfig(
            task_type=TASK_TYPES[kind],
            output_dimensionality=self.dimension,
            http_options=types.HttpOptions(
                timeout=max(1, int(timeout_s * 1000)),
                retry_options=retry_options(attempts, self.retry_base_delay_s, RETRYABLE_STATUSES),
            ),
        )
        try:
            response = client.models.embed_content(model=self.model, contents=contents, config=config)
        except errors.APIError as exc:
            raise self._error_for(exc, key) from exc
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError(
                f"{_PROVIDER}: the Gemini API did not answer in time ({type(exc).__name__})"
            ) from exc
        except httpx.TransportError as exc:
            raise EmbeddingProviderError(
                f"{_PROVIDER}: the Gemini API could not be reached ({type(exc).__name__})"
            ) from exc
        vectors = [list(embedding.values or []) for embedding in response.embeddings or []]
        check_vectors(vectors, len(batch), self.dimension, _PROVIDER)
        return [_normalize(vector) for vector in vectors]

    def _attempts_within(self, deadline: Deadline) -> tuple[float, int]:
        """HTTP_TIMEOUT_S and the retry attempts, cut so that the SDK's retries end before `deadline`."""
        timeout_s = attempt_timeout_s(self._timeout_s, deadline)
        remaining = deadline.remaining_s()
        if timeout_s is None or remaining is None:
            if timeout_s is None:
                raise UpstreamTimeoutError(
                    f"{_PROVIDER}: no time left before the request's deadline (REQUEST_DEADLINE_S)"
                )
            return timeout_s, self.retry_attempts
        fitting = [
            n
            for n in range(1, self.retry_attempts + 1)
            if worst_case_s(n, timeout_s, self.retry_base_delay_s) <= remaining
        ]
        return timeout_s, max(fitting, default=1)

    def _error_for(self, exc: APIError, key: SecretStr) -> EmbeddingProviderError:
        if key_rejected(exc):
            return EmbeddingProviderError(
                f"{_PROVIDER}: the Gemini API refused the credentials (HTTP {exc.code} {exc.status}); "
                f"check {self._key.source}",
                {"status": exc.code},
            )
        detail = str(exc.message or exc.status or "").replace(key.get_secret_value(), "***")
        attempts = f" after {self.retry_attempts} attempts" if exc.code in RETRYABLE_STATUSES else ""
        return EmbeddingProviderError(
            f"{_PROVIDER}: the Gemini API answered HTTP {exc.code} {exc.status}{attempts}: "
            f"{detail[:MAX_DETAIL_CHARS]}",
            {"status": exc.code},
        )
