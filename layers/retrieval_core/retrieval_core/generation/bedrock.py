"""The `bedrock` generator: the Bedrock Runtime Converse and ConverseStream APIs, through boto3.

Request (`POST /model/{modelId}/converse`, and `/converse-stream` with the same body):
    {"system": [{"text": <grounding rules>}],
     "messages": [{"role": "user", "content": [{"text": <numbered sources, then the question>}]}],
     "inferenceConfig": {"maxTokens": <max_output_tokens>, "temperature": 0}}
The sources travel inside the prompt text, numbered; no `document` blocks are sent, so the model cites
with `[n]` markers, which the answer service parses (generation/citations.py).

Answer: `output.message.content` is a list of blocks. `text` blocks and the `content[].text` of
`citationsContent` blocks, in order, make the answer's text; other blocks (reasoningContent, toolUse)
are not part of it. When at least one `citationsContent` block is present, the Generation carries
`native_citations`: one per such block, over the code points of the text that block contributes, citing
source `documentIndex + 1` (locations `documentChar`, `documentPage`, `documentChunk`) or
`searchResultIndex + 1` (`searchResultLocation`); a `web` location names no source and is left out.
Without such blocks the text is returned as written, markers included. `usage.inputTokens` and
`usage.outputTokens` become the token counts, `stopReason` the stop reason.

Stream: `contentBlockDelta` events' `delta.text` is yielded as it arrives; `delta.citation` (the same
location shape) cites the whole text of its content block. `messageStop` gives the stop reason,
`metadata` the usage; the Generation follows the last event.

Time: every attempt and the whole stream end within GENERATION_TIMEOUT_S, cut to the request's deadline
(clients/deadline.py). botocore's read timeout is fixed per client and bounds each read, not a call, so
each call runs in a daemon thread that the caller stops waiting for at the deadline; an abandoned call
ends at the client's read timeout. botocore makes one attempt per call: ours are `with_attempts`
(GENERATION_ATTEMPTS), and a stream is tried again only before its first text delta.

Errors, each naming the model: throttling and 5xx answers (also when sent inside the stream, as
`throttlingException` events) are tried again and, throttled to the last attempt, end as 503
`upstream_unavailable`; no answer in time as 504 `upstream_timeout`; AccessDenied or
UnrecognizedClient as `upstream_auth_rejected` naming the IAM permissions, never AWS's message (it can
name the access key id); anything else, such as a ValidationException for an unknown model or an answer
without text, as 502 `generation_provider_error`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from retrieval_core.clients.attempts import RetryableFailure, with_attempts
from retrieval_core.clients.aws import AwsFailure, aws_failure, lazy_aws_client, own_retries_options
from retrieval_core.clients.deadline import request_deadline
from retrieval_core.clients.retry import MAX_DETAIL_CHARS, RETRY_BASE_DELAY_S
from retrieval_core.clients.stream_reader import StreamReader
from retrieval_core.exceptions import (
    ConfigurationError,
    GenerationProviderError,
    RetrievalError,
    UpstreamAuthError,
)
from retrieval_core.generation.base import (
    Generation,
    GenerationRequest,
    NativeCitation,
    StreamEvent,
    give_up,
)
from retrieval_core.settings import Settings

T = TypeVar("T")

_BUDGET = "GENERATION_TIMEOUT_S"
_PERMISSIONS = "bedrock:InvokeModel and bedrock:InvokeModelWithResponseStream"
# Citation locations that name a source by its 0-based index in the request, and the field holding it.
_INDEXED_LOCATIONS = {
    "documentChar": "documentIndex",
    "documentPage": "documentIndex",
    "documentChunk": "documentIndex",
    "searchResultLocation": "searchResultIndex",
}
# The HTTP status of each exception ConverseStream can send inside its stream (its event carries none).
_STREAM_EXCEPTION_STATUS = {
    "ValidationException": 400,
    "ModelStreamErrorException": 424,
    "ThrottlingException": 429,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
}


class BedrockGenerator:
    """Answers through `bedrock-runtime` Converse (one call) or ConverseStream (text as it is written)."""

    provider = "bedrock"

    def __init__(
        self,
        *,
        model: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        timeout_s: float = 20.0,
        attempts: int = 2,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.retry_base_delay_s = retry_base_delay_s
        self._client = lazy_aws_client(
            "bedrock-runtime", own_retries_options(region, endpoint_url, timeout_s)
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> BedrockGenerator:
        """Configure from GENERATION_MODEL, GENERATION_TIMEOUT_S, GENERATION_ATTEMPTS, BEDROCK_REGION and
        BEDROCK_ENDPOINT_URL."""
        return cls(
            model=settings.resolved_generation_model,
            region=settings.bedrock_region,
            endpoint_url=settings.bedrock_endpoint_url,
            timeout_s=settings.generation_timeout_s,
            attempts=settings.generation_attempts,
        )

    def generate(self, request: GenerationRequest) -> Generation:
        """The whole answer from one Converse call (tried again on throttling, 5xx and time-outs)."""
        client = self._bedrock()
        label = _label(request.model)
        response = self._attempts(
            partial(self._converse, client, _body(request), request.model), label, self._deadline()
        )
        answer = _Answer()
        try:
            for block in response["output"]["message"]["content"]:
                if "citationsContent" in block:
                    cited = block["citationsContent"]
                    answer.add_cited("".join(c.get("text", "") for c in cited.get("content", [])), cited)
                elif isinstance(block.get("text"), str):
                    answer.add_text(block["text"])
        except (KeyError, TypeError) as exc:
            raise GenerationProviderError(f"{label}: Converse answered without output.message") from exc
        answer.stop_reason = response.get("stopReason")
        answer.usage = response.get("usage") or {}
        return answer.generation(label, request.model)

    def stream(self, request: GenerationRequest) -> Iterator[StreamEvent]:
        """Text deltas from ConverseStream as they arrive, then the Generation."""
        client = self._bedrock()
        label = _label(request.model)
        deadline = self._deadline()
        feed, pending = self._attempts(
            partial(self._open_stream, client, _body(request), request.model), label, deadline
        )
        answer = _Answer()
        try:
            yield from answer.add_events(pending)
            while True:
                try:
                    event = feed.next(deadline)
                except TimeoutError:
                    raise give_up(
                        f"{label}: the stream did not end within {_BUDGET} or the request's deadline",
                        {},
                        out_of_time=True,
                    ) from None
                except Exception as exc:
                    failure = self._error_for(exc, request.model)
                    if isinstance(failure, RetryableFailure):
                        message = f"{label}: {failure.reason} after the first text"
                        raise give_up(message, failure.details, out_of_time=failure.timed_out) from exc
                    raise failure from exc
                if event is None:
                    break
                yield from answer.add_events([event])
        finally:
            feed.close()
        yield answer.generation(label, request.model)

    # One attempt.

    def _converse(self, client: Any, body: dict[str, Any], model: str, remaining_s: float) -> Any:
        feed = StreamReader(lambda: iter([client.converse(modelId=model, **body)]), "bedrock-converse")
        try:
            return feed.next(time.monotonic() + remaining_s)
        except TimeoutError:
            raise RetryableFailure("no answer within the time left", timed_out=True) from None
        except Exception as exc:
            raise self._error_for(exc, model) from exc
        finally:
            feed.close()

    def _open_stream(
        self, client: Any, body: dict[str, Any], model: str, remaining_s: float
    ) -> tuple[StreamReader[Any], list[Any]]:
        """Open the stream and read it up to its first text delta (or its end): retries stop there."""

        def events() -> Iterator[Any]:
            stream = client.converse_stream(modelId=model, **body)["stream"]
            try:
                yield from stream
            finally:
                stream.close()

        attempt_deadline = time.monotonic() + remaining_s
        feed = StreamReader(events, "bedrock-converse-stream")
        pending: list[Any] = []
        try:
            while not pending or not _is_text_delta(pending[-1]):
                event = feed.next(attempt_deadline)
                if event is None:
                    break
                pending.append(event)
        except TimeoutError:
            feed.close()
            raise RetryableFailure("no text within the time left", timed_out=True) from None
        except Exception as exc:
            feed.close()
            raise self._error_for(exc, model) from exc
        return feed, pending

    # Helpers.

    def _attempts(self, attempt: Callable[[float], T], label: str, deadline: float) -> T:
        return with_attempts(
            attempt,
            label=label,
            attempts=self.attempts,
            deadline=deadline,
            retry_base_delay_s=self.retry_base_delay_s,
            budget=_BUDGET,
            give_up=give_up,
        )

    def _deadline(self) -> float:
        """When the call must be over: GENERATION_TIMEOUT_S from now, or the request's deadline if sooner."""
        deadline = time.monotonic() + self.timeout_s
        request_left = request_deadline().remaining_s()
        return deadline if request_left is None else min(deadline, time.monotonic() + request_left)

    def _bedrock(self) -> Any:
        from botocore.exceptions import NoRegionError

        try:
            return self._client()
        except NoRegionError as exc:
            raise ConfigurationError(
                "GENERATION_PROVIDER=bedrock needs BEDROCK_REGION (or AWS_REGION) to be set"
            ) from exc

    @staticmethod
    def _error_for(exc: Exception, model: str) -> RetrievalError | RetryableFailure:
        """What a failed call raises: another attempt for transient failures, else the error to report."""
        from botocore import exceptions as boto_errors

        if not isinstance(exc, boto_errors.BotoCoreError | boto_errors.ClientError):
            return GenerationProviderError(f"{_label(model)}: the call failed ({type(exc).__name__})")
        failure = _stream_failure(exc) if isinstance(exc, boto_errors.EventStreamError) else aws_failure(exc)
        label = _label(model)
        if failure.kind == "no-credentials":
            return ConfigurationError("GENERATION_PROVIDER=bedrock found no AWS credentials")
        if failure.kind == "unreachable":
            reason = "Bedrock did not answer in time" if failure.timed_out else "Bedrock could not be reached"
            return RetryableFailure(f"{reason} ({failure.code})", timed_out=failure.timed_out)
        if failure.kind == "refused-locally":
            return GenerationProviderError(f"{label}: botocore refused to send the call ({failure.code})")
        if failure.retryable:
            return RetryableFailure(f"Converse answered {failure.reason}", {"status": failure.status})
        message = failure.answered_message(
            label, service="Bedrock", permissions=_PERMISSIONS, answered_by="Converse"
        )
        if failure.credentials_refused:
            return UpstreamAuthError(message, failure.details)
        return GenerationProviderError(message, failure.details)


def _label(model: str) -> str:
    return f"Bedrock Converse (model {model!r})"


def _body(request: GenerationRequest) -> dict[str, Any]:
    return {
        "system": [{"text": request.system}],
        "messages": [{"role": "user", "content": [{"text": request.prompt}]}],
        "inferenceConfig": {"maxTokens": request.max_output_tokens, "temperature": 0},
    }


def _is_text_delta(event: Any) -> bool:
    return bool(event.get("contentBlockDelta", {}).get("delta", {}).get("text"))


def _stream_failure(exc: Any) -> AwsFailure:
    """An exception sent inside the stream: its code is the event's name (`throttlingException`), and it
    carries no HTTP status, so the status is the one the API documents for that exception."""
    error = exc.response.get("Error", {})
    name = str(error.get("Code") or "Unknown")
    code = name[:1].upper() + name[1:]
    message = str(error.get("Message", ""))[:MAX_DETAIL_CHARS]
    # An exception the table does not know is taken for a fault of the service, as a 5xx would be.
    return AwsFailure("answered", code, _STREAM_EXCEPTION_STATUS.get(code, 500), message)


def _source_number(citation: Any) -> int | None:
    """The 1-based source number a citation's location names, or None (a web page, an unknown shape)."""
    location = citation.get("location") if isinstance(citation, dict) else None
    for kind, index_field in _INDEXED_LOCATIONS.items():
        index = (location or {}).get(kind, {}).get(index_field)
        if isinstance(index, int) and index >= 0:
            return index + 1
    return None


@dataclass
class _Block:
    """One content block's part of the answer: where its text lies and the citations it carries."""

    start: int
    end: int
    citations: list[Any] | None = None  # None: a block without citations


@dataclass
class _Answer:
    """The answer as it is put together, from a Converse response or ConverseStream events."""

    parts: list[str] = field(default_factory=list)
    length: int = 0  # code points so far
    blocks: dict[int, _Block] = field(default_factory=dict)
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    def add_text(self, text: str, index: int | None = None) -> None:
        """Append text, part of content block `index` (a block of its own when None)."""
        index = len(self.blocks) if index is None else index
        block = self.blocks.setdefault(index, _Block(self.length, self.length))
        self.parts.append(text)
        self.length += len(text)
        block.end = self.length

    def add_cited(self, text: str, citations: dict[str, Any]) -> None:
        """A citationsContent block: its text, cited by its citations."""
        index = len(self.blocks)
        self.add_text(text, index)
        self.blocks[index].citations = list(citations.get("citations") or [])

    def add_events(self, events: list[Any]) -> Iterator[str]:
        """Take in ConverseStream events; yield their text deltas."""
        for event in events:
            if "contentBlockDelta" in event:
                delta_event = event["contentBlockDelta"]
                index = int(delta_event.get("contentBlockIndex", 0))
                delta = delta_event.get("delta", {})
                if delta.get("text"):
                    self.add_text(delta["text"], index)
                    yield delta["text"]
                if "citation" in delta:
                    block = self.blocks.setdefault(index, _Block(self.length, self.length))
                    block.citations = [*(block.citations or []), delta["citation"]]
            elif "messageStop" in event:
                self.stop_reason = event["messageStop"].get("stopReason")
            elif "metadata" in event:
                self.usage = event["metadata"].get("usage") or {}

    def generation(self, label: str, model: str) -> Generation:
        """The Generation, or GenerationProviderError when the model wrote no text."""
        text = "".join(self.parts)
        if not text.strip():
            raise GenerationProviderError(
                f"{label}: the model answered no text (stopReason {self.stop_reason!r})",
                {"stopReason": self.stop_reason},
            )
        cited = [block for block in self.blocks.values() if block.citations is not None]
        native: list[NativeCitation] | None = None
        if cited:
            native = []
            for block in cited:
                numbers = tuple(dict.fromkeys(n for c in block.citations or [] if (n := _source_number(c))))
                if numbers and block.start < block.end:
                    native.append(NativeCitation(block.start, block.end, numbers))
        return Generation(
            text=text,
            model=model,
            native_citations=native,
            input_tokens=_count(self.usage.get("inputTokens")),
            output_tokens=_count(self.usage.get("outputTokens")),
            stop_reason=self.stop_reason,
        )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) else None
