"""The `gemini` generator: answers from the Gemini API's generateContent, whole or streamed.

`generate` makes one `models.generate_content` call, `stream` one `models.generate_content_stream`
(streamGenerateContent over server-sent events), both at temperature 0 with the grounding rules as the
system instruction. Retries are ours, within GENERATION_TIMEOUT_S and the request's deadline; a stream
is tried again only before its first text delta. google-genai is imported on first use.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from retrieval_core.clients.attempts import RetryableFailure, transport_failures, with_attempts
from retrieval_core.clients.deadline import request_deadline
from retrieval_core.clients.genai import build_genai_client, key_rejected
from retrieval_core.clients.provider_keys import ClientForKey, ProviderKey, gemini_key
from retrieval_core.clients.retry import MAX_DETAIL_CHARS, RETRY_BASE_DELAY_S, RETRYABLE_STATUSES
from retrieval_core.clients.secret_store import forget_cached_secrets
from retrieval_core.clients.stream_reader import StreamReader
from retrieval_core.exceptions import (
    ConfigurationError,
    GenerationProviderError,
    RetrievalError,
    UpstreamAuthError,
)
from retrieval_core.generation.base import Generation, GenerationRequest, StreamEvent, give_up
from retrieval_core.settings import Settings

if TYPE_CHECKING:
    from google.genai import Client
    from google.genai.errors import APIError
    from google.genai.types import GenerateContentConfig, GenerateContentResponse


BUDGET = "the generation timeout, GENERATION_TIMEOUT_S,"
UNREACHABLE = "the Gemini API could not be reached"
# Finish reasons of an answer a filter withheld (safety, blocklists, personal data, recitation).
FILTERED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"}
)


class GeminiGenerator:
    """Writes answers with a Gemini model through google-genai.

    The key is read on each call (a secret through its 5-minute cache), never when the generator is
    built; the client is built again when the key changed, and forgotten when the API refuses the key.
    """

    provider = "gemini"

    def __init__(
        self,
        *,
        api_key: ProviderKey,
        model: str,
        base_url: str | None = None,
        timeout_s: float = 20.0,
        attempts: int = 2,
        retry_base_delay_s: float = RETRY_BASE_DELAY_S,
    ) -> None:
        self._key = api_key
        self.model = model
        self._base_url = base_url
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.retry_base_delay_s = retry_base_delay_s
        self._clients: ClientForKey[Client] = ClientForKey(self._build_client)

    @classmethod
    def from_settings(cls, settings: Settings) -> GeminiGenerator:
        """Configure from GEMINI_API_KEY (or GEMINI_API_KEY_SECRET_ARN), GEMINI_BASE_URL, GENERATION_MODEL,
        GENERATION_TIMEOUT_S and GENERATION_ATTEMPTS. Calls nothing."""
        key = gemini_key(settings)
        problem = key.problem()
        if problem is not None:
            raise ConfigurationError(f"GENERATION_PROVIDER=gemini: {problem}")
        return cls(
            api_key=key,
            model=settings.resolved_generation_model,
            base_url=settings.gemini_base_url,
            timeout_s=settings.generation_timeout_s,
            attempts=settings.generation_attempts,
        )

    def generate(self, request: GenerationRequest) -> Generation:
        """The whole answer from one generateContent call (tried again on throttling, 5xx and time-outs)."""
        key, client = self._client()
        from google.genai import errors

        label = _label(request.model)

        def attempt(remaining_s: float) -> GenerateContentResponse:
            config = _config(request, remaining_s)
            try:
                with transport_failures(UNREACHABLE):
                    return client.models.generate_content(
                        model=request.model, contents=request.prompt, config=config
                    )
            except errors.APIError as exc:
                raise self._failure(exc, key, request.model) from exc
            except ValueError as exc:  # an answer google-genai could not read
                raise _unreadable(label, exc) from exc

        response = with_attempts(
            attempt,
            label=label,
            attempts=self.attempts,
            deadline=self._deadline(),
            retry_base_delay_s=self.retry_base_delay_s,
            budget=BUDGET,
            give_up=give_up,
        )
        return _generation([response], _text_of(response), request.model)

    def stream(self, request: GenerationRequest) -> Iterator[StreamEvent]:
        """Text deltas as streamGenerateContent sends them, then the whole Generation.

        A failure before the first delta is tried again; after it, it ends the stream with the same
        errors as `generate`, as does a stream that ends without a finish reason (cut short). Waiting for
        a chunk ends at the deadline even when Gemini stalls mid-stream.
        """
        key, client = self._client()
        label = _label(request.model)
        deadline = self._deadline()
        reader, responses, ended = self._open_stream(request, key, client, deadline)
        try:
            texts: list[str] = []
            for response in responses:
                if text := _text_of(response):
                    texts.append(text)
                    yield text
            while not ended:
                try:
                    chunk = self._next(reader, deadline, key, request.model)
                except RetryableFailure as exc:
                    message = f"{label}: {exc.reason}, after the answer had begun"
                    raise give_up(message, exc.details, out_of_time=exc.timed_out) from exc
                if chunk is None:
                    break
                responses.append(chunk)
                if text := _text_of(chunk):
                    texts.append(text)
                    yield text
        finally:
            reader.close()
        generation = _generation(responses, "".join(texts), request.model)
        if generation.stop_reason is None:
            # Gemini ends every stream with a finish reason; without one the answer was cut short (older
            # google-genai versions also end a stream quietly at an error event).
            raise GenerationProviderError(
                f"{label}: the stream ended before the answer did (its last chunk has no finish reason); "
                "try again",
                {"receivedChars": len(generation.text)},
            )
        yield generation

    def _open_stream(
        self, request: GenerationRequest, key: SecretStr, client: Client, deadline: float
    ) -> tuple[StreamReader[GenerateContentResponse], list[GenerateContentResponse], bool]:
        """A stream read up to its first chunk with text, attempts permitting: the reader, the chunks
        read, and whether the stream already ended. Until that chunk nothing was yielded, so a failure
        may be tried again."""

        def attempt(
            remaining_s: float,
        ) -> tuple[StreamReader[GenerateContentResponse], list[GenerateContentResponse], bool]:
            config = _config(request, remaining_s)
            reader = StreamReader(
                lambda: client.models.generate_content_stream(
                    model=request.model, contents=request.prompt, config=config
                ),
                "gemini-generate-stream",
            )
            try:
                responses: list[GenerateContentResponse] = []
                while (response := self._next(reader, deadline, key, request.model)) is not None:
                    responses.append(response)
                    if _text_of(response):
                        return reader, responses, False
                return reader, responses, True
            except BaseException:
                reader.close()
                raise

        return with_attempts(
            attempt,
            label=_label(request.model),
            attempts=self.attempts,
            deadline=deadline,
            retry_base_delay_s=self.retry_base_delay_s,
            budget=BUDGET,
            give_up=give_up,
        )

    def _next(
        self, reader: StreamReader[GenerateContentResponse], until: float, key: SecretStr, model: str
    ) -> GenerateContentResponse | None:
        """The stream's next chunk (None at its end), waiting no later than `until` (monotonic)."""
        from google.genai import errors

        try:
            with transport_failures(UNREACHABLE):
                return reader.next(until)
        except TimeoutError as exc:
            raise RetryableFailure(
                "no answer within the timeout (the stream stalled)", timed_out=True
            ) from exc
        except errors.APIError as exc:
            raise self._failure(exc, key, model) from exc
        except ValueError as exc:
            raise _unreadable(_label(model), exc) from exc

    def _client(self) -> tuple[SecretStr, Client]:
        key = self._key.read_required()
        return key, self._clients.get(key)

    def _deadline(self) -> float:
        """When the call must end (monotonic): GENERATION_TIMEOUT_S from now, cut to the request's deadline.

        The clock starts after the key is read and the client built (a cold start's one-time cost).
        """
        deadline = time.monotonic() + self.timeout_s
        left = request_deadline().remaining_s()
        return deadline if left is None else min(deadline, time.monotonic() + left)

    def _build_client(self, key: SecretStr) -> Client:
        try:
            # No retries in the client: `with_attempts` retries within the generation budget.
            return build_genai_client(api_key=key, base_url=self._base_url, timeout_s=self.timeout_s)
        except ImportError as exc:
            raise ConfigurationError(
                "GENERATION_PROVIDER=gemini needs the google-genai package installed"
            ) from exc

    def _failure(self, exc: APIError, key: SecretStr, model: str) -> Exception:
        """What a Gemini API error means: another attempt (throttled, 5xx), or the error to raise."""
        label = _label(model)
        status = f"HTTP {exc.code} {exc.status or ''}".strip()
        if exc.code in RETRYABLE_STATUSES:
            details: dict[str, Any] = {"status": exc.code}
            retry_after = _retry_after_s(exc)
            if retry_after is not None:
                details["retry_after_s"] = retry_after
            return RetryableFailure(f"the Gemini API answered {status}", details)
        if key_rejected(exc):
            # A rotated key is read again at once, not after the secret cache expires.
            self._clients.forget()
            forget_cached_secrets()
            return UpstreamAuthError(
                f"{label}: the Gemini API refused the API key ({status}); check {self._key.source}",
                {"status": exc.code},
            )
        detail = str(exc.message or "").replace(key.get_secret_value(), "***")[:MAX_DETAIL_CHARS]
        hint = f"; check that {model} is a Gemini model this key may use" if exc.code == 404 else ""
        return GenerationProviderError(
            f"{label}: the Gemini API answered {status}: {detail}{hint}", {"status": exc.code}
        )


def _label(model: str) -> str:
    return f"Gemini generation ({model})"


def _config(request: GenerationRequest, remaining_s: float) -> GenerateContentConfig:
    from google.genai import types

    return types.GenerateContentConfig(
        system_instruction=request.system,
        max_output_tokens=request.max_output_tokens,
        temperature=0.0,
        # The attempt's timeout is what is left of the budget.
        http_options=types.HttpOptions(timeout=max(1, int(remaining_s * 1000))),
    )


def _text_of(response: GenerateContentResponse) -> str:
    """The answer text of the first candidate, without thought parts."""
    candidates = response.candidates or []
    content = candidates[0].content if candidates else None
    parts = (content.parts if content is not None else None) or []
    return "".join(part.text for part in parts if part.text and not part.thought)


def _generation(responses: Sequence[GenerateContentResponse], text: str, model: str) -> Generation:
    """The Generation of a whole answer or a stream's chunks: usage and finish reason from the last
    chunk that has them. No text at all is a GenerationProviderError naming why."""
    usage = next((r.usage_metadata for r in reversed(responses) if r.usage_metadata is not None), None)
    finish = next(
        (_name(c.finish_reason) for r in reversed(responses) for c in r.candidates or [] if c.finish_reason),
        None,
    )
    if not text.strip():
        block = next(
            (_name(r.prompt_feedback.block_reason) for r in responses if r.prompt_feedback is not None), None
        )
        raise GenerationProviderError(
            f"{_label(model)}: the Gemini API answered no text ({_why_empty(finish, block)})",
            {"finishReason": finish, "blockReason": block},
        )
    details: dict[str, object] = {}
    if usage is not None and usage.thoughts_token_count:
        details["thoughtsTokenCount"] = usage.thoughts_token_count
    return Generation(
        text=text,
        model=model,
        input_tokens=usage.prompt_token_count if usage is not None else None,
        output_tokens=usage.candidates_token_count if usage is not None else None,
        stop_reason=finish,
        details=details,
    )


def _why_empty(finish: str | None, block: str | None) -> str:
    if block is not None:
        return f"the prompt was blocked: {block}; rephrase the question or the system instruction"
    if finish in FILTERED:
        return f"finish reason {finish}: the model's filters withheld the answer; rephrase the question"
    if finish == "MAX_TOKENS":
        return "finish reason MAX_TOKENS: the output-token limit was spent before any text (thinking counts)"
    return f"finish reason {finish or 'none'}"


def _name(value: object) -> str | None:
    """An enum's value (FinishReason, BlockedReason) as the API spells it."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _unreadable(label: str, exc: ValueError) -> RetrievalError:
    return GenerationProviderError(
        f"{label}: the Gemini API answered something that is not a GenerateContentResponse "
        f"({type(exc).__name__})"
    )


def _retry_after_s(exc: APIError) -> float | None:
    """Seconds Gemini asked us to wait: RetryInfo's retryDelay ("7s"), else a Retry-After header."""
    body = exc.details if isinstance(exc.details, dict) else {}
    error = body.get("error", body)
    infos = error.get("details") if isinstance(error, dict) else None
    for item in infos if isinstance(infos, list) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            try:
                return float(str(item.get("retryDelay", "")).removesuffix("s"))
            except ValueError:
                return None
    headers = getattr(exc.response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
