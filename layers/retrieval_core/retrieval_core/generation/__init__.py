"""Answer generators behind one interface; `build_generator` picks one from the settings.

Each provider module is imported when its generator is built, and each builds its client on first use:
a function that never answers pays nothing for generation at init.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval_core.generation.base import Generation, GenerationRequest, Generator, NativeCitation
from retrieval_core.settings import Settings

if TYPE_CHECKING:
    from retrieval_core.embeddings.base import Embedder

__all__ = ["Generation", "GenerationRequest", "Generator", "NativeCitation", "build_generator"]


def build_generator(settings: Settings, embedder: Embedder) -> Generator:
    """The generator GENERATION_PROVIDER names. No client is built and no key read until first use.

    `embedder` is what the extractive generator embeds sentences with (the service's own).
    """
    provider = settings.generation_provider
    if provider == "bedrock":
        from retrieval_core.generation.bedrock import BedrockGenerator

        return BedrockGenerator.from_settings(settings)
    if provider == "openai":
        from retrieval_core.generation.openai_compatible import OpenAICompatibleGenerator

        return OpenAICompatibleGenerator.from_settings(settings)
    if provider == "gemini":
        from retrieval_core.generation.gemini import GeminiGenerator

        return GeminiGenerator.from_settings(settings)
    from retrieval_core.generation.extractive import ExtractiveGenerator

    return ExtractiveGenerator.from_settings(settings, embedder)
