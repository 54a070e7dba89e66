"""The `bge` strategy: a cross-encoder behind HTTP, in TEI's or the Cohere/Jina-style request shape.

TEI (text-embeddings-inference) `POST /rerank`:
    {"query": q, "texts": [...], "raw_scores": false} -> [{"index": i, "score": s}, ...]
Cohere/Jina-style `POST /v1/rerank` (also Infinity, vLLM, OpenVINO Model Server):
    {"model"?: m, "query": q, "documents": [...]} -> {"results": [{"index": i, "relevance_score": s}]}
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

import httpx
from pydantic import SecretStr

from retrieval_core.clients.httpx_client import bearer, json_client
from retrieval_core.clients.provider_keys import ProviderKey, reranker_key
from retrieval_core.clients.retry import MAX_DETAIL_CHARS, RETRY_BASE_DELAY_S, is_retryable_status
from retrieval_core.exceptions import RerankerUnavailableError
from retrieval_core.rerank.base import (
    RerankScore,
    RetryableFailure,
    ranked_scores,
    transport_failures,
    with_attempts,
)
from retrieval_core.settings import Settings

RerankerApi = Literal["tei", "cohere"]
DEFAULT_PATHS: dict[RerankerApi, str] = {"tei": "/rerank", "cohere": "/v1/rerank"}
# TEI refuses more texts per request than its --max-client-batch-size, 32 by default.
DEFAULT_BATCH_SIZE = 32


def resolve_endpoint(url: str, api: Literal["auto", "tei", "cohere"]) -> tuple[RerankerApi, str]:
    """Which request shape to speak, and the URL to POST it to.

    A URL whose path ends in `/rerank` is used as it is; any other URL is a base URL and gets the
    API's path appended (`/rerank` for TEI, `/v1/rerank` for Cohere). With `auto`, a path ending in
    `/rerank` right after the host means TEI, any other path (such as `/v1/rerank`, `/v2/rerank`, or a
    bare base URL, which gets `/v1/rerank`) means the Cohere/Jina shape.
    """
    parsed = httpx.URL(url)
    path = parsed.path.rstrip("/")
    if api == "auto":
        api = "tei" if path == "/rerank" else "cohere"
    if not path.endswith("/rerank"):
        path = path + DEFAULT_PATHS[api]
    return api, str(parsed.copy_with(path=path))


class HTTPReranker:
    """POSTs the documents in batches to one reranker endpoint; 2 attempts within one time budget.

    The key is read on each rerank (a secret through its 5-minute cache), never when it is built.
    """

    strategy = "bge"

    def __init__(
        self,
        *,
        url: str,
        api: Literal["auto", "tei", "cohere"] = "auto",
        model: str | None = None,
        api_key: ProviderKey | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout_s: float = 30.0,
        attempts: int = 2,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        self.api, self.endpoint = resolve_endpoint(url, api)
        self.model = model
        self._key = api_key or ProviderKey("RERANKER_API_KEY", required=False)
        self._batch_size = batch_size
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.retry_base_delay_s = retry_base_delay_s
        # Only the host goes into messages: a URL may carry credentials in its userinfo.
        self._label = f"reranker {httpx.URL(self.endpoint).host or 'service'}"
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> HTTPReranker:
        """Configure from RERANKER_SERVICE_URL, RERANKER_API, RERANKER_MODEL, RERANKER_API_KEY (or
        RERANKER_API_KEY_SECRET_ARN) and RERANK_*."""
        if not settings.reranker_service_url:
            raise ValueError("the bge reranker needs RERANKER_SERVICE_URL")
        return cls(
            url=settings.reranker_service_url,
            api=settings.reranker_api,
            model=settings.reranker_model,
            api_key=reranker_key(settings),
            batch_size=settings.reranker_batch_size,
            timeout_s=settings.rerank_timeout_s,
            attempts=settings.rerank_attempts,
        )

    def rerank(self, query: str, documents: Sequence[str]) -> list[RerankScore]:
        """One score per document, best first. The timeout covers every batch and attempt."""
        if not documents:
            return []
        self._http()
        key = self._key.read(RerankerUnavailableError)
        # The clock starts after the one-time client construction and the key's read (a cold start's cost).
        deadline = time.monotonic() + self.timeout_s
        pairs: list[tuple[object, object]] = []
        for start in range(0, len(documents), self._batch_size):
            batch = list(documents[start : start + self._batch_size])
            scored = self._score_batch(query, batch, deadline, key)
            checked = ranked_scores(scored, len(batch), self._label)
            pairs.extend((item.index + start, item.score) for item in checked)
        return ranked_scores(pairs, len(documents), self._label)

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = json_client(self.timeout_s)
            return self._client

    def _body(self, query: str, batch: list[str]) -> dict[str, Any]:
        if self.api == "tei":
            # raw_scores false: TEI applies the sigmoid, so scores are 0..1 and comparable across batches.
            return {"query": query, "texts": batch, "raw_scores": False}
        body: dict[str, Any] = {"query": query, "documents": batch}
        if self.model:
            body["model"] = self.model
        return body

    def _score_batch(
        self, query: str, batch: list[str], deadline: float, key: SecretStr | None
    ) -> list[tuple[object, object]]:
        client = self._http()
        body = self._body(query, batch)
        headers = bearer(key)

        def attempt(remaining_s: float) -> httpx.Response:
            with transport_failures("could not be reached"):
                response = client.post(
                    self.endpoint, json=body, headers=headers, timeout=httpx.Timeout(remaining_s)
                )
            if response.is_success:
                return response
            if is_retryable_status(response.status_code):
                raise RetryableFailure(
                    f"answered HTTP {response.status_code}", {"status": response.status_code}
                )
            raise self._error_for(response, key)

        response = with_attempts(
            attempt,
            label=self._label,
            attempts=self.attempts,
            deadline=deadline,
            retry_base_delay_s=self.retry_base_delay_s,
        )
        return self._parse(response)

    def _parse(self, response: httpx.Response) -> list[tuple[object, object]]:
        try:
            payload: Any = response.json()
            if self.api == "tei":
                return [(item["index"], item["score"]) for item in payload]
            return [(item["index"], item["relevance_score"]) for item in payload["results"]]
        except (ValueError, KeyError, TypeError) as exc:
            shape = "TEI's [{index, score}]" if self.api == "tei" else "{results: [{index, relevance_score}]}"
            raise RerankerUnavailableError(f"{self._label} answered with a body that is not {shape}") from exc

    def _error_for(self, response: httpx.Response, key: SecretStr | None) -> RerankerUnavailableError:
        status = response.status_code
        if status in (401, 403):
            return RerankerUnavailableError(
                f"{self._label} refused the credentials (HTTP {status}); check {self._key.source}",
                {"status": status},
            )
        detail = response.text
        if key is not None and key.get_secret_value():
            detail = detail.replace(key.get_secret_value(), "***")
        # A wrong path or request shape is the usual cause: say which ones were used.
        sent = f" (sent the {self.api} request shape to {httpx.URL(self.endpoint).path}; see RERANKER_API)"
        hint = sent if status in (400, 404, 405, 422) else ""
        return RerankerUnavailableError(
            f"{self._label} answered HTTP {status}{hint}: {detail[:MAX_DETAIL_CHARS]}", {"status": status}
        )
