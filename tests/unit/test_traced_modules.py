"""Which libraries X-Ray patches: patching imports a library, so only what a function calls."""

from __future__ import annotations

from retrieval_core.lambdas.setup import traced_modules
from retrieval_core.settings import Settings

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/db-AbCdEf"


def settings(**fields: object) -> Settings:
    # DATABASE_URL explicitly unset: the test session points one at its database.
    return Settings(_env_file=None, database_url=None, **fields)  # type: ignore[arg-type,call-arg]


def test_a_function_that_embeds_traces_its_providers_client() -> None:
    assert traced_modules(settings(embedding_provider="openai")) == ("httpx",)
    assert traced_modules(settings(embedding_provider="bedrock")) == ("botocore",)


def test_a_function_that_never_embeds_traces_only_what_reads_its_database_credentials() -> None:
    assert traced_modules(settings(embedding_provider="openai"), embeds=False) == ()
    assert traced_modules(settings(embedding_provider="bedrock"), embeds=False) == ()
    with_secret = settings(embedding_provider="openai", database_host="db", database_secret_arn=SECRET_ARN)
    assert traced_modules(with_secret, embeds=False) == ("botocore",)
