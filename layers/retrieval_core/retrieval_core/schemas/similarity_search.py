"""POST /api/v1/chunks/similarity-search: a precomputed embedding in, the nearest chunks out."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationError, model_validator

from retrieval_core.schemas.common import (
    CacheTtl,
    RequestModel,
    ResponseModel,
    StoreName,
    absent_when_none,
    not_applicable,
)
from retrieval_core.schemas.results import (
    CONTEXT_NOTE,
    CONTEXT_TOKENIZER_NOTE,
    CONTEXT_TOKENS_NOTE,
    ChunkResult,
)
from retrieval_core.schemas.search_options import (
    MAX_TOP_K,
    DocIds,
    MaxContextTokens,
    MetadataFilter,
    ReturnFormatted,
    SearchOverride,
)


def _finite(values: list[float]) -> list[float]:
    # The length is finite for almost every vector of finite components (2 µs for 384 floats); only
    # when it is not are the components checked one by one (7 µs, the loop kept in C by map).
    if not math.isfinite(math.hypot(*values)) and not all(map(math.isfinite, values)):
        raise ValueError("every component must be a finite number")
    # A zero vector has no direction: its cosine distance to anything is undefined (NaN).
    if not any(values):
        raise ValueError("must not be the zero vector")
    return values


class SimilaritySearchRequest(RequestModel):
    """POST /api/v1/chunks/similarity-search."""

    query_embedding: Annotated[list[float], AfterValidator(_finite)] = Field(
        min_length=1,
        max_length=16_000,
        description="Precomputed query vector; its length must be the store's.",
    )
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    doc_ids: DocIds | None = None
    metadata_filter: MetadataFilter | None = None
    store: StoreName | None = None
    cache_ttl_ms: CacheTtl = None
    search: SearchOverride = None
    return_formatted: ReturnFormatted = False
    max_context_tokens: MaxContextTokens = None

    @model_validator(mode="after")
    def _budget_needs_formatting(self) -> SimilaritySearchRequest:
        if "max_context_tokens" in self.model_fields_set and not self.return_formatted:
            error = not_applicable(
                ("maxContextTokens",), "applies only with returnFormatted true", self.max_context_tokens
            )
            raise ValidationError.from_exception_data(type(self).__name__, [error])
        return self


class SimilaritySearchResponse(ResponseModel):
    """Nearest chunks to the given embedding, highest similarity first."""

    results: list[ChunkResult]
    total_results: int
    store: str
    context: str | None = Field(default=None, exclude_if=absent_when_none, description=CONTEXT_NOTE)
    context_tokens: int | None = Field(
        default=None, exclude_if=absent_when_none, description=CONTEXT_TOKENS_NOTE
    )
    context_tokenizer: str | None = Field(
        default=None, exclude_if=absent_when_none, description=CONTEXT_TOKENIZER_NOTE
    )
