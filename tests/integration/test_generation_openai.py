"""The OpenAI-compatible generator with its real httpx client against a local chat completions server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from retrieval_core.clients.deadline import deadline_of
from retrieval_core.exceptions import (
    ConfigurationError,
    GenerationProviderError,
    RetrievalError,
    UpstreamAuthError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from retrieval_core.generation.base import Generation, GenerationRequest, StreamEvent
from retrieval_core.generation.openai_compatible import OpenAICompatibleGenerator
from retrieval_core.settings import Settings
from tests.fakes.http import Reply
from tests.fakes.openai_chat import DEFAULT_MODEL, FakeOpenAIChat

FAST_RETRY_S = 0.001
KEY = "sk-test-0123456789abcdefghij"
SYSTEM = "Answer only from the numbered sources. Cite each claim as [n]."
PROMPT = "[1] Paris is the capital and largest city of France.\n\nQuestion: What is the capital of France?"


def _request(**fields: Any) -> GenerationRequest:
    values: dict[str, Any] = {
        "system": SYSTEM,
        "prompt": PROMPT,
        "question": "What is the capital of France?",
        "sources": ["Paris is the capital and largest city of France."],
        "max_output_tokens": 256,
        "model": DEFAULT_MODEL,
        **fields,
    }
    return GenerationRequest(**values)


def _generator(fake: FakeOpenAIChat, **fields: Any) -> OpenAICompatibleGenerator:
    settings = Settings(
        _env_file=None,
        generation_provider="openai",
        generation_base_url=fake.base_url,
        generation_api_key=KEY,
        **fields,
    )
    generator = OpenAICompatibleGenerator.from_settings(settings)
    generator.retry_base_delay_s = FAST_RETRY_S
    return generator


def _rendered(exc: RetrievalError) -> str:
    return f"{exc} {exc.message} {json.dumps(exc.details, default=str)} {exc!r}"


def _split(events: list[StreamEvent]) -> tuple[list[str], Generation]:
    *deltas, last = events
    assert all(isinstance(delta, str) for delta in deltas)
    assert isinstance(last, Generation)
    return [str(delta) for delta in deltas], last


@pytest.fixture
def fake() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat(api_key=KEY) as server:
        yield server


# Answers -------------------------------------------------------------------------------------------


def test_generate_returns_the_text_and_its_usage(fake: FakeOpenAIChat) -> None:
    fake.answers.append("Paris is the capital of France [1].")

    generation = _generator(fake).generate(_request())

    assert generation.text == "Paris is the capital of France [1]."
    assert generation.model == DEFAULT_MODEL
    assert generation.stop_reason == "stop"
    # The fake counts a word as a token: 7 answer words; 11 + 17 words in the system and user turns.
    assert (generation.input_tokens, generation.output_tokens) == (28, 7)


def test_generate_sends_the_system_and_user_turns_as_given_with_the_key(fake: FakeOpenAIChat) -> None:
    _generator(fake).generate(_request(max_output_tokens=99))

    [request] = fake.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json()
    assert body["model"] == DEFAULT_MODEL
    assert body["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    # A server other than api.openai.com gets the token limit in the field every server reads.
    assert body["max_tokens"] == 99
    assert "max_completion_tokens" not in body
    assert body["temperature"] == 0
    assert "stream" not in body


def test_generate_sends_the_requested_model_rather_than_the_default(fake: FakeOpenAIChat) -> None:
    fake.models.add("llama3.1:8b")
    generator = _generator(fake)

    generation = generator.generate(_request(model="llama3.1:8b"))

    assert generator.model == DEFAULT_MODEL
    assert generation.model == "llama3.1:8b"
    assert fake.chat_bodies()[0]["model"] == "llama3.1:8b"


def test_an_answer_cut_at_the_token_limit_says_so(fake: FakeOpenAIChat) -> None:
    generation = _generator(fake).generate(_request(max_output_tokens=3))

    assert generation.text == "Paris is the "
    assert generation.stop_reason == "length"


def test_a_server_that_counts_no_tokens_leaves_the_counts_empty(fake: FakeOpenAIChat) -> None:
    fake.send_usage = False

    generation = _generator(fake).generate(_request())
    _, streamed = _split(list(_generator(fake).stream(_request())))

    assert (generation.input_tokens, generation.output_tokens) == (None, None)
    assert (streamed.input_tokens, streamed.output_tokens) == (None, None)
    assert streamed.text == generation.text


def test_a_model_that_refuses_temperature_zero_is_asked_again_without_one(fake: FakeOpenAIChat) -> None:
    fake.models.add("o4-mini")
    fake.fixed_temperature_models.add("o4-mini")
    generator = _generator(fake, generation_attempts=1)

    first = generator.generate(_request(model="o4-mini"))
    second = generator.generate(_request(model="o4-mini"))

    assert first.text == second.text == fake.default_answer
    # Refused once, then asked without a temperature, now and from then on.
    assert [body.get("temperature") for body in fake.chat_bodies()] == [0, None, None]


# Streaming -----------------------------------------------------------------------------------------


def test_stream_yields_the_deltas_in_order_then_the_generation(fake: FakeOpenAIChat) -> None:
    fake.answers.append("Paris is the capital of France [1].")

    deltas, generation = _split(list(_generator(fake).stream(_request())))

    assert deltas == ["Paris ", "is ", "the ", "capital ", "of ", "France ", "[1]."]
    assert "".join(deltas) == generation.text == "Paris is the capital of France [1]."
    assert generation.stop_reason == "stop"
    assert (generation.input_tokens, generation.output_tokens) == (28, 7)
    body = fake.chat_bodies()[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert fake.requests[0].headers["accept"] == "text/event-stream"


def test_stream_yields_each_delta_as_it_arrives(fake: FakeOpenAIChat) -> None:
    fake.chunk_delay_s = 0.3
    fake.answers.append("one two three four")
    started = time.monotonic()
    stream = _generator(fake).stream(_request())

    first = next(stream)
    first_after_s = time.monotonic() - started
    rest = list(stream)

    assert first == "one "
    # The first words reach the caller before the server has sent the last (3 delays of 0.3 s).
    assert first_after_s < 0.6
    assert time.monotonic() - started >= 0.9
    assert "".join([first, *[e for e in rest if isinstance(e, str)]]) == "one two three four"


def test_stream_retries_throttling_before_the_first_delta(fake: FakeOpenAIChat) -> None:
    fake.fail_next(1, 429)

    deltas, generation = _split(list(_generator(fake).stream(_request())))

    assert "".join(deltas) == generation.text == fake.default_answer
    assert len(fake.requests) == 2


def test_a_stream_that_fails_after_the_first_delta_is_not_retried(fake: FakeOpenAIChat) -> None:
    fake.error_after = 2
    received: list[StreamEvent] = []

    with pytest.raises(GenerationProviderError) as caught:
        for event in _generator(fake).stream(_request()):
            received.append(event)

    assert received == ["Paris ", "is "]
    assert "error mid-stream" in caught.value.message
    assert "The server had an error" in caught.value.message
    # Words already went out: another attempt would repeat them.
    assert len(fake.requests) == 1


def test_a_stream_that_stalls_mid_answer_ends_at_the_budget(fake: FakeOpenAIChat) -> None:
    # Words for 1 s of a 2 s budget, then silence: a read timeout (2 s from each read) would end it at 3 s.
    fake.chunk_delay_s = 0.5
    fake.stall_stream_after = 3
    generator = _generator(fake, generation_timeout_s=2.0)
    received: list[StreamEvent] = []
    started = time.monotonic()

    with pytest.raises(UpstreamTimeoutError) as caught:
        for event in generator.stream(_request()):
            received.append(event)

    assert received == ["Paris ", "is ", "the "]
    assert time.monotonic() - started < 2.6
    assert caught.value.code == "upstream_timeout"
    assert len(fake.requests) == 1


def test_keep_alive_comments_do_not_hold_a_stream_past_the_budget(fake: FakeOpenAIChat) -> None:
    # Each comment resets a read timeout; the budget still ends the wait for the first words.
    fake.keepalive_s = 10
    generator = _generator(fake, generation_timeout_s=1.0, generation_attempts=1)
    started = time.monotonic()

    with pytest.raises(UpstreamTimeoutError):
        list(generator.stream(_request()))

    assert time.monotonic() - started < 1.6


def test_a_stream_without_words_is_a_provider_error(fake: FakeOpenAIChat) -> None:
    fake.answers.append("")

    with pytest.raises(GenerationProviderError) as caught:
        list(_generator(fake).stream(_request()))

    assert "no text" in caught.value.message


# Failures ------------------------------------------------------------------------------------------


def test_throttling_then_success(fake: FakeOpenAIChat) -> None:
    fake.fail_next(1, 429)

    generation = _generator(fake).generate(_request())

    assert generation.text == fake.default_answer
    assert len(fake.requests) == 2


def test_throttled_to_the_last_attempt_is_503_with_the_providers_retry_after(fake: FakeOpenAIChat) -> None:
    fake.retry_after_s = 7
    fake.fail_always(429, "Rate limit reached for requests")

    with pytest.raises(UpstreamUnavailableError) as caught:
        _generator(fake, generation_attempts=3).generate(_request())

    assert caught.value.status_code == 503
    assert caught.value.retry_after_s == 7
    assert "HTTP 429" in caught.value.message
    assert len(fake.requests) == 3


def test_server_errors_to_the_last_attempt_are_a_provider_error(fake: FakeOpenAIChat) -> None:
    fake.fail_always(500, "The server had an error while processing your request.")

    with pytest.raises(GenerationProviderError) as caught:
        _generator(fake).generate(_request())

    assert caught.value.status_code == 502
    assert caught.value.details["status"] == 500
    assert len(fake.requests) == 2


def test_a_spent_quota_is_not_retried_and_says_so(fake: FakeOpenAIChat) -> None:
    reply = fake.error_reply(
        429, "You exceeded your current quota, please check your plan and billing details."
    )
    reply.body["error"].update(type="insufficient_quota", code="insufficient_quota")
    fake.script(reply)

    with pytest.raises(GenerationProviderError) as caught:
        _generator(fake).generate(_request())

    assert "HTTP 429" in caught.value.message
    assert "exceeded your current quota" in caught.value.message
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"unexpected": True},
        [1, 2],
        {"choices": []},
        {"choices": [{"message": "Paris"}]},
        b"<html>Bad gateway</html>",
    ],
)
def test_a_body_that_is_not_a_chat_completion_is_a_provider_error(fake: FakeOpenAIChat, body: Any) -> None:
    fake.script(Reply(200, body))

    with pytest.raises(GenerationProviderError) as caught:
        _generator(fake).generate(_request())

    assert "answered with a body that is not" in caught.value.message


def test_a_rejected_key_names_the_variable_and_never_the_key() -> None:
    with FakeOpenAIChat(api_key="sk-the-right-key") as fake:
        generator = _generator(fake)

        with pytest.raises(UpstreamAuthError) as caught:
            generator.generate(_request())
        with pytest.raises(UpstreamAuthError) as caught_streaming:
            list(generator.stream(_request()))

    for error in (caught.value, caught_streaming.value):
        assert error.code == "upstream_auth_rejected"
        assert "GENERATION_API_KEY" in error.message
        assert KEY not in _rendered(error)
    # Refused credentials are not tried again.
    assert len(fake.requests) == 2


def test_an_unknown_model_is_a_provider_error_naming_the_status(fake: FakeOpenAIChat) -> None:
    with pytest.raises(GenerationProviderError) as caught:
        _generator(fake).generate(_request(model="gpt-unknown"))

    assert caught.value.code == "generation_provider_error"
    assert caught.value.status_code == 502
    assert "HTTP 404" in caught.value.message
    assert "gpt-unknown" in caught.value.message
    assert len(fake.requests) == 1


def test_an_echoed_key_is_redacted_from_a_refusal(fake: FakeOpenAIChat) -> None:
    fake.script(fake.error_reply(400, f"Invalid request from key {KEY}: 'messages' is too long"))

    with pytest.raises(GenerationProviderError) as caught:
        _generator(fake).generate(_request())

    assert "HTTP 400" in caught.value.message
    assert "'messages' is too long" in caught.value.message
    assert KEY not in _rendered(caught.value)


def test_an_empty_answer_is_a_provider_error(fake: FakeOpenAIChat) -> None:
    fake.answers.append("")

    with pytest.raises(GenerationProviderError) as caught:
        _generator(fake).generate(_request())

    assert "no text" in caught.value.message
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("timeout_s", "request_deadline_s"),
    [(1.0, None), (30.0, 1.0)],
    ids=["GENERATION_TIMEOUT_S", "the request's deadline"],
)
def test_a_slow_server_ends_as_504_within_the_budget(
    timeout_s: float, request_deadline_s: float | None
) -> None:
    with FakeOpenAIChat(api_key=KEY) as fake:
        fake.delay_s = 10
        generator = _generator(fake, generation_timeout_s=timeout_s)

        for call in (generator.generate, lambda request: list(generator.stream(request))):
            started = time.monotonic()
            with deadline_of(request_deadline_s), pytest.raises(UpstreamTimeoutError) as caught:
                call(_request())
            assert time.monotonic() - started < 1.6
            assert caught.value.code == "upstream_timeout"

        # The whole budget went to the first attempt of each call: no second request was started.
        assert len(fake.requests) == 2


def test_api_openai_com_without_a_key_is_a_configuration_error() -> None:
    settings = Settings(_env_file=None, generation_provider="openai")
    generator = OpenAICompatibleGenerator.from_settings(settings)

    with pytest.raises(ConfigurationError) as caught:
        generator.generate(_request())

    assert "GENERATION_API_KEY" in caught.value.message


def test_a_server_that_needs_no_key_gets_no_authorization_header() -> None:
    with FakeOpenAIChat() as fake:
        settings = Settings(_env_file=None, generation_provider="openai", generation_base_url=fake.base_url)

        generation = OpenAICompatibleGenerator.from_settings(settings).generate(_request())

        assert generation.text == fake.default_answer
        assert "authorization" not in fake.requests[0].headers
