"""Answers from any server speaking OpenAI's `POST /chat/completions`: OpenAI, vLLM, Ollama, LiteLLM.

One request per answer: the grounding rules as the system turn, the sources and the question as the user
turn, temperature 0. api.openai.com gets the token limit as `max_completion_tokens` (it deprecates
`max_tokens`, which its reasoning models refuse); any other server gets `max_tokens`, which they all
read. A model that refuses temperature 0 (OpenAI's reasoning models answer 400 with `param: temperature`)
is asked again at once without one, and from then on without one.

A stream asks for `stream_options.include_usage`, so that its last event counts the tokens; a server that
sends no usage leaves the counts None.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from retrieval_core.clients.attempts import RetryableFailure, transport_failures, with_attempts
from retrieval_core.clients.deadline import request_deadline
from retrieval_core.clients.httpx_client import bearer, json_client, retry_after_s
from retrieval_core.clients.provider_keys import OPENAI_HOST, ProviderKey, generation_key
from retrieval_core.clients.retry import MAX_DETAIL_CHARS, RETRY_BASE_DELAY_S, is_retryable_status
from retrieval_core.exceptions import GenerationProviderError, RetrievalError, UpstreamAuthError
from retrieval_core.generation.base import Generation, GenerationRequest, StreamEvent, give_up
from retrieval_core.settings import Settings

T = TypeVar("T")

BUDGET = "GENERATION_TIMEOUT_S"
SSE_DONE = "[DONE]"


def token_limit_field(base_url: str) -> str:
    """The request field of the answer's token limit: `max_completion_tokens` for api.openai.com,
    `max_tokens` for every other server."""
    return "max_completion_tokens" if urlsplit(base_url).hostname == OPENAI_HOST else "max_tokens"


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The data of each server-sent event in `lines` (its `data:` lines joined by newlines).

    Comments (`:`) and other fields (`event:`, `id:`, `retry:`) are skipped; a blank line ends an event.
    """
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def _error(response: httpx.Response) -> dict[str, Any]:
    """The `error` object of an OpenAI-style error body ({} when there is none)."""
    try:
        payload: Any = response.json()
    except ValueError:
        return {}
    error = payload.get("error") if isinstance(payload, dict) else None
    return error if isinstance(error, dict) else {}


def _cut_at(response: httpx.Response, deadline: float) -> threading.Timer | None:
    """A started timer that shuts the response's socket down at `deadline`, so that a read waiting on a
    stream that stalled returns then (a read timeout counts from each read, not from the deadline)."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if not isinstance(sock, socket.socket):
        return None

    def shut() -> None:
        with contextlib.suppress(OSError):  # already closed: the stream ended
            sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), shut)
    timer.daemon = True
    timer.start()
    return timer


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class _Answer:
    """What the events of a stream said so far."""

    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    def absorb(self, chunk: dict[str, Any]) -> str:
        """Take in one `chat.completion.chunk`; its text delta ("" when it has none)."""
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            self.parts.append(content)
            return content
        return ""

    def generation(self, model: str) -> Generation:
        usage = self.usage or {}
        return Generation(
            text="".join(self.parts),
            model=model,
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            stop_reason=self.finish_reason,
        )


@dataclass
class _OpenStream:
    """A stream that sent its first words: the response, the timer that cuts it at the deadline, the
    chunks still to read, and what was said so far."""

    response: httpx.Response
    timer: threading.Timer | None
    chunks: Iterator[dict[str, Any]]
    answer: _Answer = field(default_factory=_Answer)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.response.close()


class OpenAICompatibleGenerator:
    """POSTs `{base_url}/chat/completions`; attempts again on 408, 429, 5xx and time-outs within one budget.

    The client is built on first use and the key read on each call (a secret through its 5-minute
    cache), never when the generator is built: built before a SnapStart snapshot, it holds no key.
    """

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: ProviderKey | None = None,
        timeout_s: float = 20.0,
        attempts: int = 2,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self.model = model
        self._key = api_key or ProviderKey("GENERATION_API_KEY", required=False)
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.retry_base_delay_s = retry_base_delay_s
        self._token_field = token_limit_field(self._base_url)
        # Only the host goes into messages: a base URL may carry credentials in its userinfo.
        self._label = f"generation endpoint {httpx.URL(self._base_url).host or 'service'}"
        self._no_temperature: set[str] = set()  # models that refused temperature 0
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleGenerator:
        """From GENERATION_BASE_URL, GENERATION_API_KEY (or GENERATION_API_KEY_SECRET_ARN), GENERATION_MODEL,
        GENERATION_TIMEOUT_S and GENERATION_ATTEMPTS."""
        return cls(
            base_url=settings.generation_base_url,
            model=settings.resolved_generation_model,
            api_key=generation_key(settings),
            timeout_s=settings.generation_timeout_s,
            attempts=settings.generation_attempts,
        )

    def generate(self, request: GenerationRequest) -> Generation:
        """The whole answer from one chat completion."""
        client, key, deadline = self._http(), self._key.read(), self._deadline()

        def attempt(remaining_s: float) -> Any:
            response = self._send(client, request, key, remaining_s, deadline, stream=False)
            try:
                return response.json()
            except ValueError as exc:
                raise self._unusable("a body that is not JSON") from exc

        payload = self._attempts(attempt, deadline)
        try:
            choice = payload["choices"][0]
            message = choice["message"]
            usage = payload.get("usage")
            finish_reason = choice.get("finish_reason")
            text = message.get("content")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise self._unusable("a body that is not a chat completion") from exc
        usage = usage if isinstance(usage, dict) else {}
        if not isinstance(text, str) or not text.strip():
            raise self._no_text(finish_reason, message.get("refusal"))
        return Generation(
            text=text,
            model=request.model,
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            stop_reason=str(finish_reason) if finish_reason else None,
        )

    def stream(self, request: GenerationRequest) -> Iterator[StreamEvent]:
        """Text deltas as the server sends them, then the whole Generation.

        Attempts are made until the first delta; a failure after it ends the stream with the same
        errors, and so does the end of the time budget, even in the middle of a read.
        """
        client, key, deadline = self._http(), self._key.read(), self._deadline()

        def attempt(remaining_s: float) -> _OpenStream:
            response = self._send(client, request, key, remaining_s, deadline, stream=True)
            opened = _OpenStream(response, _cut_at(response, deadline), self._chunks(response, key))
            try:
                for chunk in self._read(opened.chunks, deadline, words_sent=False):
                    if opened.answer.absorb(chunk):
                        return opened
                raise self._no_text(opened.answer.finish_reason, None)
            except BaseException:
                opened.close()
                raise

        opened = self._attempts(attempt, deadline)
        answer = opened.answer
        try:
            yield answer.parts[0]
            for chunk in self._read(opened.chunks, deadline, words_sent=True):
                delta = answer.absorb(chunk)
                if delta:
                    yield delta
        finally:
            opened.close()
        if not "".join(answer.parts).strip():
            raise self._no_text(answer.finish_reason, None)
        yield answer.generation(request.model)

    def _read(
        self, chunks: Iterator[dict[str, Any]], deadline: float, *, words_sent: bool
    ) -> Iterator[dict[str, Any]]:
        """`chunks` to the end of the stream. A stream that breaks or passes the deadline raises
        RetryableFailure before words were sent (another attempt may follow), the final error after."""
        while True:
            try:
                chunk = next(chunks, None)
            except httpx.TransportError as exc:
                late = isinstance(exc, httpx.TimeoutException) or time.monotonic() >= deadline
                when = "mid-answer" if words_sent else "before its first words"
                reason = f"stopped answering {when} ({type(exc).__name__})"
                raise self._broken(reason, late=late, words_sent=words_sent) from exc
            if chunk is None:
                return
            yield chunk
            if time.monotonic() >= deadline:
                reason = f"did not finish the answer within {BUDGET} or the request's deadline"
                raise self._broken(reason, late=True, words_sent=words_sent)

    def _broken(self, reason: str, *, late: bool, words_sent: bool) -> Exception:
        if not words_sent:
            return RetryableFailure(reason, timed_out=late)
        return give_up(f"{self._label}: {reason}", {}, out_of_time=late)

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = json_client(self.timeout_s, self._base_url)
            return self._client

    def _deadline(self) -> float:
        """When the call must end (a `time.monotonic()` value): the timeout, cut to the request's deadline."""
        deadline = time.monotonic() + self.timeout_s
        request_left = request_deadline().remaining_s()
        return deadline if request_left is None else min(deadline, time.monotonic() + request_left)

    def _attempts(self, attempt: Callable[[float], T], deadline: float) -> T:
        return with_attempts(
            attempt,
            label=self._label,
            attempts=self.attempts,
            deadline=deadline,
            retry_base_delay_s=self.retry_base_delay_s,
            budget=BUDGET,
            give_up=give_up,
        )

    def _body(self, request: GenerationRequest, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.prompt},
            ],
            self._token_field: request.max_output_tokens,
        }
        if request.model not in self._no_temperature:
            body["temperature"] = 0
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _send(
        self,
        client: httpx.Client,
        request: GenerationRequest,
        key: SecretStr | None,
        remaining_s: float,
        deadline: float,
        *,
        stream: bool,
    ) -> httpx.Response:
        """One successful response (a stream's still unread); RetryableFailure or the error otherwise."""
        headers = {**bearer(key), **({"Accept": "text/event-stream"} if stream else {})}
        body = self._body(request, stream)
        with transport_failures("could not be reached"):
            response = client.send(
                client.build_request(
                    "POST",
                    "/chat/completions",
                    json=body,
                    headers=headers,
                    timeout=httpx.Timeout(remaining_s),
                ),
                stream=stream,
            )
            if response.is_success:
                return response
            response.read()
            response.close()
            if (
                "temperature" in body
                and response.status_code == 400
                and _error(response).get("param") == "temperature"
            ):
                self._no_temperature.add(request.model)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RetryableFailure(
                        "refused temperature 0, with no time left to ask again", timed_out=True
                    )
                return self._send(client, request, key, left, deadline, stream=stream)
        status = response.status_code
        # A spent quota (OpenAI's 429 `insufficient_quota`) stays spent: say so rather than try again.
        if is_retryable_status(status) and _error(response).get("code") != "insufficient_quota":
            details: dict[str, Any] = {"status": status}
            wait_s = retry_after_s(response.headers)
            if wait_s is not None:
                details["retry_after_s"] = wait_s
            raise RetryableFailure(f"answered HTTP {status}", details)
        raise self._error_for(response, key, request.model)

    def _chunks(self, response: httpx.Response, key: SecretStr | None) -> Iterator[dict[str, Any]]:
        """The JSON chunks of a stream, up to `data: [DONE]`; an error event raises."""
        for data in sse_data(response.iter_lines()):
            if data.strip() == SSE_DONE:
                return
            try:
                chunk = json.loads(data)
            except ValueError as exc:
                raise self._unusable("an event that is not JSON") from exc
            if not isinstance(chunk, dict):
                raise self._unusable("an event that is not a chat completion chunk")
            if chunk.get("error"):
                error = chunk["error"]
                detail = str(error.get("message", error) if isinstance(error, dict) else error)
                raise GenerationProviderError(
                    f"{self._label} sent an error mid-stream: {self._redact(detail, key)}"
                )
            yield chunk

    def _error_for(self, response: httpx.Response, key: SecretStr | None, model: str) -> RetrievalError:
        status = response.status_code
        if status in (401, 403):
            # The body is left out on purpose: OpenAI echoes (part of) the rejected key in it.
            return UpstreamAuthError(
                f"{self._label} refused the credentials (HTTP {status}); check {self._key.source}",
                {"status": status},
            )
        try:
            payload: Any = response.json()
            error = payload.get("error", payload) if isinstance(payload, dict) else payload
            detail = str(error.get("message", error) if isinstance(error, dict) else error)
        except ValueError:
            detail = response.text
        hint = (
            f" (is the model {model!r} served there? see GENERATION_MODEL and GENERATION_BASE_URL)"
            if status == 404
            else ""
        )
        return GenerationProviderError(
            f"{self._label} answered HTTP {status}{hint}: {self._redact(detail, key)}", {"status": status}
        )

    @staticmethod
    def _redact(detail: str, key: SecretStr | None) -> str:
        if key is not None and key.get_secret_value():
            detail = detail.replace(key.get_secret_value(), "***")
        return detail[:MAX_DETAIL_CHARS]

    def _unusable(self, what: str) -> GenerationProviderError:
        return GenerationProviderError(f"{self._label} answered with {what}")

    def _no_text(self, finish_reason: object, refusal: object) -> GenerationProviderError:
        said = f"; it refused: {str(refusal)[:MAX_DETAIL_CHARS]}" if refusal else ""
        return GenerationProviderError(
            f"{self._label} answered no text (finish_reason {finish_reason or 'none'}){said}",
            {"finishReason": finish_reason},
        )
