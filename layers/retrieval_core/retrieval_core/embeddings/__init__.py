"""Embedding providers behind one interface; `get_embedder` picks one from the settings."""

from __future__ import annotations

from functools import lru_cache

from retrieval_core.embeddings.api_key import embedder_configuration_problem
from retrieval_core.embeddings.base import Embedder, EmbeddingKind, check_vectors
from retrieval_core.settings import Settings, get_settings

__all__ = [
    "Embedder",
    "EmbeddingKind",
    "build_embedder",
    "check_vectors",
    "embedder_configuration_problem",
    "get_embedder",
]


def build_embedder(settings: Settings) -> Embedder:
    """Build the provider named by EMBEDDING_PROVIDER. No client is created, and no key read, until first use.

    A missing key is not refused here but at the first embedding (ConfigurationError): functions that
    never embed (similarity search, store resolution) serve all the same, and the health check reports
    `embedder_configuration_problem(settings)`.
    """
    provider = settings.embedding_provider
    if provider == "local":
        from retrieval_core.embeddings.local import LocalEmbedder

        return LocalEmbedder(
            batch_size=settings.embedding_batch_size,
            runtime=settings.local_embedder_runtime,
            model_dir=settings.local_model_dir,
            cache_dir=settings.local_model_cache_dir,
        )
    if provider == "openai":
        from retrieval_core.embeddings.openai_compatible import OpenAICompatibleEmbedder

        return OpenAICompatibleEmbedder.from_settings(settings)
    if provider == "gemini":
        from retrieval_core.embeddings.gemini import GeminiEmbedder

        return GeminiEmbedder.from_settings(settings)
    from retrieval_core.embeddings.bedrock import BedrockTitanEmbedder

    return BedrockTitanEmbedder.from_settings(settings)


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    """The process-wide embedder for the current settings."""
    return build_embedder(get_settings())
