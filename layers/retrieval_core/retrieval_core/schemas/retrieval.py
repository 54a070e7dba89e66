"""Request and response bodies of the HTTP API, in camelCase as in seed 002."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WrapValidator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from retrieval_core.db.index_knobs import (
    EF_SEARCH_MAX,
    EF_SEARCH_MIN,
    MAX_SCAN_TUPLES_MAX,
    MAX_SCAN_TUPLES_MIN,
    IterativeScan,
)
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.filters.sql import MetadataValue
from retrieval_core.filters.tree import is_tree
from retrieval_core.search.fusion import RRF_K, RRF_K_MAX, RRF_K_MIN, Fusion, Normalization

SIMILARITY_NOTE = (
    "Similarity, higher is better: 1 - cosine distance between the query and chunk embeddings. "
    "Never a distance."
)


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold U+0000, and UTF-8 cannot encode an unpaired surrogate ("\ud800" is
    # valid JSON): refuse both here so they are a 422, not a 500.
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no unpaired surrogates)") from None
    return value


def _storable_value(value: MetadataValue) -> MetadataValue:
    # A filter value travels as jsonb, which has no NaN or Infinity (JSON parsers here accept them).
    if isinstance(value, str):
        return _no_nul(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
StoreName = Annotated[
    str,
    Field(min_length=1, max_length=512, description="Store name, display name or full resource name."),
    AfterValidator(_no_nul),
]


def _document_id(value: str) -> str:
    # Document ids follow S3's key limit: 1 to 1,024 bytes of UTF-8 (not characters).
    if len(_no_nul(value).encode("utf-8")) > MAX_DOCUMENT_ID_BYTES:
        raise ValueError(f"must be at most {MAX_DOCUMENT_ID_BYTES} bytes of UTF-8")
    return value


MAX_DOCUMENT_ID_BYTES = 1024
DocIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID_BYTES), AfterValidator(_document_id)]],
    Field(max_length=100, description="Only chunks of these documents (at most 100 ids of 1,024 bytes)."),
]
MetadataEqualities = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_no_nul)],
        Annotated[MetadataValue, AfterValidator(_storable_value)],
    ],
    Field(
        max_length=32,
        description="Key to value equalities, all of which must hold (typed: 2023 does not match '2023').",
    ),
]
MetadataExpression = Annotated[
    str,
    Field(
        max_length=4000,
        description='A filter expression, e.g. "year >= 2023 AND NOT draft = true" (docs/api.md).',
        examples=[
            "year >= 2023 AND NOT draft = true",
            "year = 2024 AND title STARTS WITH 'Kube'",
            "title CONTAINS 'pod' OR tags HAS 'k8s'",
            "source_type NOT IN ('drive', 'web')",
            "lower(project_name) = 'platform' AND EXISTS(pageNumber)",
        ],
    ),
    AfterValidator(_no_nul),
]
# One example per operator of the filter tree, shown in the OpenAPI schema.
TREE_EXAMPLES: list[dict[str, Any]] = [
    {
        "andAll": [
            {"equals": {"key": "year", "value": 2024}},
            {"startsWith": {"key": "title", "value": "Kube"}},
        ]
    },
    {
        "orAll": [
            {"notEquals": {"key": "year", "value": 2024}},
            {"greaterThan": {"key": "pageNumber", "value": 10}},
            {"greaterThanOrEquals": {"key": "year", "value": 2023}},
            {"lessThan": {"key": "year", "value": 2025}},
            {"lessThanOrEquals": {"key": "year", "value": 2024}},
        ]
    },
    {"in": {"key": "source_type", "value": ["s3", "drive"]}},
    {"notIn": {"key": "source_type", "value": ["drive"]}},
    {"stringContains": {"key": "title", "value": "pod"}},
    {"listContains": {"key": "tags", "value": "k8s"}},
    {"equalsIgnoreCase": {"key": "project_name", "value": "platform"}},
    {"exists": {"key": "pageNumber"}},
]
MetadataTree = Annotated[
    dict[str, Any],
    Field(
        description="A filter tree in Bedrock Knowledge Bases' shape: an object whose single key is an "
        "operator (andAll, orAll, equals, notEquals, greaterThan, greaterThanOrEquals, lessThan, "
        "lessThanOrEquals, in, notIn, startsWith, stringContains, listContains, equalsIgnoreCase, exists; "
        "reserved as the single key of an equality object); leaves are {key, value}, exists takes only "
        "key (docs/api.md).",
        examples=TREE_EXAMPLES,
    ),
]
_EQUALITIES: TypeAdapter[dict[str, MetadataValue]] = TypeAdapter(MetadataEqualities)
_EXPRESSION: TypeAdapter[str] = TypeAdapter(MetadataExpression)


def _one_filter_form(value: Any, _: Any) -> dict[str, Any] | str:
    # Validates the one form the input has, so errors name `metadataFilter.<key>`, not union branches.
    # A tree is read (and a malformed one refused, naming its path) where the filter is compiled.
    if isinstance(value, str):
        return _EXPRESSION.validate_python(value)
    if is_tree(value):
        return dict(value)
    return _EQUALITIES.validate_python(value)


MetadataFilter = Annotated[
    MetadataEqualities | MetadataTree | MetadataExpression, WrapValidator(_one_filter_form)
]


class RequestModel(BaseModel):
    """Base for requests: camelCase on the wire, unknown fields refused so typos are not ignored.

    Strict: a value of the wrong JSON type is refused, never converted ("0.5" or true for a number,
    "yes" for a boolean, 5 for a string). A JSON integer is still a number (`grade: 1`).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)


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


# Gemini File Search store resource names start with this.
GEMINI_STORE_PREFIX = "fileSearchStores/"
EngineName = Literal["default", "naive"]
RerankStrategyName = Literal["bge", "llm", "bedrock", "mmr"]
# Candidates fetched when `similarityTopK` is unset: the advanced engine reranks a wider pool.
DEFAULT_CANDIDATES = {"default": 20, "naive": 5}
# Results the advanced engine returns when the request has no `rerank.topK` (seed 002's example).
DEFAULT_RERANK_TOP_K = 5
# The most results (and candidates) one request may ask for: similarityTopK, rerank.topK, topK.
MAX_TOP_K = 100

ReturnFormatted = Annotated[
    bool,
    Field(
        default=False,
        description="Each result gets `formattedContent` (a citation header, then the text) and the answer "
        "a `context` string packing them with numbered citations, near-duplicates left out (docs/api.md).",
    ),
]
MaxContextTokens = Annotated[
    int | None,
    Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Needs returnFormatted. Token budget of `context`, counted with all-MiniLM-L6-v2's "
        "tokenizer (an approximation for other models); chunks that would exceed it are left out.",
    ),
]


class RerankOptions(RequestModel):
    """Reranking of the candidates (advanced engine only), seed 002's `rerank` object."""

    enabled: bool = True
    strategy: RerankStrategyName = Field(
        default="bge",
        description="bge: the HTTP reranker at RERANKER_SERVICE_URL; llm: Gemini scores every candidate "
        "in one call; bedrock: Bedrock's Rerank API; mmr: maximal marginal relevance over the stored "
        "embeddings (diversity, no model call).",
    )
    top_k: int = Field(
        default=DEFAULT_RERANK_TOP_K, ge=1, le=MAX_TOP_K, description="Results returned after reranking."
    )
    score: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Minimum rerank score (0-1) a chunk must reach. Not used by mmr, which has no score.",
    )


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
    """POST /api/v1/rag/retrieve.

    Every option sent takes effect: one that the rest of the request makes pointless ("Needs ..." in
    its description) is a 422 naming what it needs, even when sent with its default value.
    """

    query: Text = Field(min_length=1, max_length=8000, description="Natural-language query.")
    grade: float = Field(
        ge=0.0, le=1.0, description="Minimum vector similarity (0-1) a chunk must reach, in every engine."
    )
    similarity_top_k: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOP_K,
        description="Candidates taken from the search: default 20 for the default engine, 5 for naive.",
    )
    doc_ids: DocIds | None = None
    metadata_filter: MetadataFilter | None = None
    store: StoreName | None = Field(
        default=None, description="Store to search; the service default if unset."
    )
    engine_name: EngineName = Field(
        default="default",
        description="default (advanced): candidates are reranked when a reranker is asked for or "
        "configured, then cut to rerank.topK. naive: every candidate at or above grade, no reranking.",
    )
    rerank: RerankOptions | None = None
    use_hybrid: bool = Field(
        default=False, description="Fuse PostgreSQL full-text search with the vector search (seed 004)."
    )
    # The hybrid defaults (weighted, max-scaled, 0.7 / 0.3) are the fusion measured best on the dev sets
    # together and never more than 0.005 below dense search on any (docs/quality.md); RRF k = 60 was
    # 0.012 below it on one.
    fusion: Fusion = Field(
        default="weighted",
        description="Needs useHybrid. How the two lists are fused: rrf (reciprocal rank fusion, k = rrfK) "
        "or weighted (a weighted sum of the similarity and the keyword score, each scaled to 0-1 by "
        "`normalization`).",
    )
    rrf_k: int = Field(
        default=RRF_K,
        ge=RRF_K_MIN,
        le=RRF_K_MAX,
        description="Needs useHybrid and fusion rrf. RRF's k in 1 / (k + rank): smaller lets the first "
        "ranks count more.",
    )
    normalization: Normalization = Field(
        default="max",
        description="Needs useHybrid and fusion weighted. How each score is scaled to 0-1 before "
        "weighting: minmax ((s - lowest) / (highest - lowest) over the candidates) or max (s / highest, "
        "the lowest taken as 0).",
    )
    vector_weight: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description="Needs useHybrid and fusion weighted. Weight of the vector similarity; the weights "
        "are relative (divided by their sum).",
    )
    keyword_weight: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="Needs useHybrid and fusion weighted. Weight of the keyword score; the weights are "
        "relative (divided by their sum).",
    )
    min_fused_score: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Needs useHybrid. Minimum fusedScore (0-1) a chunk must reach, applied where grade is. "
        "Unlike grade (minimum vector similarity), it keeps a keyword-only hit that ranks well.",
    )
    mmr_lambda: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description='Needs rerank.strategy "mmr". MMR trade-off: 1 is pure relevance, 0 pure diversity.',
    )
    cache_ttl_ms: CacheTtl = None
    backend: Literal["pgvector", "gemini"] | None = Field(
        default=None,
        description="Where the store lives. Unset: gemini for a store named fileSearchStores/..., "
        "else pgvector.",
    )
    return_formatted: ReturnFormatted = False
    max_context_tokens: MaxContextTokens = None

    @model_validator(mode="after")
    def _every_option_applies(self) -> RetrieveRequest:
        errors = inapplicable_options(self)
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @property
    def candidate_count(self) -> int:
        """How many candidates the search returns."""
        return self.similarity_top_k or DEFAULT_CANDIDATES[self.engine_name]

    @property
    def result_count(self) -> int:
        """How many results the advanced engine returns at most: `rerank.topK`, default 5."""
        return self.rerank.top_k if self.rerank is not None else DEFAULT_RERANK_TOP_K

    @property
    def targets_gemini(self) -> bool:
        """For Gemini File Search: `backend: "gemini"`, or no backend and a `fileSearchStores/...` store."""
        if self.backend is not None:
            return self.backend == "gemini"
        return bool(self.store and self.store.startswith(GEMINI_STORE_PREFIX))

    search: SearchOverride = None


def _not_applicable(
    loc: tuple[str, ...], message: str, value: Any, kind: str = "not_applicable"
) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError(kind, message), loc=loc, input=value)


# Each hybrid option and the fusion it needs (None: either).
_HYBRID_OPTIONS: dict[str, Fusion | None] = {
    "fusion": None,
    "min_fused_score": None,
    "rrf_k": "rrf",
    "normalization": "weighted",
    "vector_weight": "weighted",
    "keyword_weight": "weighted",
}


def inapplicable_options(request: RetrieveRequest) -> list[InitErrorDetails]:
    """An error for each option the request sets that would have no effect, or that contradicts another.

    An option counts as sent when it is in the body, even with its default value: `vectorWeight: 0.7`
    with rrf asks for a weighting rrf never makes. Options that ask for what happens anyway
    (`useHybrid: false`, `rerank: {"enabled": false}`) are accepted.
    """
    sent = request.model_fields_set
    errors: list[InitErrorDetails] = []

    def refuse(field: str, message: str, kind: str = "not_applicable") -> None:
        name = RetrieveRequest.model_fields[field].alias or field
        errors.append(_not_applicable((name,), message, getattr(request, field), kind))

    for field, fusion in _HYBRID_OPTIONS.items():
        if field in sent and not (request.use_hybrid and fusion in (None, request.fusion)):
            refuse(field, "applies only with useHybrid true" + (f' and fusion "{fusion}"' if fusion else ""))
    weighted = request.use_hybrid and request.fusion == "weighted"
    if weighted and request.vector_weight + request.keyword_weight == 0:
        refuse("vector_weight", "vectorWeight and keywordWeight cannot both be 0", "value_error")
    rerank = request.rerank
    uses_mmr = rerank is not None and rerank.enabled and rerank.strategy == "mmr"
    if "mmr_lambda" in sent and not uses_mmr:
        refuse("mmr_lambda", 'applies only with rerank.strategy "mmr" (enabled, default engine)')
    if "max_context_tokens" in sent and not request.return_formatted:
        refuse("max_context_tokens", "applies only with returnFormatted true")
    if rerank is not None:
        errors.extend(_inapplicable_rerank_options(request.engine_name, rerank))
    return errors


def _inapplicable_rerank_options(engine: EngineName, rerank: RerankOptions) -> list[InitErrorDetails]:
    if engine == "naive" and rerank.enabled:
        return [
            _not_applicable(
                ("rerank",),
                "the naive engine does not rerank; use engineName 'default' or drop rerank",
                rerank.model_dump(by_alias=True),
            )
        ]
    sent = rerank.model_fields_set
    errors: list[InitErrorDetails] = []
    for field in ("strategy", "score", "top_k"):
        if field not in sent:
            continue
        name = RerankOptions.model_fields[field].alias or field
        value = getattr(rerank, field)
        if engine == "naive":
            errors.append(_not_applicable(("rerank", name), 'applies only with engineName "default"', value))
        elif not rerank.enabled and field != "top_k":
            errors.append(_not_applicable(("rerank", name), "applies only with rerank.enabled true", value))
    if rerank.enabled and rerank.strategy == "mmr" and rerank.score is not None:
        errors.append(
            _not_applicable(("rerank", "score"), "does not apply to mmr, which gives no score", rerank.score)
        )
    return errors


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
            error = _not_applicable(
                ("maxContextTokens",), "applies only with returnFormatted true", self.max_context_tokens
            )
            raise ValidationError.from_exception_data(type(self).__name__, [error])
        return self


def _absent_when_none(value: Any) -> bool:
    # Fields only returnFormatted fills are left out of the JSON otherwise: other answers keep their shape.
    return value is None


class ChunkResult(ResponseModel):
    """One retrieved chunk, with its metadata."""

    id: str = Field(description="Stable chunk id: documentId#chunkIndex.")
    content: str
    score: float | None = Field(
        description=SIMILARITY_NOTE + " Null only for a Gemini File Search chunk Gemini gave no score."
    )
    metadata: dict[str, Any] = Field(
        description="Stored chunk metadata plus documentId and chunkIndex; always travels with the text."
    )
    keyword_score: float | None = Field(
        default=None,
        description="Hybrid only: the chunk's BM25 score for the query in its store's text search "
        "configuration (higher is better; null: the keyword query does not match the chunk).",
    )
    fused_score: float | None = Field(
        default=None,
        description="Hybrid only: the fused score the chunk was ranked by, 0-1, higher is better. rrf: "
        "RRF divided by its maximum 2 / (rrfK + 1), so 1 is first in both lists and 0.5 first in one; "
        "weighted: the weighted mean of the two scaled scores. Compared with minFusedScore.",
    )
    rerank_score: float | None = Field(
        default=None, description="Reranked only: the reranker's relevance score, higher is better."
    )
    formatted_content: str | None = Field(
        default=None,
        exclude_if=_absent_when_none,
        description="returnFormatted only: `Source: <document>[ (<fileName>)][, page <n>][, section <s>]`, "
        "a newline, then the text.",
    )
    citation: int | None = Field(
        default=None,
        exclude_if=_absent_when_none,
        description="returnFormatted only: this chunk's number [n] in `context`; absent when it was left "
        "out (a near-duplicate of an earlier chunk, or over maxContextTokens).",
    )


CONTEXT_NOTE = (
    "returnFormatted only: the results' formattedContent in order, each as `[n] ...`, separated by a "
    "blank line; near-duplicates and chunks over maxContextTokens left out."
)
CONTEXT_TOKENS_NOTE = (
    "returnFormatted only: tokens in `context` (no special tokens), at most maxContextTokens."
)
CONTEXT_TOKENIZER_NOTE = (
    "returnFormatted only: what counted contextTokens: all-MiniLM-L6-v2 (its tokenizer.json), or estimate "
    "(no tokenizer installed: ASCII characters / 3 plus other characters, rounded up)."
)


class Timings(ResponseModel):
    """Milliseconds spent in each stage of this answer's computation."""

    embed: float = 0.0
    search: float = 0.0
    rerank: float = 0.0


class Pipeline(ResponseModel):
    """What the engine did."""

    reranked: bool = False
    rerank_strategy: str | None = None
    candidates_considered: int
    hybrid: bool = False
    fusion: str | None = None
    keyword_scorer: Literal["bm25", "ts_rank_cd"] | None = Field(
        default=None,
        description="Hybrid only: what keywordScore is. bm25; or ts_rank_cd while a store written before "
        "BM25 existed is still being indexed for it (retrieval migrate).",
    )
    timings_ms: Timings = Field(default_factory=Timings)
    warnings: list[str] = Field(
        default_factory=list, description="Why a requested stage was skipped, e.g. the reranker failed."
    )


class RetrieveResponse(ResponseModel):
    """Ranked chunks, best first: by similarity, fused score or rerank score, as `pipeline` says.

    Nothing at or above `grade`: an empty list.
    """

    results: list[ChunkResult]
    query: str
    total_results: int
    engine_used: str
    store: str
    pipeline: Pipeline
    context: str | None = Field(default=None, exclude_if=_absent_when_none, description=CONTEXT_NOTE)
    context_tokens: int | None = Field(
        default=None, exclude_if=_absent_when_none, description=CONTEXT_TOKENS_NOTE
    )
    context_tokenizer: str | None = Field(
        default=None, exclude_if=_absent_when_none, description=CONTEXT_TOKENIZER_NOTE
    )


class SimilaritySearchResponse(ResponseModel):
    """Nearest chunks to the given embedding, highest similarity first."""

    results: list[ChunkResult]
    total_results: int
    store: str
    context: str | None = Field(default=None, exclude_if=_absent_when_none, description=CONTEXT_NOTE)
    context_tokens: int | None = Field(
        default=None, exclude_if=_absent_when_none, description=CONTEXT_TOKENS_NOTE
    )
    context_tokenizer: str | None = Field(
        default=None, exclude_if=_absent_when_none, description=CONTEXT_TOKENIZER_NOTE
    )


class ErrorBody(BaseModel):
    """The error object."""

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    """Every error the API returns."""

    error: ErrorBody


MAX_BATCH = 20


class RetrieveBatchRequest(RequestModel):
    """POST /api/v1/rag/retrieve/batch."""

    requests: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description="Up to 20 RetrieveRequest bodies. Each is validated on its own, so one invalid "
        "item is a 422 in its slot and does not fail the others.",
    )


class BatchItem(ResponseModel):
    """One request's outcome: `response` when status is 200, else `error`."""

    status: int = Field(description="The HTTP status this request would have had on its own.")
    response: RetrieveResponse | None = None
    error: ErrorBody | None = None


class RetrieveBatchResponse(ResponseModel):
    """Outcomes in the order of the requests."""

    results: list[BatchItem]


CheckStatus = Literal["ok", "failed", "overloaded", "skipped"]


class HealthCheck(ResponseModel):
    """One check of GET /api/v1/health."""

    status: CheckStatus = Field(
        description="`ok`; `failed`; `overloaded` (every database connection busy: retry shortly); "
        "`skipped` (not run because a check it needs failed)."
    )
    reason: str | None = Field(
        default=None, description="Unless `ok`: what is wrong and what to do. Never a host, user or key."
    )


class SchemaCheck(HealthCheck):
    """The schema version recorded by migrations against the one this code needs (newer is fine)."""

    version: int | None = Field(default=None, description="Recorded in schema_migrations; absent: none.")
    required_version: int = Field(description="The version this code needs (SCHEMA_VERSION).")


class PgvectorCheck(HealthCheck):
    """The installed `vector` extension: 0.8 or newer (iterative index scans)."""

    version: str | None = Field(default=None, description="e.g. `0.8.5`; absent: not installed.")


class EmbedderCheck(HealthCheck):
    """The embedding provider is configured. Never a call to the provider, never a secret read."""

    provider: str = Field(description="EMBEDDING_PROVIDER: local, openai, gemini or bedrock.")
    model: str
    loaded: bool | None = Field(
        default=None,
        description="Local provider only: the model is in memory (else the first query loads it).",
    )


class HealthChecks(ResponseModel):
    """Each check by name."""

    database: HealthCheck = Field(description="A round trip to PostgreSQL on the service's connections.")
    # `schema` would shadow a BaseModel attribute; the alias keeps the wire name.
    schema_check: SchemaCheck = Field(alias="schema")
    pgvector: PgvectorCheck
    embedder: EmbedderCheck


class HealthResponse(ResponseModel):
    """Readiness: HTTP 200 when every check is `ok`, else 503 with the same body."""

    status: Literal["ok", "degraded", "overloaded"] = Field(
        description="`ok`; `degraded` (a check failed: see its reason); `overloaded` (every database "
        "connection busy, nothing failed: retry shortly)."
    )
    checks: HealthChecks


def validation_error(exc: ValidationError) -> InvalidRequestError:
    """The same error the HTTP API answers with 422: `message` starts with the field."""
    errors = [
        {"field": ".".join(str(p) for p in e["loc"]) or "body", "message": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False)
    ]
    first = errors[0]
    return InvalidRequestError(f"{first['field']}: {first['message']}", {"errors": errors})
