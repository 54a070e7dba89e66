"""Request and response bodies of the HTTP API, in camelCase as in seed 002."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .filters import MetadataValue
from .index_knobs import (
    EF_SEARCH_MAX,
    EF_SEARCH_MIN,
    MAX_SCAN_TUPLES_MAX,
    MAX_SCAN_TUPLES_MIN,
    IterativeScan,
)

SIMILARITY_NOTE = (
    "Similarity, higher is better: 1 - cosine distance between the query and chunk embeddings. "
    "Never a distance."
)


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold U+0000; refuse it here so it is a 422, not a 500.
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
StoreName = Annotated[
    str,
    Field(min_length=1, max_length=512, description="Store name, display name or full resource name."),
    AfterValidator(_no_nul),
]
DocIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=512), AfterValidator(_no_nul)]],
    Field(max_length=100, description="Only chunks of these documents (at most 100 ids)."),
]
MetadataFilter = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_no_nul)], MetadataValue],
    Field(
        max_length=32,
        description="Key to value equalities, all of which must hold (typed: 2023 does not match '2023').",
    ),
]


class RequestModel(BaseModel):
    """Base for requests: camelCase on the wire, unknown fields refused so typos are not ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ResponseModel(BaseModel):
    """Base for responses: camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)


CacheTtl = Annotated[
    int | None,
    Field(
        default=None,
        ge=0,
        le=86_400_000,
        alias="cacheTTLms",
        description="How long to cache this answer, in ms (seed 000's name). 0: do not cache. Default 5 min.",
    ),
]


class SearchKnobs(RequestModel):
    """Per-request overrides of the HNSW index knobs; an unset one keeps the service's setting."""

    ef_search: int | None = Field(
        default=None,
        ge=EF_SEARCH_MIN,
        le=EF_SEARCH_MAX,
        description="hnsw.ef_search: candidates kept per scan; higher is more exact and slower.",
    )
    iterative_scan: IterativeScan | None = Field(
        default=None,
        description="hnsw.iterative_scan: keep scanning until enough rows pass the filter "
        "(relaxed_order re-sorts exactly afterwards; off may return fewer than k filtered rows).",
    )
    max_scan_tuples: int | None = Field(
        default=None,
        ge=MAX_SCAN_TUPLES_MIN,
        le=MAX_SCAN_TUPLES_MAX,
        description="hnsw.max_scan_tuples: how many index tuples an iterative scan may visit.",
    )


SearchOverride = Annotated[
    SearchKnobs | None, Field(default=None, description="Index knobs for this request (ef_search etc.).")
]


class RetrieveRequest(RequestModel):
    """POST /api/v1/rag/retrieve."""

    query: Text = Field(min_length=1, max_length=8000, description="Natural-language query.")
    grade: float = Field(ge=0.0, le=1.0, description="Minimum similarity (0-1) a chunk must reach.")
    similarity_top_k: int = Field(default=5, ge=1, le=50, description="Number of nearest chunks to consider.")
    doc_ids: DocIds | None = None
    metadata_filter: MetadataFilter | None = None
    store: StoreName | None = Field(
        default=None, description="Store to search; the service default if unset."
    )
    engine_name: Literal["naive"] = Field(
        default="naive", description="Retrieval engine. Only 'naive' (vector search + grade) is available."
    )
    cache_ttl_ms: CacheTtl = None
    search: SearchOverride = None


def _finite(values: list[float]) -> list[float]:
    if not all(math.isfinite(v) for v in values):
        raise ValueError("every component must be a finite number")
    return values


class SimilaritySearchRequest(RequestModel):
    """POST /api/v1/chunks/similarity-search."""

    query_embedding: Annotated[list[float], AfterValidator(_finite)] = Field(
        min_length=1,
        max_length=16_000,
        description="Precomputed query vector; its length must be the store's.",
    )
    top_k: int = Field(default=10, ge=1, le=50)
    doc_ids: DocIds | None = None
    metadata_filter: MetadataFilter | None = None
    store: StoreName | None = None
    cache_ttl_ms: CacheTtl = None
    search: SearchOverride = None


class ChunkResult(ResponseModel):
    """One retrieved chunk, with its metadata."""

    id: str = Field(description="Stable chunk id: documentId#chunkIndex.")
    content: str
    score: float = Field(description=SIMILARITY_NOTE)
    metadata: dict[str, Any] = Field(
        description="Stored chunk metadata plus documentId and chunkIndex; always travels with the text."
    )


class Pipeline(ResponseModel):
    """What the engine did."""

    reranked: bool = False
    rerank_strategy: str | None = None
    candidates_considered: int


class RetrieveResponse(ResponseModel):
    """Ranked chunks, highest similarity first. Nothing above `grade`: an empty list."""

    results: list[ChunkResult]
    query: str
    total_results: int
    engine_used: str
    store: str
    pipeline: Pipeline


class SimilaritySearchResponse(ResponseModel):
    """Nearest chunks to the given embedding, highest similarity first."""

    results: list[ChunkResult]
    total_results: int
    store: str


class HealthResponse(ResponseModel):
    """Liveness and database reachability."""

    status: Literal["ok", "degraded"]
    database: Literal["ok", "unreachable"]


class ErrorBody(BaseModel):
    """The error object."""

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    """Every error the API returns."""

    error: ErrorBody
