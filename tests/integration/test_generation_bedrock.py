"""The Bedrock generator, driven by the real boto3 client against a local Converse and ConverseStream fake."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from retrieval_core.clients.deadline import deadline_of
from retrieval_core.exceptions import (
    ConfigurationError,
    GenerationProviderError,
    UpstreamAuthError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from retrieval_core.generation.base import Generation, GenerationRequest
from retrieval_core.generation.bedrock import BedrockGenerator
from retrieval_core.generation.prompt import system_text, user_text
from retrieval_core.settings import Settings
from tests.fakes.bedrock_converse import NOVA_LITE, Cited, FakeBedrockConverse

SOURCES = ["Paris is the capital of France.", "Le Rhône traverse Genève et Lyon."]
QUESTION = "What is the capital of France?"
# Seconds a call may overrun its budget: thread hand-over and the test machine's load.
MARGIN_S = 1.5


def _request(model: str = NOVA_LITE, max_output_tokens: int = 256) -> GenerationRequest:
    return GenerationRequest(
        system=system_text("Answer in one sentence."),
        prompt=user_text(QUESTION, SOURCES),
        question=QUESTION,
        sources=SOURCES,
        max_output_tokens=max_output_tokens,
        model=model,
    )


def _generator(fake: FakeBedrockConverse, **fields: Any) -> BedrockGenerator:
    values: dict[str, Any] = {
        "generation_provider": "bedrock",
        "bedrock_region": "us-west-2",
        "bedrock_endpoint_url": fake.url,
        "generation_attempts": 3,
        **fields,
    }
    return BedrockGenerator.from_settings(Settings(_env_file=None, **values))  # type: ignore[call-arg]


def _warm(fake: FakeBedrockConverse, **fields: Any) -> BedrockGenerator:
    """A generator whose client is built (one answer served and forgotten): timings then measure calls,
    not boto3's import and the client's construction, which a loaded machine slows down."""
    generator = _generator(fake, **fields)
    generator.generate(_request())
    fake.reset()
    return generator


def _streamed(generator: BedrockGenerator, request: GenerationRequest) -> tuple[list[str], Generation]:
    events = list(generator.stream(request))
    *deltas, final = events
    assert all(isinstance(delta, str) for delta in deltas)
    assert isinstance(final, Generation)
    return [str(delta) for delta in deltas], final


@pytest.fixture
def fake(aws_env: None) -> Iterator[FakeBedrockConverse]:
    with FakeBedrockConverse() as server:
        yield server


# Answers --------------------------------------------------------------------------------------------


def test_generate_sends_the_documented_converse_request_and_maps_the_answer(
    fake: FakeBedrockConverse,
) -> None:
    fake.input_tokens, fake.output_tokens, fake.stop_reason = 321, 12, "max_tokens"

    generation = _generator(fake).generate(_request(max_output_tokens=64))

    assert generation.text == "Paris is the capital of France [1]."
    assert generation.native_citations is None
    assert generation.model == NOVA_LITE
    assert (generation.input_tokens, generation.output_tokens) == (321, 12)
    assert generation.stop_reason == "max_tokens"
    (call,) = fake.converse_calls()
    assert call.path == f"/model/{NOVA_LITE}/converse"
    assert "/us-west-2/bedrock/aws4_request" in call.headers["authorization"]
    assert call.json() == {
        "system": [{"text": system_text("Answer in one sentence.")}],
        "messages": [{"role": "user", "content": [{"text": user_text(QUESTION, SOURCES)}]}],
        "inferenceConfig": {"maxTokens": 64, "temperature": 0},
    }


def test_the_default_model_is_nova_lite_and_a_request_may_name_another(aws_env: None) -> None:
    with FakeBedrockConverse(models=[NOVA_LITE, "anthropic.claude-3-haiku-20240307-v1:0"]) as fake:
        generator = _generator(fake)
        generator.generate(_request(model="anthropic.claude-3-haiku-20240307-v1:0"))

    assert generator.model == NOVA_LITE
    assert [call.path for call in fake.converse_calls()] == [
        "/model/anthropic.claude-3-haiku-20240307-v1:0/converse"
    ]


def test_stream_yields_deltas_in_order_then_the_whole_generation(fake: FakeBedrockConverse) -> None:
    fake.answer = ["Paris is ", "the capital [1]. Lyon lies on the Rhône [2]."]

    deltas, final = _streamed(_generator(fake), _request())

    assert len(deltas) > 3
    assert "".join(deltas) == final.text == "Paris is the capital [1]. Lyon lies on the Rhône [2]."
    assert (final.input_tokens, final.output_tokens, final.stop_reason) == (120, 9, "end_turn")
    assert final.native_citations is None
    (call,) = fake.stream_calls()
    assert call.path == f"/model/{NOVA_LITE}/converse-stream"
    assert call.json()["inferenceConfig"] == {"maxTokens": 256, "temperature": 0}


def test_stream_hands_over_the_first_delta_before_the_rest_is_written(fake: FakeBedrockConverse) -> None:
    generator = _warm(fake, generation_timeout_s=8)
    fake.resume = threading.Event()  # the fake writes nothing after the first delta until this is set
    events = generator.stream(_request())

    started = time.monotonic()
    first = next(events)
    waited = time.monotonic() - started
    fake.resume.set()
    rest = list(events)

    assert first == "Paris "
    assert waited < 4  # the fake holds the rest back for 10 s
    final = rest[-1]
    assert isinstance(final, Generation)
    assert first + "".join(str(delta) for delta in rest[:-1]) == final.text


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_native_citations_cover_code_points_of_the_text(fake: FakeBedrockConverse, streamed: bool) -> None:
    fake.answer = ["Paris est la capitale. ", Cited("Le Rhône traverse Genève 🌊.", (1,)), " Fin."]
    generator = _generator(fake)

    generation = _streamed(generator, _request())[1] if streamed else generator.generate(_request())

    assert generation.text == "Paris est la capitale. Le Rhône traverse Genève 🌊. Fin."
    (citation,) = generation.native_citations or []
    assert generation.text[citation.start : citation.end] == "Le Rhône traverse Genève 🌊."
    assert citation.sources == (2,)


def test_a_passage_cited_by_several_documents_names_each_source_once(fake: FakeBedrockConverse) -> None:
    fake.answer = [Cited("Paris, on the Seine.", (0, 1, 0))]

    generation = _generator(fake).generate(_request())

    assert [(c.start, c.end, c.sources) for c in generation.native_citations or []] == [(0, 20, (1, 2))]


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_an_answer_without_text_is_a_provider_error(fake: FakeBedrockConverse, streamed: bool) -> None:
    fake.answer = [""]
    fake.stop_reason = "content_filtered"
    generator = _generator(fake)

    with pytest.raises(GenerationProviderError) as caught:
        _streamed(generator, _request()) if streamed else generator.generate(_request())

    assert caught.value.code == "generation_provider_error"
    assert "content_filtered" in caught.value.message


# Retries and failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_throttling_is_retried_then_the_answer_served(fake: FakeBedrockConverse, streamed: bool) -> None:
    fake.fail_next(2, 429, "Too many requests, please wait before trying again.")
    generator = _generator(fake)

    generation = _streamed(generator, _request())[1] if streamed else generator.generate(_request())

    assert generation.text == "Paris is the capital of France [1]."
    assert len(fake.stream_calls() if streamed else fake.converse_calls()) == 3


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_throttling_through_every_attempt_is_503_with_retry_after(
    fake: FakeBedrockConverse, streamed: bool
) -> None:
    fake.fail_always(429, "Too many requests, please wait before trying again.")
    generator = _generator(fake)

    with pytest.raises(UpstreamUnavailableError) as caught:
        _streamed(generator, _request()) if streamed else generator.generate(_request())

    assert caught.value.code == "upstream_unavailable"
    assert caught.value.retry_after_s is not None and caught.value.retry_after_s > 0
    assert "ThrottlingException" in caught.value.message
    assert caught.value.details["attempts"] == 3
    assert len(fake.stream_calls() if streamed else fake.converse_calls()) == 3


def test_throttling_inside_the_stream_after_text_is_503_without_a_retry(fake: FakeBedrockConverse) -> None:
    fake.exception_after_first_delta = "throttlingException"
    received: list[str] = []

    with pytest.raises(UpstreamUnavailableError) as caught:
        for event in _generator(fake).stream(_request()):
            received.append(str(event))

    assert received == ["Paris "]
    assert "ThrottlingException" in caught.value.message
    assert len(fake.stream_calls()) == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_access_denied_is_an_auth_error_that_quotes_no_credential(
    fake: FakeBedrockConverse, streamed: bool
) -> None:
    fake.fail_next(1, 403, "User arn:aws:iam::123456789012:user/AKIAFAKEKEY is not authorized")
    generator = _generator(fake)

    with pytest.raises(UpstreamAuthError) as caught:
        _streamed(generator, _request()) if streamed else generator.generate(_request())

    assert caught.value.code == "upstream_auth_rejected"
    assert "bedrock:InvokeModel" in caught.value.message
    assert "AKIAFAKEKEY" not in caught.value.message and "testing" not in caught.value.message
    assert len(fake.requests) == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_an_unknown_model_is_a_provider_error_naming_it(fake: FakeBedrockConverse, streamed: bool) -> None:
    generator = _generator(fake)
    request = _request(model="amazon.nova-nonexistent-v9:0")

    with pytest.raises(GenerationProviderError) as caught:
        _streamed(generator, request) if streamed else generator.generate(request)

    assert caught.value.code == "generation_provider_error"
    assert "amazon.nova-nonexistent-v9:0" in caught.value.message
    assert "ValidationException" in caught.value.message
    assert len(fake.requests) == 1


def test_a_missing_region_is_a_configuration_error_before_any_call(
    fake: FakeBedrockConverse, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")

    with pytest.raises(ConfigurationError, match="BEDROCK_REGION"):
        _generator(fake, bedrock_region=None).generate(_request())

    assert fake.requests == []


# Time ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_a_slow_model_ends_as_504_within_the_generation_timeout(aws_env: None, streamed: bool) -> None:
    with FakeBedrockConverse() as fake:
        generator = _warm(fake, generation_timeout_s=1.0)
        fake.delay_s = 10
        started = time.monotonic()
        with pytest.raises(UpstreamTimeoutError) as caught:
            _streamed(generator, _request()) if streamed else generator.generate(_request())
        elapsed = time.monotonic() - started

    assert caught.value.code == "upstream_timeout"
    assert "GENERATION_TIMEOUT_S" in caught.value.message
    assert elapsed < 1.0 + MARGIN_S


def test_a_stream_that_stalls_after_its_first_text_ends_as_504_unretried(fake: FakeBedrockConverse) -> None:
    generator = _warm(fake, generation_timeout_s=1.0)
    fake.stall_after_first_delta_s = 10
    received: list[str] = []
    started = time.monotonic()

    with pytest.raises(UpstreamTimeoutError):
        for event in generator.stream(_request()):
            received.append(str(event))

    assert time.monotonic() - started < 1.0 + MARGIN_S
    assert received == ["Paris "]
    assert len(fake.stream_calls()) == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["converse", "converse-stream"])
def test_the_request_deadline_cuts_the_generation_timeout(aws_env: None, streamed: bool) -> None:
    with FakeBedrockConverse() as fake:
        generator = _warm(fake, generation_timeout_s=20.0)
        fake.delay_s = 10
        started = time.monotonic()
        with deadline_of(1.0), pytest.raises(UpstreamTimeoutError):
            _streamed(generator, _request()) if streamed else generator.generate(_request())
        elapsed = time.monotonic() - started

    assert elapsed < 1.0 + MARGIN_S
    assert len(fake.requests) == 1
