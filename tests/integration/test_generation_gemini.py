"""The gemini generator with the real google-genai client against a fake Gemini API on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from retrieval_core.clients.deadline import deadline_of
from retrieval_core.clients.secret_store import forget_cached_secrets
from retrieval_core.exceptions import (
    ConfigurationError,
    GenerationProviderError,
    RetrievalError,
    UpstreamAuthError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from retrieval_core.generation.base import Generation, GenerationRequest, StreamEvent
from retrieval_core.generation.gemini import GeminiGenerator
from retrieval_core.settings import Settings
from tests.fakes.gemini_generate import FakeAnswer, FakeGeminiGenerate
from tests.servers import MotoServer

GEMINI_KEY = "gm-test-0123456789abcdef"
FAST_RETRY_S = 0.001
# Slack for a loaded machine on top of a time budget.
SLACK_S = 1.5
REQUEST = GenerationRequest(
    system="Answer only from the numbered sources. Cite them as [n].\n\nAnswer in one sentence.",
    prompt="[1] Paris is the capital and largest city of France.\n\nQuestion: What is the capital of France?",
    question="What is the capital of France?",
    sources=["Paris is the capital and largest city of France."],
    max_output_tokens=256,
    model="gemini-2.5-flash",
)


def _generator(fake: FakeGeminiGenerate, **fields: Any) -> GeminiGenerator:
    values: dict[str, Any] = {
        "generation_provider": "gemini",
        "gemini_api_key": GEMINI_KEY,
        "gemini_base_url": fake.url,
        **fields,
    }
    generator = GeminiGenerator.from_settings(Settings(_env_file=None, **values))
    generator.retry_base_delay_s = FAST_RETRY_S
    return generator


def _split(events: Iterator[StreamEvent]) -> tuple[list[str], Generation]:
    """The deltas of a stream and its Generation, checking that the Generation comes once, last."""
    collected = list(events)
    *deltas, last = collected
    assert all(isinstance(delta, str) for delta in deltas)
    assert isinstance(last, Generation)
    return [str(delta) for delta in deltas], last


def _rendered(exc: RetrievalError) -> str:
    return f"{exc} {exc.message} {json.dumps(exc.details, default=str)} {exc!r}"


@pytest.fixture
def fake() -> Iterator[FakeGeminiGenerate]:
    with FakeGeminiGenerate(api_key=GEMINI_KEY) as server:
        yield server


def test_from_settings_takes_the_configured_model_and_calls_nothing(fake: FakeGeminiGenerate) -> None:
    generator = _generator(fake)

    assert (generator.provider, generator.model) == ("gemini", "gemini-2.5-flash")
    assert _generator(fake, generation_model="gemini-2.5-pro").model == "gemini-2.5-pro"
    assert fake.requests == []


def test_from_settings_without_a_key_names_the_variables() -> None:
    settings = Settings(_env_file=None, generation_provider="gemini")

    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY or GEMINI_API_KEY_SECRET_ARN"):
        GeminiGenerator.from_settings(settings)


def test_generate_returns_the_text_usage_and_finish_reason(fake: FakeGeminiGenerate) -> None:
    fake.answer = FakeAnswer(
        chunks=["Paris is the capital ", "of France [1]."], prompt_tokens=87, output_tokens=11
    )

    generation = _generator(fake).generate(REQUEST)

    assert generation.text == "Paris is the capital of France [1]."
    assert (generation.input_tokens, generation.output_tokens) == (87, 11)
    assert generation.stop_reason == "STOP"
    assert generation.model == "gemini-2.5-flash"
    assert generation.native_citations is None


def test_generate_sends_the_system_instruction_and_prompt_as_given(fake: FakeGeminiGenerate) -> None:
    _generator(fake).generate(REQUEST)

    (call,) = fake.generate_calls()
    assert call.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert call.headers["x-goog-api-key"] == GEMINI_KEY
    body = call.json()
    assert body["systemInstruction"]["parts"] == [{"text": REQUEST.system}]
    assert [content["parts"] for content in body["contents"]] == [[{"text": REQUEST.prompt}]]
    assert body["generationConfig"] == {"maxOutputTokens": 256, "temperature": 0.0}
    assert "tools" not in body


def test_generate_uses_the_model_of_the_request(fake: FakeGeminiGenerate) -> None:
    request = replace(REQUEST, model="gemini-2.5-flash-lite")

    generation = _generator(fake).generate(request)

    assert generation.model == "gemini-2.5-flash-lite"
    (call,) = fake.generate_calls()
    assert call.path.endswith("/models/gemini-2.5-flash-lite:generateContent")


def test_an_answer_cut_at_the_token_limit_is_kept_with_its_finish_reason(fake: FakeGeminiGenerate) -> None:
    fake.answer = FakeAnswer(chunks=["Paris is"], finish_reason="MAX_TOKENS")

    generation = _generator(fake).generate(REQUEST)

    assert (generation.text, generation.stop_reason) == ("Paris is", "MAX_TOKENS")


def test_stream_yields_the_chunks_in_order_then_the_generation(fake: FakeGeminiGenerate) -> None:
    chunks = ["Paris ", "is the capital ", "of France [1]", "."]
    fake.answer = FakeAnswer(chunks=chunks, prompt_tokens=87, output_tokens=12)

    deltas, generation = _split(_generator(fake).stream(REQUEST))

    assert deltas == chunks
    assert generation.text == "".join(deltas) == "Paris is the capital of France [1]."
    # The usage of the last chunk: the answer's totals, not the first chunk's partial count.
    assert (generation.input_tokens, generation.output_tokens) == (87, 12)
    assert generation.stop_reason == "STOP"
    (call,) = fake.stream_calls()
    assert call.path.endswith("/models/gemini-2.5-flash:streamGenerateContent")
    assert call.query["alt"] == ["sse"]
    body = call.json()
    assert body["systemInstruction"]["parts"] == [{"text": REQUEST.system}]
    assert body["contents"][0]["parts"] == [{"text": REQUEST.prompt}]
    assert fake.generate_calls() == []


def test_stream_hands_over_each_delta_as_it_arrives(fake: FakeGeminiGenerate) -> None:
    fake.answer = FakeAnswer(chunks=["Paris ", "is the capital [1]."], stall_after=1, stall_s=30)
    events = _generator(fake, generation_timeout_s=1.0).stream(REQUEST)
    started = time.monotonic()

    first = next(events)

    assert first == "Paris "
    assert time.monotonic() - started < 1.0  # not held back until the stalled stream ends
    # A stream that stalls after its first delta still ends within the budget, and is not tried again.
    with pytest.raises(UpstreamTimeoutError) as caught:
        next(events)
    assert time.monotonic() - started < 1.0 + SLACK_S
    assert caught.value.status_code == 504
    assert len(fake.stream_calls()) == 1


def test_a_stream_that_stalls_late_ends_at_the_budget_not_a_read_timeout_later(
    fake: FakeGeminiGenerate,
) -> None:
    # The first chunk comes 2 s into a 3 s budget, then nothing: an HTTP read timeout, restarted by that
    # chunk, would end the stream only at 5 s.
    fake.generate_delay_s = 2.0
    fake.answer = FakeAnswer(chunks=["Paris ", "is the capital [1]."], stall_after=1, stall_s=30)
    events = _generator(fake, generation_timeout_s=3.0).stream(REQUEST)
    started = time.monotonic()

    assert next(events) == "Paris "
    with pytest.raises(UpstreamTimeoutError):
        next(events)

    assert time.monotonic() - started < 3.0 + SLACK_S


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_throttled_once_then_answered(fake: FakeGeminiGenerate, method: str) -> None:
    fake.script(fake.throttled_reply("1s"))

    generation = _run(_generator(fake), method)

    assert generation.text == fake.answer.text
    assert len(fake.requests) == 2


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_throttled_on_every_attempt_is_503_with_gemini_retry_delay(
    fake: FakeGeminiGenerate, method: str
) -> None:
    fake.script(*[fake.throttled_reply("7s")] * 3)

    with pytest.raises(UpstreamUnavailableError) as caught:
        _run(_generator(fake, generation_attempts=3), method)

    assert caught.value.status_code == 503
    assert caught.value.retry_after_s == 7
    assert caught.value.details["status"] == 429
    assert len(fake.requests) == 3


def test_a_stream_that_breaks_off_after_its_first_delta_is_not_tried_again(fake: FakeGeminiGenerate) -> None:
    fake.answer = FakeAnswer(chunks=["Paris ", "is the capital [1]."], error_after=1, error_status=503)
    events = _generator(fake, generation_attempts=3).stream(REQUEST)

    assert next(events) == "Paris "
    # google-genai raises the error event (a 503); versions before it end the stream there, which the
    # generator reports as an answer cut short (a 502). Either way no half answer passes for a whole one.
    with pytest.raises((UpstreamUnavailableError, GenerationProviderError)):
        next(events)

    assert len(fake.stream_calls()) == 1


def test_a_stream_without_a_finish_reason_is_an_answer_cut_short(fake: FakeGeminiGenerate) -> None:
    fake.answer = FakeAnswer(chunks=["Paris ", "is the capital"], finish_reason=None)
    events = _generator(fake).stream(REQUEST)

    assert [next(events), next(events)] == ["Paris ", "is the capital"]
    with pytest.raises(GenerationProviderError, match="ended before the answer did"):
        next(events)


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_a_wrong_key_is_reported_without_the_key(method: str) -> None:
    with FakeGeminiGenerate(api_key="the-right-key") as fake:
        with pytest.raises(UpstreamAuthError) as caught:
            _run(_generator(fake), method)

        assert caught.value.code == "upstream_auth_rejected"
        assert "GEMINI_API_KEY" in caught.value.message
        assert GEMINI_KEY not in _rendered(caught.value)
        assert len(fake.requests) == 1  # a refused key is not tried again


def test_a_key_without_permission_is_rejected_not_retried(fake: FakeGeminiGenerate) -> None:
    fake.fail_next(1, 403, f"Permission denied for key {GEMINI_KEY}.")

    with pytest.raises(UpstreamAuthError) as caught:
        _generator(fake).generate(REQUEST)

    assert "HTTP 403" in caught.value.message
    assert GEMINI_KEY not in _rendered(caught.value)
    assert len(fake.requests) == 1


def test_a_key_from_a_secret_is_read_on_use_and_a_rotation_applies_after_the_first_refusal(
    moto: MotoServer, aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto.endpoint_url)
    secrets = moto.client("secretsmanager")
    first, second = "gm-first-0123456789", "gm-second-0123456789"
    arn = str(secrets.create_secret(Name="retrieval/gemini-generation", SecretString=first)["ARN"])
    forget_cached_secrets()
    try:
        with FakeGeminiGenerate(api_key=first) as fake:
            generator = _generator(fake, gemini_api_key=None, gemini_api_key_secret_arn=arn)
            generator.generate(REQUEST)
            secrets.put_secret_value(SecretId=arn, SecretString=second)
            fake.api_key = second

            # The cached key is refused once; the refusal drops the cache and the client.
            with pytest.raises(UpstreamAuthError, match="GEMINI_API_KEY_SECRET_ARN"):
                generator.generate(REQUEST)
            generator.generate(REQUEST)

            assert [r.headers["x-goog-api-key"] for r in fake.requests] == [first, first, second]
    finally:
        forget_cached_secrets()


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_an_unknown_model_is_a_provider_error_naming_it(fake: FakeGeminiGenerate, method: str) -> None:
    request = replace(REQUEST, model="gemini-0-nonexistent")

    with pytest.raises(GenerationProviderError) as caught:
        _run(_generator(fake), method, request)

    assert caught.value.code == "generation_provider_error"
    assert caught.value.status_code == 502
    assert "HTTP 404" in caught.value.message
    assert "gemini-0-nonexistent" in caught.value.message
    assert len(fake.requests) == 1


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_an_answer_withheld_for_safety_is_a_provider_error_naming_why(
    fake: FakeGeminiGenerate, method: str
) -> None:
    fake.answer = FakeAnswer(chunks=[], finish_reason="SAFETY")

    with pytest.raises(GenerationProviderError) as caught:
        _run(_generator(fake), method)

    assert "SAFETY" in caught.value.message
    assert caught.value.details["finishReason"] == "SAFETY"
    assert len(fake.requests) == 1


def test_a_blocked_prompt_is_a_provider_error_naming_the_block_reason(fake: FakeGeminiGenerate) -> None:
    fake.answer = FakeAnswer(block_reason="PROHIBITED_CONTENT")
    events = _generator(fake).stream(REQUEST)

    with pytest.raises(GenerationProviderError, match="PROHIBITED_CONTENT") as caught:
        next(events)  # nothing was yielded before the error

    assert caught.value.details["blockReason"] == "PROHIBITED_CONTENT"


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_a_slow_gemini_ends_as_504_within_the_generation_timeout(method: str) -> None:
    with FakeGeminiGenerate(api_key=GEMINI_KEY) as fake:
        fake.generate_delay_s = 10
        generator = _generator(fake, generation_timeout_s=1.0, generation_attempts=3)
        started = time.monotonic()

        with pytest.raises(UpstreamTimeoutError) as caught:
            _run(generator, method)

        assert time.monotonic() - started < 1.0 + SLACK_S
        assert caught.value.code == "upstream_timeout"
        assert "GENERATION_TIMEOUT_S" in caught.value.message
        assert len(fake.requests) == 1  # no time was left for another attempt


@pytest.mark.parametrize("method", ["generate", "stream"])
def test_the_request_deadline_cuts_the_generation_timeout(method: str) -> None:
    with FakeGeminiGenerate(api_key=GEMINI_KEY) as fake:
        fake.generate_delay_s = 10
        generator = _generator(fake, generation_timeout_s=20.0)
        started = time.monotonic()

        with deadline_of(0.8), pytest.raises(UpstreamTimeoutError):
            _run(generator, method)

        assert time.monotonic() - started < 0.8 + SLACK_S


def _run(generator: GeminiGenerator, method: str, request: GenerationRequest = REQUEST) -> Generation:
    if method == "generate":
        return generator.generate(request)
    _, generation = _split(generator.stream(request))
    return generation
