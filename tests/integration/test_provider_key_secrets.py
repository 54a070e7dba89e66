"""The embedding, Gemini and reranker keys live in Secrets Manager or SSM Parameter Store.

Real boto3 (through the Powertools parameters utility) against moto_server; the providers are local
fakes that record the key they were sent. Keys are read when a provider is called, cached for 5 minutes
and read anew once the cache is cleared (as a SnapStart restore clears it).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.clients.secret_store import forget_cached_secrets
from retrieval_core.embeddings import build_embedder
from retrieval_core.embeddings.api_key import embedder_configuration_problem
from retrieval_core.exceptions import (
    ConfigurationError,
    EmbeddingProviderError,
    RerankerUnavailableError,
    RetrievalError,
)
from retrieval_core.rerank import build_reranker, clear_reranker_cache
from retrieval_core.settings import Settings
from tests.fakes.gemini import FakeGemini
from tests.fakes.gemini_rerank import FakeGeminiRerank
from tests.fakes.openai_embeddings import FakeOpenAIEmbeddings
from tests.fakes.reranker import FakeReranker
from tests.servers import MotoServer
from tests.writing import TextDocument, ensure_store, write_documents

RETRIEVE = "/api/v1/rag/retrieve"
DOCUMENTS = ["The scheduler places pods on nodes.", "Bananas are rich in potassium."]


def _settings(**fields: Any) -> Settings:
    return Settings(_env_file=None, **fields)


def _key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def _rendered(exc: RetrievalError) -> str:
    return f"{exc} {exc.message} {json.dumps(exc.details, default=str)} {exc!r} {exc.args!r}"


@contextmanager
def _unlogged() -> Iterator[None]:
    # The test's own writes are not under test: botocore logs their request bodies, the keys included.
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


class SecretStore:
    """Secrets and SecureString parameters on moto_server, written the way an operator would (unlogged)."""

    def __init__(self, moto: MotoServer) -> None:
        self.secrets = moto.client("secretsmanager")
        self.ssm = moto.client("ssm")

    def secret(self, value: str) -> str:
        """A new Secrets Manager secret holding `value`; its ARN."""
        name = f"retrieval/key-{uuid.uuid4().hex[:8]}"
        with _unlogged():
            return str(self.secrets.create_secret(Name=name, SecretString=value)["ARN"])

    def parameter(self, value: str) -> str:
        """A new SSM SecureString parameter holding `value`; its ARN."""
        name = f"/retrieval/key-{uuid.uuid4().hex[:8]}"
        with _unlogged():
            # Overwrite: the name is new, but a put retried after a slow answer (moto_server is serial,
            # and busy in CI) must not fail with ParameterAlreadyExists.
            self.ssm.put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)
            return str(self.ssm.get_parameter(Name=name)["Parameter"]["ARN"])

    def rotate(self, arn: str, value: str) -> None:
        """A new value for the secret or parameter `arn` names."""
        with _unlogged():
            if ":ssm:" in arn:
                self.ssm.put_parameter(Name=arn.split(":parameter", 1)[1], Value=value, Overwrite=True)
            else:
                self.secrets.put_secret_value(SecretId=arn, SecretString=value)


@pytest.fixture()
def store(moto: MotoServer, aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretStore]:
    """boto3 pointed at moto_server for both services; no secret cached before or after the test."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto.endpoint_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SSM", moto.endpoint_url)
    forget_cached_secrets()
    yield SecretStore(moto)
    forget_cached_secrets()
    clear_reranker_cache()


def _bearers(fake: FakeOpenAIEmbeddings | FakeReranker) -> list[str]:
    return [request.headers.get("authorization", "") for request in fake.requests]


def _openai(fake: FakeOpenAIEmbeddings, arn: str, **fields: Any) -> Any:
    return build_embedder(
        _settings(
            embedding_provider="openai",
            openai_base_url=fake.base_url,
            embedding_dimension=8,
            embedding_api_key_secret_arn=arn,
            **fields,
        )
    )


# The OpenAI-compatible embedder ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "shape"),
    [("secret", "plain"), ("secret", "json"), ("parameter", "plain"), ("parameter", "json")],
)
def test_openai_key_from_a_secret_is_read_lazily_cached_and_rotated(
    store: SecretStore, kind: str, shape: str
) -> None:
    first, second = _key("sk-first"), _key("sk-second")

    def stored(key: str) -> str:
        return json.dumps({"apiKey": key}) if shape == "json" else key

    arn = (store.secret if kind == "secret" else store.parameter)(stored("sk-not-yet"))
    with FakeOpenAIEmbeddings(dimension=8) as fake:
        embedder = _openai(fake, arn)
        # Built, not called: nothing was read yet (a SnapStart snapshot taken now holds no key).
        store.rotate(arn, stored(first))

        embedder.embed(["alpha"], "query")
        store.rotate(arn, stored(second))
        embedder.embed(["beta"], "query")  # within the cache's 5 minutes: the key read before
        forget_cached_secrets()  # what a SnapStart restore, or the cache's expiry, does
        embedder.embed(["gamma"], "query")

        assert _bearers(fake) == [f"Bearer {first}", f"Bearer {first}", f"Bearer {second}"]


def test_the_environment_key_wins_over_the_secret(store: SecretStore) -> None:
    in_env, in_secret = _key("sk-env"), _key("sk-secret")
    with FakeOpenAIEmbeddings(dimension=8) as fake:
        _openai(fake, store.secret(in_secret), openai_api_key=in_env).embed(["alpha"], "query")
        assert _bearers(fake) == [f"Bearer {in_env}"]


def test_a_rejected_key_from_a_secret_fails_once_and_never_shows(store: SecretStore) -> None:
    wrong = _key("sk-wrong")
    with FakeOpenAIEmbeddings(dimension=8, api_key=_key("sk-right")) as fake:
        embedder = _openai(fake, store.secret(json.dumps({"apiKey": wrong})))
        with pytest.raises(EmbeddingProviderError) as caught:
            embedder.embed(["alpha"], "query")

        assert len(fake.requests) == 1  # a 401 is not retried
        assert caught.value.code == "embedding_provider_error" and "401" in caught.value.message
        assert "EMBEDDING_API_KEY_SECRET_ARN" in caught.value.message
        # The fake echoes the rejected key in its body, as OpenAI does.
        assert wrong not in _rendered(caught.value)


@pytest.mark.parametrize(
    ("make_arn", "code"),
    [
        (
            lambda s: "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/none-AbCdEf",
            "ResourceNotFoundException",
        ),
        (lambda s: "arn:aws:ssm:us-east-1:123456789012:parameter/retrieval/none", "ParameterNotFound"),
        (lambda s: s.secret(json.dumps({"api_key": "sk-misfiled-0123456789"})), None),
        (lambda s: s.secret("  "), None),
    ],
    ids=["missing-secret", "missing-parameter", "json-without-apiKey", "blank"],
)
def test_an_unusable_secret_names_the_variable_and_the_aws_code(
    store: SecretStore, make_arn: Callable[[SecretStore], str], code: str | None
) -> None:
    arn = make_arn(store)
    with FakeOpenAIEmbeddings(dimension=8) as fake:
        with pytest.raises(ConfigurationError) as caught:
            _openai(fake, arn).embed(["alpha"], "query")
        assert fake.requests == []

    assert "EMBEDDING_API_KEY_SECRET_ARN" in caught.value.message
    if code is not None:
        assert code in caught.value.message  # ResourceNotFoundException, ParameterNotFound
    else:
        assert '{"apiKey": "..."}' in caught.value.message
    assert "sk-misfiled-0123456789" not in _rendered(caught.value)
    # Nothing a decoder kept: the message stands alone.
    assert caught.value.__cause__ is None or "misfiled" not in repr(caught.value.__cause__)


@pytest.mark.parametrize("value", ["retrieval/openai-key", "arn:aws:s3:::bucket/key", ""])
def test_a_value_that_is_no_secret_arn_is_refused_at_the_first_embedding(value: str) -> None:
    settings = _settings(
        embedding_provider="openai", embedding_api_key_secret_arn=value or None, embedding_dimension=8
    )
    # Built all the same: a function that never embeds serves; health names the problem beforehand.
    embedder = build_embedder(settings)
    assert embedder_configuration_problem(settings) is not None
    with pytest.raises(ConfigurationError) as caught:
        embedder.embed(["alpha"], "query")
    message = caught.value.message
    assert "EMBEDDING_API_KEY_SECRET_ARN" in message
    if value:
        assert value not in message and "neither" in message
    else:
        # api.openai.com needs a key: the message says what to set.
        assert "OPENAI_API_KEY" in message


# Gemini ------------------------------------------------------------------------------------------


def test_gemini_embedder_key_from_its_secret_or_the_gemini_secret(store: SecretStore) -> None:
    embedding_key, gemini_key = _key("gm-embed"), _key("gm-shared")
    shared = store.parameter(json.dumps({"apiKey": gemini_key}))
    own = store.secret(embedding_key)
    with FakeGemini(api_key=gemini_key) as fake:
        fields: dict[str, Any] = {
            "embedding_provider": "gemini",
            "gemini_base_url": fake.url,
            "embedding_dimension": 8,
            "gemini_api_key_secret_arn": shared,
        }
        # No key of its own for embeddings: the File Search key serves both.
        assert len(build_embedder(_settings(**fields)).embed(["alpha"], "query")) == 1
        # A key of its own takes precedence.
        fake.api_key = embedding_key
        build_embedder(_settings(**fields, embedding_api_key_secret_arn=own)).embed(["beta"], "query")

        assert [r.headers["x-goog-api-key"] for r in fake.requests] == [gemini_key, embedding_key]


def test_gemini_embedder_rebuilds_its_client_for_a_rotated_key(store: SecretStore) -> None:
    first, second = _key("gm-first"), _key("gm-second")
    arn = store.secret(first)
    with FakeGemini(api_key=first) as fake:
        embedder = build_embedder(
            _settings(
                embedding_provider="gemini",
                gemini_base_url=fake.url,
                embedding_dimension=8,
                embedding_api_key_secret_arn=arn,
            )
        )
        embedder.embed(["alpha"], "query")
        store.rotate(arn, second)
        fake.api_key = second
        forget_cached_secrets()
        embedder.embed(["beta"], "query")

        assert [r.headers["x-goog-api-key"] for r in fake.requests] == [first, second]


# Rerankers ---------------------------------------------------------------------------------------


def test_bge_reranker_key_from_reranker_api_key_secret_arn(store: SecretStore) -> None:
    first, second = _key("rr-first"), _key("rr-second")
    arn = store.parameter(first)
    with FakeReranker(api_key=first) as fake:
        reranker = build_reranker(
            "bge", _settings(reranker_service_url=fake.url, reranker_api_key_secret_arn=arn)
        )
        assert reranker is not None
        assert len(reranker.rerank("pods", DOCUMENTS)) == 2
        store.rotate(arn, json.dumps({"apiKey": second}))
        fake.api_key = second
        with pytest.raises(RerankerUnavailableError) as caught:
            reranker.rerank("pods", DOCUMENTS)  # still the cached key, which the service now refuses
        forget_cached_secrets()
        assert len(reranker.rerank("pods", DOCUMENTS)) == 2

        assert _bearers(fake) == [f"Bearer {first}", f"Bearer {first}", f"Bearer {second}"]
    assert "RERANKER_API_KEY_SECRET_ARN" in caught.value.message
    assert first not in _rendered(caught.value) and second not in _rendered(caught.value)


def test_an_unreadable_reranker_secret_is_a_reranker_failure(store: SecretStore) -> None:
    missing = "arn:aws:ssm:us-east-1:123456789012:parameter/retrieval/no-reranker-key"
    with FakeReranker() as fake:
        reranker = build_reranker(
            "bge", _settings(reranker_service_url=fake.url, reranker_api_key_secret_arn=missing)
        )
        assert reranker is not None
        # RerankerUnavailableError: the caller keeps the vector order rather than failing the request.
        with pytest.raises(RerankerUnavailableError) as caught:
            reranker.rerank("pods", DOCUMENTS)
        assert fake.requests == []
    assert "RERANKER_API_KEY_SECRET_ARN" in caught.value.message
    assert "ParameterNotFound" in caught.value.message


def test_llm_reranker_key_from_gemini_api_key_secret_arn(store: SecretStore) -> None:
    key = _key("gm-rerank")
    with FakeGeminiRerank(api_key=key) as fake:
        settings = _settings(gemini_base_url=fake.url, gemini_api_key_secret_arn=store.secret(key))
        reranker = build_reranker("llm", settings)
        assert reranker is not None
        assert [s.index for s in reranker.rerank("the scheduler places pods", DOCUMENTS)] == [0, 1]
        assert [r.headers["x-goog-api-key"] for r in fake.generate_calls()] == [key]
    assert build_reranker("llm", _settings()) is None  # neither GEMINI_API_KEY nor its secret


# Through the API, with every log line captured ---------------------------------------------------


@contextmanager
def _api(service: RetrievalService, embedder: Any, settings: Settings) -> Iterator[TestClient]:
    from retrieval_core import container
    from retrieval_core.api.app import create_app

    wired = RetrievalService(
        service.database,
        embedder,
        "key-secrets",
        service.ef_search,
        rerankers=container.build_rerankers(settings),
    )
    previous = container.replace_service(wired)
    try:
        with TestClient(create_app()) as client:
            yield client
    finally:
        container.replace_service(previous)


def test_keys_from_secrets_through_the_api_never_reach_a_log_or_a_response(
    store: SecretStore,
    service: RetrievalService,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    embed_first, embed_second = _key("sk-embed-1"), _key("sk-embed-2")
    rerank_first, rerank_second = _key("rr-1"), _key("rr-2")
    keys = [embed_first, embed_second, rerank_first, rerank_second]
    embed_arn = store.secret(json.dumps({"apiKey": embed_first}))
    rerank_arn = store.parameter(rerank_first)
    with (
        FakeOpenAIEmbeddings(dimension=8, api_key=embed_first) as embeddings,
        FakeReranker(api_key=rerank_first) as reranker,
    ):
        settings = _settings(
            embedding_provider="openai",
            openai_base_url=embeddings.base_url,
            embedding_model="fake-embedding-8",
            embedding_dimension=8,
            embedding_api_key_secret_arn=embed_arn,
            reranker_service_url=reranker.url,
            reranker_api_key_secret_arn=rerank_arn,
        )
        embedder = build_embedder(settings)
        documents = [TextDocument(id=f"doc-{i}", text=text) for i, text in enumerate(DOCUMENTS)]
        target = ensure_store(service, "key-secrets", embedder)
        write_documents(service, target, documents, 1000, 0, embedder)

        with _api(service, embedder, settings) as client:

            def ask(query: str) -> Any:
                return client.post(
                    RETRIEVE, json={"query": query, "grade": 0.0, "rerank": {"strategy": "bge"}}
                )

            ok = ask("where are pods placed")
            assert ok.status_code == 200, ok.text
            assert ok.json()["pipeline"]["reranked"] is True

            # Both keys rotated, the providers accepting only the new ones. Until the cache is cleared
            # the old keys are sent: the embedder is refused (502), the reranker falls back (a warning).
            store.rotate(embed_arn, embed_second)
            store.rotate(rerank_arn, json.dumps({"apiKey": rerank_second}))
            embeddings.api_key, reranker.api_key = embed_second, rerank_second
            refused = ask("what is rich in potassium")
            assert refused.status_code == 502
            assert refused.json()["error"]["code"] == "embedding_provider_error"
            assert "EMBEDDING_API_KEY_SECRET_ARN" in refused.json()["error"]["message"]

            forget_cached_secrets()
            rotated = ask("what is rich in potassium")
            assert rotated.status_code == 200 and rotated.json()["pipeline"]["reranked"] is True
            answers = ok.text + refused.text + rotated.text

    assert [b.removeprefix("Bearer ") for b in _bearers(reranker)] == [rerank_first, rerank_second]
    sent = [b.removeprefix("Bearer ") for b in _bearers(embeddings)]
    assert sent[-3:] == [embed_first, embed_first, embed_second]  # the write embedded with the first too
    out, err = capsys.readouterr()
    logged = "\n".join(
        [record.getMessage() for record in caplog.records]
        + [repr(record.__dict__) for record in caplog.records]
        + [caplog.text, out, err, answers]
    )
    assert "embedding_provider_error: " in caplog.text  # the refusal was logged, without the key
    for key in keys:
        assert key not in logged
