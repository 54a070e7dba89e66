"""The pure parts of the health checks: the advice each failure gives (versions: test_pgvector_versions)."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_core.db.migrations.steps import SCHEMA_VERSION
from retrieval_core.embeddings.api_key import embedder_configuration_problem
from retrieval_core.health.checks import check_pgvector, check_schema
from retrieval_core.settings import Settings


def test_pgvector_missing_or_too_old_says_what_to_do() -> None:
    missing = check_pgvector(None)
    assert missing.status == "failed" and missing.version is None
    assert missing.reason is not None and "retrieval migrate" in missing.reason
    old = check_pgvector("0.7.4")
    assert (old.status, old.version) == ("failed", "0.7.4")
    assert old.reason is not None and "0.8" in old.reason and "ALTER EXTENSION vector UPDATE" in old.reason
    assert check_pgvector("0.10.0").status == "ok"


def test_a_schema_newer_than_the_code_is_fine_an_older_one_is_not() -> None:
    assert check_schema(SCHEMA_VERSION).status == "ok"
    assert check_schema(SCHEMA_VERSION + 1).status == "ok"  # migrations only add
    older = check_schema(SCHEMA_VERSION - 1)
    assert (older.status, older.version, older.required_version) == (
        "failed",
        SCHEMA_VERSION - 1,
        SCHEMA_VERSION,
    )
    none = check_schema(None)
    assert none.status == "failed" and none.reason == (
        "no retrieval schema: run `retrieval migrate` "
        "(a deployed stack's MigrateFunction runs it on every deploy)"
    )


@pytest.fixture()
def settings_of(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "GEMINI_API_KEY",
        "EMBEDDING_API_KEY_SECRET_ARN",
        "BEDROCK_REGION",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(name, raising=False)

    def build(**fields: Any) -> Settings:
        return Settings(_env_file=None, **fields)

    return build


ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:embedding-key"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"embedding_provider": "openai"}, ("OPENAI_API_KEY", "EMBEDDING_API_KEY_SECRET_ARN")),
        ({"embedding_provider": "gemini"}, ("GEMINI_API_KEY", "EMBEDDING_API_KEY_SECRET_ARN")),
        ({"embedding_provider": "bedrock"}, ("BEDROCK_REGION", "AWS_REGION")),
        # A key's name rather than its ARN: IAM grants and the reader both need the ARN.
        (
            {"embedding_provider": "openai", "embedding_api_key_secret_arn": "embedding-key"},
            ("EMBEDDING_API_KEY_SECRET_ARN", "ARN"),
        ),
    ],
    ids=["openai", "gemini", "bedrock", "not-an-arn"],
)
def test_a_remote_provider_missing_its_setting_names_what_to_set(
    settings_of: Any, fields: dict[str, str], named: tuple[str, ...]
) -> None:
    reason = embedder_configuration_problem(settings_of(**fields))
    assert reason is not None and all(name in reason for name in named), reason


@pytest.mark.parametrize(
    "fields",
    [
        {"embedding_provider": "openai", "openai_api_key": "sk-x"},
        {"embedding_provider": "openai", "embedding_api_key_secret_arn": ARN},
        # A self-hosted OpenAI-compatible server (Ollama, TEI) may need no key at all.
        {"embedding_provider": "openai", "openai_base_url": "http://ollama.internal:11434/v1"},
        {"embedding_provider": "gemini", "gemini_api_key": "g-key"},
        {"embedding_provider": "gemini", "embedding_api_key_secret_arn": ARN},
        # One Gemini key for File Search and embeddings.
        {"embedding_provider": "gemini", "gemini_api_key_secret_arn": ARN},
        {"embedding_provider": "bedrock", "bedrock_region": "eu-west-1"},
    ],
    ids=[
        "openai-key",
        "openai-secret",
        "openai-compatible",
        "gemini-key",
        "gemini-secret",
        "gemini-file-search-secret",
        "bedrock",
    ],
)
def test_a_configured_remote_provider_lacks_nothing(settings_of: Any, fields: dict[str, str]) -> None:
    assert embedder_configuration_problem(settings_of(**fields)) is None


def test_bedrock_takes_the_functions_own_region(settings_of: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")  # Lambda sets it in every function
    assert embedder_configuration_problem(settings_of(embedding_provider="bedrock")) is None
