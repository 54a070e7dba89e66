"""Which API key the configured embedding provider uses, and whether it is configured. Pure: no I/O."""

from __future__ import annotations

import os

from retrieval_core.clients.provider_keys import ProviderKey, gemini_embedding_key, openai_embedding_key
from retrieval_core.settings import Settings


def embedding_key(settings: Settings) -> ProviderKey | None:
    """The key source of EMBEDDING_PROVIDER; None for providers without a key (local, bedrock)."""
    if settings.embedding_provider == "openai":
        return openai_embedding_key(settings)
    if settings.embedding_provider == "gemini":
        return gemini_embedding_key(settings)
    return None


def embedder_configuration_problem(settings: Settings) -> str | None:
    """Why the embedder cannot call its provider, from the settings alone; None when it can.

    No network and no secret read: a secret that is named but missing or unreadable shows up on the
    first embedding call instead. The reason names the variables to set, never a value.
    """
    if settings.embedding_provider == "bedrock" and not (
        settings.bedrock_region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    ):
        return "EMBEDDING_PROVIDER=bedrock needs a region: set BEDROCK_REGION (or AWS_REGION)"
    key = embedding_key(settings)
    problem = key.problem() if key is not None else None
    return f"EMBEDDING_PROVIDER={settings.embedding_provider}: {problem}" if problem else None
