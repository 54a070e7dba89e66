"""Request and response bodies of the knowledge search and store resolution, in camelCase."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from retrieval_core.schemas.common import CacheTtl, RequestModel, ResponseModel, StoreName, Text

Backend = Literal["pgvector", "gemini"]
ResolvedBy = Literal["cache", "displayName", "name", "pattern", "fallback"]


class KnowledgeSearchRequest(RequestModel):
    """POST /api/v1/knowledge/search: `search(query, store, options)` over HTTP."""

    query: Text = Field(min_length=1, max_length=8000, description="Natural-language question.")
    store: StoreName
    top_k: int | None = Field(default=None, ge=1, le=100, description="Maximum retrieval chunks.")
    metadata_filter: Text | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description='Gemini filter syntax (AIP-160), passed through, e.g. `source_type = "s3"`.',
    )
    cache_ttl_ms: CacheTtl = None
    system_instruction: Text | None = Field(default=None, min_length=1, max_length=8000)
    max_output_tokens: int = Field(default=256, ge=1, le=65_536)
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Gemini model; GEMINI_MODEL when unset.",
    )


class KnowledgeSource(ResponseModel):
    """One grounding chunk Gemini retrieved. Fields the response does not carry are null."""

    document_id: str | None = Field(default=None, description="Document resource name.")
    document_name: str | None = Field(default=None, description="Document display name (title).")
    uri: str | None = None
    chunk: str | None = Field(default=None, description="The retrieved text.")
    score: float | None = Field(
        default=None,
        description="Highest confidence of the grounding supports citing this chunk; null when none does. "
        "Never a similarity, never invented.",
    )
    store_name: str | None = Field(default=None, description="e.g. fileSearchStores/xyz")
    metadata: dict[str, Any] = Field(default_factory=dict, description="The document's custom metadata.")
    page_number: int | None = None


class KnowledgeAnswer(ResponseModel):
    """The synthesized answer, its sources, and Gemini's raw grounding metadata."""

    text: str
    sources: list[KnowledgeSource]
    grounding_metadata: dict[str, Any] | None = None


class ResolvedStore(ResponseModel):
    """GET /api/v1/stores/resolve: the full store name and which resolution step found it."""

    name: str
    display_name: str | None = None
    resolved_by: ResolvedBy
    backend: Backend
