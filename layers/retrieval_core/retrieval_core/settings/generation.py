"""Settings of answer generation (POST /api/v1/rag/answer): which provider writes answers, and its bounds."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

GenerationProviderName = Literal["extractive", "bedrock", "openai", "gemini"]

# The model each provider uses when GENERATION_MODEL is unset. The extractive generator has no model
# of its own: it picks sentences with the configured embedder.
DEFAULT_GENERATION_MODELS: dict[str, str] = {
    "extractive": "extractive",
    "bedrock": "amazon.nova-lite-v1:0",
    "openai": "gpt-4o-mini",
    "gemini": "gemini-2.5-flash",
}


class GenerationSettings(BaseModel):
    """The generation fields of Settings (settings/__init__.py), each read from its upper-case variable."""

    # Built as part of Settings only: never validated on its own, so no validator of its own to build.
    model_config = ConfigDict(defer_build=True)

    generation_provider: GenerationProviderName = Field(
        default="extractive",
        description="who writes answers: extractive (offline, cites retrieved sentences), bedrock "
        "(Converse), openai (any compatible chat endpoint) or gemini (generateContent)",
    )
    generation_model: str | None = Field(
        default=None, description="model of answers; unset: the provider's default"
    )
    generation_models_allowed: str = Field(
        default="",
        description="comma-separated models a request's `model` may name; unset: only GENERATION_MODEL",
    )
    generation_timeout_s: float = Field(
        default=20.0, gt=0, le=60, description="timeout of one generation call, in seconds"
    )
    generation_attempts: int = Field(
        default=2, ge=1, le=5, description="attempts per generation call on throttling, 5xx and time-outs"
    )
    generation_base_url: str = Field(
        default="https://api.openai.com/v1",
        description="endpoint of the OpenAI-compatible chat provider (GENERATION_PROVIDER=openai)",
    )
    generation_api_key: SecretStr | None = Field(
        default=None, description="key of the OpenAI-compatible chat provider (local runs)"
    )
    generation_api_key_secret_arn: str | None = Field(
        default=None,
        description="secret or SSM SecureString ARN holding the chat provider's key (deployed stacks)",
    )
    answer_max_sentences: int = Field(
        default=4, ge=1, le=20, description="sentences the extractive generator puts in one answer, at most"
    )

    @property
    def resolved_generation_model(self) -> str:
        """GENERATION_MODEL, falling back to the provider's default."""
        return self.generation_model or DEFAULT_GENERATION_MODELS[self.generation_provider]

    @property
    def generation_models(self) -> frozenset[str]:
        """The models a request may name: GENERATION_MODELS_ALLOWED and the configured model."""
        listed = {m.strip() for m in self.generation_models_allowed.split(",") if m.strip()}
        return frozenset({self.resolved_generation_model, *listed})
