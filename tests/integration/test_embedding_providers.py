"""The provider embedders with their real clients (httpx, google-genai, boto3) against local fakes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval_core.embeddings import build_embedder
from retrieval_core.embeddings.bedrock import BedrockTitanEmbedder
from retrieval_core.embeddings.gemini import GeminiEmbedder
from retrieval_core.embeddings.openai_compatible import OpenAICompatibleEmbedder
from retrieval_core.exceptions import ConfigurationError, EmbeddingProviderError
from retrieval_core.settings import Settings
from tests.fakes import fake_vector
from tests.fakes.bedrock import TITAN_V2, FakeBedrockRuntime
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai_embeddings import FakeOpenAIEmbeddings

ROOT = Path(__file__).resolve().parents[2]

FAST_RETRY_S = 0.001
TEXTS = ["alpha", "beta", "gamma", "delta", "epsilon"]
OPENAI_KEY = "sk-test-0123456789abcdef"
GEMINI_KEY = "gm-test-0123456789abcdef"
AWS_ACCESS_KEY_ID = "AKIAFAKEFAKEFAKE0001"
AWS_SECRET_ACCESS_KEY = "fake-secret-0123456789abcdefghijklmnop"


def _settings(**fields: Any) -> Settings:
    return Settings(_env_file=None, **fields)


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


def _assert_close(actual: list[list[float]], expected: list[list[float]]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


def _assert_secret_absent(exc: EmbeddingProviderError, *secrets: str) -> None:
    rendered = f"{exc} {exc.message} {json.dumps(exc.details, default=str)} {exc!r}"
    for secret in secrets:
        assert secret not in rendered


# OpenAI-compatible ------------------------------------------------------------------------------


@pytest.fixture
def openai_fake() -> Iterator[FakeOpenAIEmbeddings]:
    with FakeOpenAIEmbeddings(dimension=8, api_key=OPENAI_KEY) as fake:
        yield fake


def _openai(fake: FakeOpenAIEmbeddings, **fields: Any) -> OpenAICompatibleEmbedder:
    values: dict[str, Any] = {
        "embedding_provider": "openai",
        "openai_base_url": fake.base_url,
        "openai_api_key": OPENAI_KEY,
        "embedding_model": "text-embedding-3-small",
        "embedding_dimension": 8,
        **fields,
    }
    embedder = build_embedder(_settings(**values))
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    embedder.retry_base_delay_s = FAST_RETRY_S
    return embedder


def test_openai_vectors_come_back_in_input_order(openai_fake: FakeOpenAIEmbeddings) -> None:
    embedder = _openai(openai_fake)

    vectors = embedder.embed(TEXTS, "document")

    # The fake answers data[] reversed: only sorting by `index` gives this order.
    _assert_close(vectors, [fake_vector(text, 8) for text in TEXTS])
    assert embedder.model == "text-embedding-3-small"
    assert embedder.dimension == 8
    (request,) = openai_fake.requests
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert request.json() == {"model": "text-embedding-3-small", "input": TEXTS}


def test_openai_batches_by_embedding_batch_size(openai_fake: FakeOpenAIEmbeddings) -> None:
    embedder = _openai(openai_fake, embedding_batch_size=2)

    vectors = embedder.embed(TEXTS, "document")

    assert openai_fake.embedding_batches() == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    _assert_close(vectors, [fake_vector(text, 8) for text in TEXTS])


def test_openai_reuses_one_connection_across_batches(openai_fake: FakeOpenAIEmbeddings) -> None:
    embedder = _openai(openai_fake, embedding_batch_size=1)

    embedder.embed(TEXTS[:3], "query")

    assert len(openai_fake.requests) == 3
    assert len({r.client_address for r in openai_fake.requests}) == 1


def test_openai_sends_no_authorization_without_a_key() -> None:
    with FakeOpenAIEmbeddings(dimension=8) as fake:
        embedder = _openai(fake, openai_api_key=None)

        assert len(embedder.embed(["ollama needs no key"], "query")) == 1

        assert "authorization" not in fake.requests[0].headers


def test_openai_empty_input_makes_no_call(openai_fake: FakeOpenAIEmbeddings) -> None:
    assert _openai(openai_fake).embed([], "query") == []
    assert openai_fake.requests == []


def test_openai_wrong_dimension_is_refused(openai_fake: FakeOpenAIEmbeddings) -> None:
    openai_fake.dimension = 12
    embedder = _openai(openai_fake)

    with pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed(TEXTS, "document")

    assert "12" in caught.value.message
    assert "8" in caught.value.message
    assert caught.value.status_code == 502


def test_openai_rejected_key_does_not_leak() -> None:
    with FakeOpenAIEmbeddings(dimension=8, api_key="sk-the-right-one") as fake:
        embedder = _openai(fake)

        with pytest.raises(EmbeddingProviderError) as caught:
            embedder.embed(TEXTS, "query")

        # The fake echoes the rejected key in its body, as OpenAI partly does.
        assert OPENAI_KEY in fake.requests[0].headers["authorization"]
        assert "401" in caught.value.message
        assert "OPENAI_API_KEY" in caught.value.message
        _assert_secret_absent(caught.value, OPENAI_KEY)
        assert len(fake.requests) == 1


def test_openai_forbidden_does_not_leak(openai_fake: FakeOpenAIEmbeddings) -> None:
    openai_fake.fail_next(1, 403, f"key {OPENAI_KEY} may not use this model")

    with pytest.raises(EmbeddingProviderError) as caught:
        _openai(openai_fake).embed(TEXTS, "query")

    assert "403" in caught.value.message
    _assert_secret_absent(caught.value, OPENAI_KEY)


def test_openai_client_error_is_not_retried_and_redacts_the_key(openai_fake: FakeOpenAIEmbeddings) -> None:
    openai_fake.fail_next(1, 400, f"input too long (sent with {OPENAI_KEY})")

    with pytest.raises(EmbeddingProviderError) as caught:
        _openai(openai_fake).embed(TEXTS, "query")

    assert "input too long" in caught.value.message
    _assert_secret_absent(caught.value, OPENAI_KEY)
    assert len(openai_fake.requests) == 1


@pytest.mark.parametrize("status", [429, 503])
def test_openai_retries_then_succeeds(openai_fake: FakeOpenAIEmbeddings, status: int) -> None:
    openai_fake.fail_next(1, status)

    vectors = _openai(openai_fake).embed(TEXTS, "document")

    _assert_close(vectors, [fake_vector(text, 8) for text in TEXTS])
    assert len(openai_fake.requests) == 2


def test_openai_gives_up_after_three_attempts(openai_fake: FakeOpenAIEmbeddings) -> None:
    openai_fake.fail_always(500)

    with pytest.raises(EmbeddingProviderError) as caught:
        _openai(openai_fake).embed(TEXTS, "document")

    assert len(openai_fake.requests) == 3
    assert "500" in caught.value.message
    assert "3 attempts" in caught.value.message


def test_openai_unreachable_endpoint_raises_provider_error() -> None:
    with FakeOpenAIEmbeddings() as fake:
        base_url = fake.base_url
    embedder = _openai_at(base_url)

    with pytest.raises(EmbeddingProviderError) as caught:
        embedder.embed(TEXTS, "query")

    assert "could not be reached after 3 attempts" in caught.value.message


def _openai_at(base_url: str) -> OpenAICompatibleEmbedder:
    embedder = build_embedder(
        _settings(embedding_provider="openai", openai_base_url=base_url, embedding_dimension=8)
    )
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    embedder.retry_base_delay_s = FAST_RETRY_S
    return embedder


# Gemini ----------------------------------------------------------------------------------------

GEMINI_EMBED_PATH = "/v1/models/gemini-embedding-001:batchEmbedContents"


@pytest.fixture
def gemini_fake() -> Iterator[FakeGemini]:
    with FakeGemini(api_key=GEMINI_KEY) as fake:
        yield fake


def _gemini(fake: FakeGemini, **fields: Any) -> GeminiEmbedder:
    values: dict[str, Any] = {
        "embedding_provider": "gemini",
        "gemini_api_key": GEMINI_KEY,
        "gemini_base_url": fake.url,
        "embedding_dimension": 8,
        **fields,
    }
    embedder = build_embedder(_settings(**values))
    assert isinstance(embedder, GeminiEmbedder)
    embedder.retry_base_delay_s = FAST_RETRY_S
    return embedder


def _gemini_expected(texts: list[str], task_type: str, dimension: int = 8) -> list[list[float]]:
    return [_unit(fake_vector(text, dimension, salt=task_type, normalize=False)) for text in texts]


def test_gemini_vectors_come_back_in_input_order(gemini_fake: FakeGemini) -> None:
    embedder = _gemini(gemini_fake)

    vectors = embedder.embed(TEXTS, "document")

    _assert_close(vectors, _gemini_expected(TEXTS, "RETRIEVAL_DOCUMENT"))
    assert all(math.isclose(math.fsum(v * v for v in vector), 1.0) for vector in vectors)
    assert embedder.model == "gemini-embedding-001"
    (request,) = gemini_fake.requests
    assert request.path == GEMINI_EMBED_PATH
    assert request.headers["x-goog-api-key"] == GEMINI_KEY
    assert request.json() == {
        "requests": [
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": text}]},
                "taskType": "RETRIEVAL_DOCUMENT",
                "outputDimensionality": 8,
            }
            for text in TEXTS
        ]
    }


def test_gemini_batches_by_embedding_batch_size(gemini_fake: FakeGemini) -> None:
    _gemini(gemini_fake, embedding_batch_size=2).embed(TEXTS, "document")

    assert [len(call.json()["requests"]) for call in gemini_fake.embed_calls()] == [2, 2, 1]


def test_gemini_batches_never_exceed_100(gemini_fake: FakeGemini) -> None:
    texts = [f"passage {i}" for i in range(205)]

    vectors = _gemini(gemini_fake, embedding_batch_size=500).embed(texts, "document")

    assert [len(call.json()["requests"]) for call in gemini_fake.embed_calls()] == [100, 100, 5]
    _assert_close(vectors, _gemini_expected(texts, "RETRIEVAL_DOCUMENT"))


def test_gemini_sends_the_task_type_of_each_kind(gemini_fake: FakeGemini) -> None:
    embedder = _gemini(gemini_fake)

    query = embedder.embed(["what is rag"], "query")
    document = embedder.embed(["what is rag"], "document")

    task_types = [call.json()["requests"][0]["taskType"] for call in gemini_fake.embed_calls()]
    assert task_types == ["RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT"]
    _assert_close(query, _gemini_expected(["what is rag"], "RETRIEVAL_QUERY"))
    assert query != document


def test_gemini_multimodal_model_gets_one_vector_per_text(gemini_fake: FakeGemini) -> None:
    # google-genai merges a list of plain strings into one Content for these models.
    embedder = _gemini(gemini_fake, embedding_model="gemini-embedding-2")

    vectors = embedder.embed(TEXTS[:3], "query")

    assert len(vectors) == 3
    (call,) = gemini_fake.embed_calls()
    assert call.path == "/v1/models/gemini-embedding-2:batchEmbedContents"
    assert len(call.json()["requests"]) == 3


def test_gemini_wrong_dimension_is_refused(gemini_fake: FakeGemini) -> None:
    gemini_fake.force_dimension = 12

    with pytest.raises(EmbeddingProviderError) as caught:
        _gemini(gemini_fake).embed(TEXTS, "query")

    assert "12" in caught.value.message
    assert "8" in caught.value.message


def test_gemini_invalid_key_does_not_leak() -> None:
    with FakeGemini(api_key="the-right-key") as fake:
        with pytest.raises(EmbeddingProviderError) as caught:
            _gemini(fake).embed(TEXTS, "query")

        assert fake.requests[0].headers["x-goog-api-key"] == GEMINI_KEY
        assert "GEMINI_API_KEY" in caught.value.message
        _assert_secret_absent(caught.value, GEMINI_KEY)
        assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_gemini_refused_credentials_do_not_leak(gemini_fake: FakeGemini, status: int) -> None:
    gemini_fake.fail_next(1, status, f"key {GEMINI_KEY} is not allowed")

    with pytest.raises(EmbeddingProviderError) as caught:
        _gemini(gemini_fake).embed(TEXTS, "query")

    assert str(status) in caught.value.message
    _assert_secret_absent(caught.value, GEMINI_KEY)
    assert len(gemini_fake.requests) == 1


def test_gemini_retries_429_then_succeeds(gemini_fake: FakeGemini) -> None:
    gemini_fake.fail_next(1, 429, "quota")

    vectors = _gemini(gemini_fake).embed(TEXTS, "document")

    _assert_close(vectors, _gemini_expected(TEXTS, "RETRIEVAL_DOCUMENT"))
    assert len(gemini_fake.embed_calls()) == 2


def test_gemini_gives_up_after_three_attempts(gemini_fake: FakeGemini) -> None:
    gemini_fake.fail_always(500, f"backend exploded near {GEMINI_KEY}")

    with pytest.raises(EmbeddingProviderError) as caught:
        _gemini(gemini_fake).embed(TEXTS, "document")

    assert len(gemini_fake.requests) == 3
    assert "500" in caught.value.message
    assert "3 attempts" in caught.value.message
    _assert_secret_absent(caught.value, GEMINI_KEY)


def test_gemini_without_a_key_is_a_configuration_error_at_the_first_embedding() -> None:
    embedder = build_embedder(_settings(embedding_provider="gemini", gemini_api_key=None))
    with pytest.raises(ConfigurationError) as caught:
        embedder.embed(TEXTS, "query")
    assert "GEMINI_API_KEY" in caught.value.message


# Bedrock ---------------------------------------------------------------------------------------


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bedrock_fake(aws_env: None) -> Iterator[FakeBedrockRuntime]:
    with FakeBedrockRuntime() as fake:
        yield fake


def _bedrock(fake: FakeBedrockRuntime, **fields: Any) -> BedrockTitanEmbedder:
    values: dict[str, Any] = {
        "embedding_provider": "bedrock",
        "bedrock_region": "eu-west-1",
        "bedrock_endpoint_url": fake.url,
        "embedding_dimension": 256,
        **fields,
    }
    embedder = build_embedder(_settings(**values))
    assert isinstance(embedder, BedrockTitanEmbedder)
    embedder.retry_base_delay_s = FAST_RETRY_S
    return embedder


def test_bedrock_vectors_come_back_in_input_order(bedrock_fake: FakeBedrockRuntime) -> None:
    embedder = _bedrock(bedrock_fake)

    vectors = embedder.embed(TEXTS, "document")

    _assert_close(vectors, [fake_vector(text, 256) for text in TEXTS])
    assert embedder.model == TITAN_V2
    calls = bedrock_fake.invoke_calls()
    assert {call.path for call in calls} == {f"/model/{TITAN_V2}/invoke"}
    assert sorted(call.json()["inputText"] for call in calls) == sorted(TEXTS)
    assert all(
        call.json() == {"inputText": call.json()["inputText"], "dimensions": 256, "normalize": True}
        for call in calls
    )
    # SigV4 for the configured region, with the credentials from the environment.
    assert f"Credential={AWS_ACCESS_KEY_ID}/" in calls[0].headers["authorization"]
    assert "/eu-west-1/bedrock/aws4_request" in calls[0].headers["authorization"]


def test_bedrock_sends_one_text_per_call_concurrently(aws_env: None) -> None:
    texts = [f"passage {i}" for i in range(16)]
    with FakeBedrockRuntime(delay_s=0.05) as fake:
        vectors = _bedrock(fake).embed(texts, "document")

        assert len(fake.invoke_calls()) == 16
        assert 1 < fake.max_in_flight <= 8
    _assert_close(vectors, [fake_vector(text, 256) for text in texts])


def test_bedrock_single_query_makes_one_call(bedrock_fake: FakeBedrockRuntime) -> None:
    (vector,) = _bedrock(bedrock_fake, embedding_dimension=1024).embed(["a question"], "query")

    assert vector == pytest.approx(fake_vector("a question", 1024))
    assert len(bedrock_fake.invoke_calls()) == 1


def test_bedrock_wrong_dimension_is_refused(bedrock_fake: FakeBedrockRuntime) -> None:
    bedrock_fake.force_dimension = 512

    with pytest.raises(EmbeddingProviderError) as caught:
        _bedrock(bedrock_fake).embed(TEXTS, "document")

    assert "512" in caught.value.message
    assert "256" in caught.value.message


def test_bedrock_refuses_dimensions_titan_v2_cannot_produce(aws_env: None) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_embedder(_settings(embedding_provider="bedrock", embedding_dimension=768))

    assert "768" in caught.value.message


def test_bedrock_access_denied_does_not_leak(bedrock_fake: FakeBedrockRuntime) -> None:
    bedrock_fake.fail_next(
        1, 403, f"User with key {AWS_ACCESS_KEY_ID} (secret {AWS_SECRET_ACCESS_KEY}) is not authorized"
    )

    with pytest.raises(EmbeddingProviderError) as caught:
        _bedrock(bedrock_fake).embed(["one text"], "query")

    assert "AccessDeniedException" in caught.value.message
    _assert_secret_absent(caught.value, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
    assert len(bedrock_fake.requests) == 1


def test_bedrock_retries_throttling_then_succeeds(bedrock_fake: FakeBedrockRuntime) -> None:
    bedrock_fake.fail_next(1, 429, "Too many requests, please wait before trying again.")

    (vector,) = _bedrock(bedrock_fake).embed(["one text"], "query")

    assert vector == pytest.approx(fake_vector("one text", 256))
    assert len(bedrock_fake.invoke_calls()) == 2


def test_bedrock_gives_up_after_three_attempts(bedrock_fake: FakeBedrockRuntime) -> None:
    bedrock_fake.fail_always(500, "internal failure")

    with pytest.raises(EmbeddingProviderError) as caught:
        _bedrock(bedrock_fake).embed(["one text"], "query")

    assert len(bedrock_fake.requests) == 3
    assert "InternalServerException" in caught.value.message
    assert "3 attempts" in caught.value.message


# Cold start ------------------------------------------------------------------------------------


def test_provider_modules_do_not_import_their_clients_at_import_time() -> None:
    script = (
        "import json, sys\n"
        "heavy = ('google.genai', 'boto3', 'botocore')\n"
        "import retrieval_core.embeddings.gemini, retrieval_core.embeddings.bedrock\n"
        "before = [m for m in heavy if m in sys.modules]\n"
        "from google import genai\n"
        "import boto3\n"
        "after = [m for m in heavy if m in sys.modules]\n"
        "print(json.dumps({'before': before, 'after': after}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "layers" / "retrieval_core")}

    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True, timeout=60
    )

    seen = json.loads(result.stdout)
    assert seen["before"] == []
    # The probe itself works: the same check sees the clients once they are imported.
    assert seen["after"] == ["google.genai", "boto3", "botocore"]
