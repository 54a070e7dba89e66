"""Amazon Titan Text Embeddings v2 on Bedrock. boto3 is imported when the first text is embedded."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from retrieval_core.clients.aws import AwsFailure, aws_failure, lazy_aws_client, own_retries_options
from retrieval_core.clients.deadline import request_deadline, time_for_retry
from retrieval_core.clients.retry import (
    RETRY_ATTEMPTS,
    RETRY_BASE_DELAY_S,
    Deadline,
    backoff_delay,
)
from retrieval_core.embeddings.base import EmbeddingKind, check_vectors
from retrieval_core.exceptions import (
    ConfigurationError,
    EmbeddingProviderError,
    RetrievalError,
    UpstreamTimeoutError,
)
from retrieval_core.settings import Settings

logger = logging.getLogger(__name__)

TITAN_V2_DIMENSIONS = (256, 512, 1024)
MAX_CONCURRENCY = 8
_PROVIDER = "Bedrock Titan embeddings"


class BedrockTitanEmbedder:
    """`bedrock-runtime` InvokeModel, one text per call (Titan v2's contract), run on a small thread pool.

    Retries are ours rather than botocore's so that every provider backs off the same way.
    """

    def __init__(
        self,
        *,
        model: str,
        dimension: int,
        region: str | None = None,
        endpoint_url: str | None = None,
        timeout_s: float = 30.0,
        concurrency: int = MAX_CONCURRENCY,
        retry_attempts: int = RETRY_ATTEMPTS,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        if dimension not in TITAN_V2_DIMENSIONS:
            raise ConfigurationError(
                f"Titan Text Embeddings v2 produces {', '.join(map(str, TITAN_V2_DIMENSIONS))} dimensions, "
                f"not {dimension}; set EMBEDDING_DIMENSION to one of them",
                {"dimension": dimension, "allowed": list(TITAN_V2_DIMENSIONS)},
            )
        self.model = model
        self.dimension = dimension
        self._timeout_s = timeout_s
        self._concurrency = max(1, concurrency)
        self.retry_attempts = retry_attempts
        self.retry_base_delay_s = retry_base_delay_s
        # Retries are ours (see above): botocore makes one attempt per call.
        self._client = lazy_aws_client(
            "bedrock-runtime", own_retries_options(region, endpoint_url, timeout_s, self._concurrency)
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> BedrockTitanEmbedder:
        """Configure from BEDROCK_REGION, BEDROCK_ENDPOINT_URL and the EMBEDDING_* settings."""
        return cls(
            model=settings.resolved_embedding_model,
            dimension=settings.resolved_embedding_dimension,
            region=settings.bedrock_region,
            endpoint_url=settings.bedrock_endpoint_url,
            timeout_s=settings.http_timeout_s,
        )

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        # Titan v2 has no query/document distinction: `kind` does not reach the wire.
        if not texts:
            return []
        client = self._bedrock()
        # Read here: the pool's threads do not see the request's context.
        deadline = request_deadline()
        if len(texts) == 1:
            vectors = [self._embed_one(client, texts[0], deadline)]
        else:
            pool = ThreadPoolExecutor(
                max_workers=min(self._concurrency, len(texts)), thread_name_prefix="titan-embed"
            )
            try:
                futures = [pool.submit(self._embed_one, client, text, deadline) for text in texts]
                vectors = [future.result() for future in futures]
            finally:
                # On the first failure, drop the texts not yet sent instead of paying for them.
                pool.shutdown(wait=True, cancel_futures=True)
        return check_vectors(vectors, len(texts), self.dimension, _PROVIDER)

    def _bedrock(self) -> Any:
        from botocore.exceptions import NoRegionError

        try:
            return self._client()
        except NoRegionError as exc:
            raise ConfigurationError(
                "EMBEDDING_PROVIDER=bedrock needs BEDROCK_REGION (or AWS_REGION)"
            ) from exc

    def _embed_one(self, client: Any, text: str, deadline: Deadline) -> list[float]:
        from botocore import exceptions as boto_errors

        body = json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})
        for attempt in range(1, self.retry_attempts + 1):
            delay = backoff_delay(attempt, self.retry_base_delay_s)
            # botocore's read timeout is fixed per client: another attempt only when a whole one still fits.
            last_try = attempt == self.retry_attempts or not time_for_retry(self._timeout_s + delay, deadline)
            try:
                response = client.invoke_model(
                    modelId=self.model, body=body, contentType="application/json", accept="application/json"
                )
                return self._parse(response)
            except (boto_errors.BotoCoreError, boto_errors.ClientError) as exc:
                failure = aws_failure(exc)
                if failure.kind == "no-credentials":
                    raise ConfigurationError("EMBEDDING_PROVIDER=bedrock found no AWS credentials") from exc
                if failure.kind == "refused-locally":
                    raise  # a call botocore would not send: another attempt would not help either
                if not failure.retryable or last_try:
                    raise self._error_for(failure, attempt) from exc
                logger.warning("%s: %s, retrying", _PROVIDER, failure.reason)
            time.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _parse(self, response: Any) -> list[float]:
        try:
            payload: Any = json.loads(response["body"].read())
            return [float(value) for value in payload["embedding"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingProviderError(f"{_PROVIDER}: InvokeModel answered without an embedding") from exc

    @staticmethod
    def _error_for(failure: AwsFailure, attempts: int) -> RetrievalError:
        if failure.kind == "unreachable" and failure.timed_out:
            return UpstreamTimeoutError(
                f"{_PROVIDER}: Bedrock did not answer in time after {attempts} attempts ({failure.code})"
            )
        if failure.kind == "unreachable":
            return EmbeddingProviderError(
                f"{_PROVIDER}: Bedrock could not be reached after {attempts} attempts ({failure.code})"
            )
        after = f" after {attempts} attempts" if failure.retryable else ""
        return EmbeddingProviderError(
            failure.answered_message(
                _PROVIDER,
                service="Bedrock",
                permissions="bedrock:InvokeModel",
                answered_by="Bedrock",
                after=after,
            ),
            failure.details,
        )
