"""Where provider keys come from: secret ARNs told apart, a secret's text made a key, configuration checked.

Pure: nothing here reaches AWS (a secret that is read is tested in integration/test_provider_key_secrets.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import SecretStr

from retrieval_core.clients.provider_keys import (
    ProviderKey,
    api_key_from_secret,
    gemini_embedding_key,
    generation_key,
    openai_embedding_key,
    reranker_key,
)
from retrieval_core.clients.secret_store import read_secret, secret_service
from retrieval_core.embeddings.api_key import embedder_configuration_problem
from retrieval_core.exceptions import ConfigurationError, RerankerUnavailableError, RetrievalError
from retrieval_core.settings import Settings

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/openai-AbCdEf"
PARAMETER = "arn:aws:ssm:us-east-1:123456789012:parameter/retrieval/openai"


def _settings(**fields: Any) -> Settings:
    return Settings(_env_file=None, **fields)


@pytest.mark.parametrize(
    ("arn", "service"),
    [
        (SECRET, "secretsmanager"),
        ("arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:key-AbCdEf", "secretsmanager"),
        ("arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:key-AbCdEf", "secretsmanager"),
        (PARAMETER, "ssm"),
        ("arn:aws:ssm:eu-west-1:123456789012:parameter/flat-name", "ssm"),
        ("arn:aws-cn:ssm:cn-northwest-1:123456789012:parameter/retrieval/key", "ssm"),
        ("arn:aws-us-gov:ssm:us-gov-east-1:123456789012:parameter/retrieval/key", "ssm"),
        ("arn:aws-iso-b:ssm:us-isob-east-1:123456789012:parameter/retrieval/key", "ssm"),
        # Neither: names, other services and resources, malformed accounts, padding.
        ("retrieval/openai", None),
        ("/retrieval/openai", None),
        ("", None),
        ("arn:aws:s3:::bucket/key", None),
        ("arn:aws:kms:us-east-1:123456789012:key/1234abcd", None),
        ("arn:aws:ssm:us-east-1:123456789012:document/retrieval", None),
        ("arn:aws:secretsmanager:us-east-1:123456789012:parameter/retrieval", None),
        ("arn:aws:ssm:us-east-1:123456789012:secret:retrieval", None),
        ("arn:aws:secretsmanager:us-east-1:1234:secret:key", None),
        ("arn:aws:ssm:us-east-1:123456789012:parameter/", None),
        ("arn:gcp:secretsmanager:us-east-1:123456789012:secret:key", None),
        (f" {SECRET}", None),
        (f"{PARAMETER}\n", None),
    ],
)
def test_secret_service_tells_secrets_parameters_and_anything_else_apart(
    arn: str, service: str | None
) -> None:
    assert secret_service(arn) == service


def test_read_secret_refuses_a_value_of_neither_kind_naming_the_variable_not_the_value() -> None:
    def failure(code: str) -> RetrievalError:
        raise AssertionError("nothing may be read")

    with pytest.raises(ConfigurationError) as caught:
        read_secret("sk-pasted-key-instead-0123", failure, variable="EMBEDDING_API_KEY_SECRET_ARN")
    assert "EMBEDDING_API_KEY_SECRET_ARN" in caught.value.message
    assert "sk-pasted-key-instead-0123" not in f"{caught.value} {caught.value!r}"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("sk-plain", "sk-plain"),
        ("  sk-padded\n", "sk-padded"),
        ('{"apiKey": "sk-json"}', "sk-json"),
        ('{"apiKey": " sk-json-padded ", "note": "rotated monthly"}', "sk-json-padded"),
    ],
)
def test_api_key_from_secret_takes_the_text_or_its_api_key_field(text: str, key: str) -> None:
    assert api_key_from_secret(text, "EMBEDDING_API_KEY_SECRET_ARN").get_secret_value() == key


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        '{"api_key": "sk-misfiled-0123"}',
        '{"apiKey": ""}',
        '{"apiKey": 12345}',
        '{"apiKey": "sk-cut-off-0123"',  # not JSON: the decoder would keep the whole text
        '{"apiKey": ["sk-in-a-list-0123"]}',
    ],
)
def test_api_key_from_secret_refuses_a_secret_without_a_key_quoting_nothing(text: str) -> None:
    with pytest.raises(RerankerUnavailableError) as caught:
        api_key_from_secret(text, "RERANKER_API_KEY_SECRET_ARN", RerankerUnavailableError)
    error = caught.value
    assert "RERANKER_API_KEY_SECRET_ARN" in error.message and '{"apiKey": "..."}' in error.message
    rendered = f"{error} {error!r} {error.args!r} {json.dumps(error.details)}"
    assert "0123" not in rendered and "12345" not in rendered
    # Nothing chained: a JSONDecodeError would carry the document.
    assert error.__cause__ is None and error.__context__ is None


def test_the_environment_key_wins_and_no_secret_is_read() -> None:
    key = openai_embedding_key(_settings(openai_api_key="sk-env", embedding_api_key_secret_arn=SECRET))
    assert key.secret is None and key.source == "OPENAI_API_KEY"
    value = key.read()
    assert value is not None and value.get_secret_value() == "sk-env"


def test_an_empty_environment_key_counts_as_unset() -> None:
    key = openai_embedding_key(_settings(openai_api_key="", embedding_api_key_secret_arn=SECRET))
    assert key.secret == ("EMBEDDING_API_KEY_SECRET_ARN", SECRET)
    assert key.source == "the key in the secret EMBEDDING_API_KEY_SECRET_ARN names"


def test_gemini_embeddings_prefer_their_own_secret_then_the_gemini_one() -> None:
    shared = _settings(gemini_api_key_secret_arn=PARAMETER)
    assert gemini_embedding_key(shared).secret == ("GEMINI_API_KEY_SECRET_ARN", PARAMETER)
    own = _settings(gemini_api_key_secret_arn=PARAMETER, embedding_api_key_secret_arn=SECRET)
    assert gemini_embedding_key(own).secret == ("EMBEDDING_API_KEY_SECRET_ARN", SECRET)


def test_an_optional_key_that_is_unset_reads_as_none() -> None:
    key = reranker_key(_settings())
    assert key.problem() is None and key.read(RerankerUnavailableError) is None


def test_the_generation_key_is_required_by_api_openai_com_only() -> None:
    openai = generation_key(_settings())
    assert openai.problem() == (
        "no API key is configured; set GENERATION_API_KEY or GENERATION_API_KEY_SECRET_ARN"
    )
    local = generation_key(_settings(generation_base_url="http://127.0.0.1:8000/v1"))
    assert local.problem() is None and local.read() is None
    deployed = generation_key(_settings(generation_api_key_secret_arn=SECRET))
    assert deployed.source == "the key in the secret GENERATION_API_KEY_SECRET_ARN names"


def test_a_provider_key_never_shows_its_value() -> None:
    key = ProviderKey("OPENAI_API_KEY", SecretStr("sk-hidden-0123"))
    assert "sk-hidden-0123" not in f"{key!r} {key}"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"embedding_provider": "local"}, None),
        # Bedrock signs with the role: no key (its region is tested with the health check's advice).
        ({"embedding_provider": "bedrock", "bedrock_region": "us-east-1"}, None),
        ({"embedding_provider": "openai", "openai_api_key": "sk-env"}, None),
        ({"embedding_provider": "openai", "embedding_api_key_secret_arn": SECRET}, None),
        ({"embedding_provider": "openai", "embedding_api_key_secret_arn": PARAMETER}, None),
        # Ollama, TEI, vLLM: an endpoint of one's own may need no key.
        ({"embedding_provider": "openai", "openai_base_url": "http://127.0.0.1:11434/v1"}, None),
        (
            {"embedding_provider": "openai"},
            "EMBEDDING_PROVIDER=openai: no API key is configured; "
            "set OPENAI_API_KEY or EMBEDDING_API_KEY_SECRET_ARN",
        ),
        (
            {"embedding_provider": "openai", "openai_api_key": "", "embedding_api_key_secret_arn": ""},
            "EMBEDDING_PROVIDER=openai: no API key is configured; "
            "set OPENAI_API_KEY or EMBEDDING_API_KEY_SECRET_ARN",
        ),
        (
            {"embedding_provider": "openai", "embedding_api_key_secret_arn": "retrieval/openai"},
            "EMBEDDING_PROVIDER=openai: EMBEDDING_API_KEY_SECRET_ARN is neither a Secrets Manager secret "
            "ARN nor an SSM parameter ARN",
        ),
        ({"embedding_provider": "gemini", "gemini_api_key": "gm-env"}, None),
        ({"embedding_provider": "gemini", "gemini_api_key_secret_arn": SECRET}, None),
        (
            {"embedding_provider": "gemini"},
            "EMBEDDING_PROVIDER=gemini: no API key is configured; "
            "set GEMINI_API_KEY or EMBEDDING_API_KEY_SECRET_ARN or GEMINI_API_KEY_SECRET_ARN",
        ),
    ],
)
def test_embedder_configuration_problem_from_the_settings_alone(
    fields: dict[str, Any], problem: str | None
) -> None:
    assert embedder_configuration_problem(_settings(**fields)) == problem
