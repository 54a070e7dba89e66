"""Settings of Gemini File Search stores: the model of knowledge searches, retries and store listing."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FileSearchSettings(BaseModel):
    """The Gemini File Search fields of Settings (settings/__init__.py), each read from its variable."""

    # Built as part of Settings only: never validated on its own, so no validator of its own to build.
    model_config = ConfigDict(defer_build=True)

    # Gemini File Search (POST /api/v1/knowledge/search, GET /api/v1/stores/resolve). The key comes from
    # GEMINI_API_KEY, else from this Secrets Manager secret (in Lambda).
    gemini_api_key_secret_arn: str | None = Field(
        default=None, description="secret or SSM SecureString ARN holding the Gemini key (deployed stacks)"
    )
    gemini_model: str = Field(default="gemini-2.5-flash", description="Gemini model of knowledge searches")
    gemini_retry_attempts: int = Field(
        default=3, ge=1, le=10, description="attempts per Gemini call on 429 and 5xx"
    )
    gemini_retry_base_delay_s: float = Field(
        default=0.5, ge=0, le=30, description="first backoff between Gemini attempts, in seconds"
    )
    gemini_store_page_size: int = Field(
        default=20,
        ge=1,
        le=20,
        description="File Search stores listed per page while resolving a display name",
    )
