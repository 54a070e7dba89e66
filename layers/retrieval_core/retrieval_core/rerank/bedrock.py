"""The `bedrock` strategy: the Bedrock Agent Runtime `Rerank` API (Amazon Rerank, Cohere Rerank on Bedrock).

boto3 is imported when the first rerank runs. Request, as botocore serialises it (`POST /rerank`):
    {"queries": [{"type": "TEXT", "textQuery": {"text": q}}],
     "sources": [{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d}}}],
     "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration":
         {"numberOfResults": n, "modelConfiguration": {"modelArn": arn}}}}
Answer: {"results": [{"index": i, "relevanceScore": s}], "nextToken"?: t}.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from retrieval_core.clients.aws import AwsFailure, aws_failure, lazy_aws_client, own_retries_options
from retrieval_core.clients.retry import RETRY_BASE_DELAY_S
from retrieval_core.exceptions import RerankerUnavailableError
from retrieval_core.rerank.base import RerankScore, RetryableFailure, ranked_scores, with_attempts
from retrieval_core.settings import Settings

# The API's limits: 1,000 sources per call, 32,000 characters per text, and no empty text.
MAX_SOURCES = 1000
MAX_TEXT_CHARS = 32_000
_LABEL = "Bedrock reranker"


def _text(value: str) -> str:
    return value[:MAX_TEXT_CHARS] or " "


class BedrockReranker:
    """`bedrock-agent-runtime` Rerank, all candidates in one call (pages followed through nextToken)."""

    strategy = "bedrock"

    def __init__(
        self,
        *,
        model: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        timeout_s: float = 30.0,
        attempts: int = 2,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.retry_base_delay_s = retry_base_delay_s
        # Retries are ours (`with_attempts`), within the rerank time budget: botocore makes one attempt.
        self._client = lazy_aws_client(
            "bedrock-agent-runtime", own_retries_options(region, endpoint_url, timeout_s)
        )
        self._model_arn: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> BedrockReranker:
        """Configure from BEDROCK_RERANK_MODEL, BEDROCK_REGION, BEDROCK_AGENT_RUNTIME_ENDPOINT_URL."""
        return cls(
            model=settings.bedrock_rerank_model,
            region=settings.bedrock_region,
            endpoint_url=settings.bedrock_agent_runtime_endpoint_url,
            timeout_s=settings.rerank_timeout_s,
            attempts=settings.rerank_attempts,
        )

    @property
    def model_arn(self) -> str:
        """BEDROCK_RERANK_MODEL as an ARN: a model id becomes a foundation-model ARN in its region."""
        client = self._bedrock()
        if self._model_arn is None:
            if self.model.startswith("arn:"):
                self._model_arn = self.model
            else:
                partition = getattr(client.meta, "partition", "aws")
                self._model_arn = (
                    f"arn:{partition}:bedrock:{client.meta.region_name}::foundation-model/{self.model}"
                )
        return self._model_arn

    def rerank(self, query: str, documents: Sequence[str]) -> list[RerankScore]:
        """One score per document, best first."""
        if not documents:
            return []
        if len(documents) > MAX_SOURCES:
            raise RerankerUnavailableError(
                f"{_LABEL}: the Rerank API takes at most {MAX_SOURCES} documents, got {len(documents)}"
            )
        client = self._bedrock()
        model_arn = self.model_arn
        # The clock starts after the one-time import and client construction (a cold start's cost).
        deadline = time.monotonic() + self.timeout_s
        request: dict[str, Any] = {
            "queries": [{"type": "TEXT", "textQuery": {"text": _text(query)}}],
            "sources": [
                {
                    "type": "INLINE",
                    "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": _text(d)}},
                }
                for d in documents
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": len(documents),
                    "modelConfiguration": {"modelArn": model_arn},
                },
            },
        }
        pairs: list[tuple[object, object]] = []
        next_token: str | None = None
        while True:
            page_request = {**request, "nextToken": next_token} if next_token else request
            page = with_attempts(
                partial(self._call, client, page_request),
                label=_LABEL,
                attempts=self.attempts,
                deadline=deadline,
                retry_base_delay_s=self.retry_base_delay_s,
            )
            try:
                pairs.extend((item["index"], item["relevanceScore"]) for item in page["results"])
            except (KeyError, TypeError) as exc:
                raise RerankerUnavailableError(f"{_LABEL}: Rerank answered without results") from exc
            next_token = page.get("nextToken")
            if not next_token:
                break
        return ranked_scores(pairs, len(documents), _LABEL)

    def _bedrock(self) -> Any:
        from botocore.exceptions import NoRegionError

        try:
            return self._client()
        except NoRegionError as exc:
            raise RerankerUnavailableError(
                f"{_LABEL} needs BEDROCK_REGION (or AWS_REGION) to be set"
            ) from exc

    def _call(self, client: Any, request: dict[str, Any], _remaining_s: float) -> dict[str, Any]:
        # botocore's read timeout is fixed per client (RERANK_TIMEOUT_S), so `_remaining_s` goes unused:
        # a retry only starts while the budget lasts, but one started attempt may finish after it.
        from botocore import exceptions as boto_errors

        try:
            response: dict[str, Any] = client.rerank(**request)
            return response
        except (boto_errors.BotoCoreError, boto_errors.ClientError) as exc:
            raise self._error_for(aws_failure(exc)) from exc

    @staticmethod
    def _error_for(failure: AwsFailure) -> RerankerUnavailableError | RetryableFailure:
        if failure.kind == "no-credentials":
            return RerankerUnavailableError(f"{_LABEL} found no AWS credentials")
        if failure.kind == "unreachable":
            return RetryableFailure(f"Bedrock could not be reached ({failure.code})")
        if failure.kind == "refused-locally":
            # E.g. partial credentials or a request botocore refuses to send: another try would not help.
            return RerankerUnavailableError(f"{_LABEL}: botocore refused the call ({failure.code})")
        if failure.retryable:
            return RetryableFailure(f"Rerank answered {failure.reason}", {"status": failure.status})
        return RerankerUnavailableError(
            failure.answered_message(
                _LABEL,
                service="Bedrock",
                permissions="bedrock:Rerank and bedrock:InvokeModel",
                answered_by="Rerank",
            ),
            failure.details,
        )
