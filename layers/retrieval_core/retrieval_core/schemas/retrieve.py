"""POST /api/v1/rag/retrieve and its batch form: the request with the options each engine takes, the
refusal of options that would have no effect, and the ranked answer with what the pipeline did."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails

from retrieval_core.schemas.common import (
    GEMINI_STORE_PREFIX,
    CacheTtl,
    ErrorBody,
    RequestModel,
    ResponseModel,
    StoreName,
    Text,
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
from retrieval_core.search.fusion import RRF_K, RRF_K_MAX, RRF_K_MIN, Fusion, Normalization

EngineName = Literal["default", "naive"]
SearchMode = Literal["vector", "hybrid", "keyword"]
RerankStrategyName = Literal["bge", "llm", "bedrock", "mmr"]
# Candidates fetched when `similarityTopK` is unset: the advanced engine reranks a wider pool.
DEFAULT_CANDIDATES = {"default": 20, "naive": 5}
# Results the advanced engine returns when the request has no `rerank.topK`.
DEFAULT_RERANK_TOP_K = 5


class RerankOptions(RequestModel):
    """Reranking of the candidates (advanced engine only)."""

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


class ExpandOptions(RequestModel):
    """How many neighbours of the same block join each returned chunk."""

    before: int = Field(default=1, ge=0, le=5)
    after: int = Field(default=1, ge=0, le=5)


class RetrieveRequest(RequestModel):
    """POST /api/v1/rag/retrieve.

    Every option sent takes effect: one that the rest of the request makes pointless ("Needs ..." in
    its description) is a 422 naming what it needs, even when sent with its default value.
    """

    query: Text = Field(min_length=1, max_length=8000, description="Natural-language query.")
    # Optional in the schema only because keyword mode computes no similarity: the validator below
    # makes it required in the other modes.
    grade: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Minimum vector similarity (0-1) a chunk must reach, in every engine. Required with "
        'searchMode "vector" or "hybrid"; not accepted with searchMode "keyword", which computes no '
        "similarity (null is the same as leaving it out).",
    )
    search_mode: SearchMode = Field(
        default="vector",
        description="vector: nearest chunks by embedding. hybrid: PostgreSQL full-text search fused with "
        "the vector search (what useHybrid true asks for; the default when it is sent). keyword: "
        "full-text search alone, ranked by the store's keyword score (BM25, or ts_rank_cd as "
        "pipeline.keywordScorer says); the query is not embedded, only chunks it matches are returned, "
        "and score is null.",
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
        default=False,
        description='Fuse PostgreSQL full-text search with the vector search: true is searchMode "hybrid" '
        "(and conflicts with any other searchMode).",
    )
    # The hybrid defaults (weighted, max-scaled, 0.7 / 0.3) are the fusion measured best on the dev sets
    # together and never more than 0.005 below dense search on any (docs/quality.md); RRF k = 60 was
    # 0.012 below it on one.
    fusion: Fusion = Field(
        default="weighted",
        description='Needs searchMode "hybrid". '
        "How the two lists are fused: rrf (reciprocal rank fusion, k = rrfK) "
        "or weighted (a weighted sum of the similarity and the keyword score, each scaled to 0-1 by "
        "`normalization`).",
    )
    rrf_k: int = Field(
        default=RRF_K,
        ge=RRF_K_MIN,
        le=RRF_K_MAX,
        description='Needs searchMode "hybrid" and fusion rrf. '
        "RRF's k in 1 / (k + rank): smaller lets the first "
        "ranks count more.",
    )
    normalization: Normalization = Field(
        default="max",
        description='Needs searchMode "hybrid" and fusion weighted. '
        "How each score is scaled to 0-1 before "
        "weighting: minmax ((s - lowest) / (highest - lowest) over the candidates) or max (s / highest, "
        "the lowest taken as 0).",
    )
    vector_weight: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description='Needs searchMode "hybrid" and fusion weighted. '
        "Weight of the vector similarity; the weights "
        "are relative (divided by their sum).",
    )
    keyword_weight: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description='Needs searchMode "hybrid" and fusion weighted. '
        "Weight of the keyword score; the weights are "
        "relative (divided by their sum).",
    )
    min_fused_score: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description='Needs searchMode "hybrid". '
        "Minimum fusedScore (0-1) a chunk must reach, applied where grade is. "
        "Unlike grade (minimum vector similarity), it keeps a keyword-only hit that ranks well.",
    )
    mmr_lambda: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description='Needs rerank.strategy "mmr". MMR trade-off: 1 is pure relevance, 0 pure diversity.',
    )
    expand: ExpandOptions | None = Field(
        default=None,
        description="Return each chunk with its neighbours: up to `before` chunks before it and `after` "
        "after it, of the same block (page or section) of its document, joined into its content with each "
        "overlap once; `expanded` then says which chunks the content spans and where the matched chunk sits "
        "in it. A chunk already inside an earlier result's window is not returned again. Works on every "
        "store of the service's own, without writing anything again; attached stores and Gemini File "
        "Search: 422.",
    )
    collapse_duplicates: bool = Field(
        default=True,
        description="Show documents with the same content once: of documents with the same contentSha256 "
        "(the same file under two ids), only the best-ranked one's chunks are returned; chunks without a "
        "hash (attached tables, Gemini File Search) are compared by their text. The candidates are taken "
        "after collapsing, so the answer is as long as it would be without the copies. false: every copy.",
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
        sent = self.model_fields_set
        if self.use_hybrid and "search_mode" not in sent:
            # Set without marking it sent: the body stays what the caller wrote (an answer's retrieve
            # is rebuilt from it), and the two spellings of hybrid share one cache key.
            object.__setattr__(self, "search_mode", "hybrid")
        errors = inapplicable_options(self)
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        object.__setattr__(self, "use_hybrid", self.search_mode == "hybrid")
        return self

    @property
    def context_needs_formatting(self) -> bool:
        """Whether maxContextTokens needs returnFormatted (it bounds `context`, which only that fills)."""
        return True

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


def no_threshold(options: Mapping[str, Any]) -> dict[str, float]:
    """The `grade` that keeps every candidate of a request with `options` (camelCase): 0, or none in keyword
    mode, which computes no similarity to compare it with."""
    return {} if options.get("searchMode") == "keyword" else {"grade": 0.0}


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
    mode = request.search_mode
    errors: list[InitErrorDetails] = []

    def refuse(field: str, message: str, kind: str = "not_applicable") -> None:
        name = RetrieveRequest.model_fields[field].alias or field
        errors.append(not_applicable((name,), message, getattr(request, field), kind))

    if request.use_hybrid and mode != "hybrid":
        refuse(
            "search_mode",
            f'"{mode}" conflicts with useHybrid true, which asks for searchMode "hybrid": send one of them',
        )
    # null is the same as leaving grade out, as for the other optional numbers.
    if mode == "keyword" and request.grade is not None:
        refuse("grade", 'does not apply with searchMode "keyword": a keyword search computes no similarity')
    if mode != "keyword" and request.grade is None:
        errors.append(InitErrorDetails(type="missing", loc=("grade",), input=request.grade))
    for field, fusion in _HYBRID_OPTIONS.items():
        if field in sent and not (mode == "hybrid" and fusion in (None, request.fusion)):
            refuse(
                field, 'applies only with searchMode "hybrid"' + (f' and fusion "{fusion}"' if fusion else "")
            )
    weighted = mode == "hybrid" and request.fusion == "weighted"
    if weighted and request.vector_weight + request.keyword_weight == 0:
        refuse("vector_weight", "vectorWeight and keywordWeight cannot both be 0", "value_error")
    rerank = request.rerank
    uses_mmr = rerank is not None and rerank.enabled and rerank.strategy == "mmr"
    if "mmr_lambda" in sent and not uses_mmr:
        refuse("mmr_lambda", 'applies only with rerank.strategy "mmr" (enabled, default engine)')
    if uses_mmr and mode == "keyword" and request.engine_name == "default":
        assert rerank is not None
        errors.append(
            not_applicable(
                ("rerank", "strategy"),
                'mmr does not apply with searchMode "keyword": it ranks by similarity to the query\'s '
                "embedding, which a keyword search does not compute",
                rerank.strategy,
            )
        )
    if "max_context_tokens" in sent and not request.return_formatted and request.context_needs_formatting:
        refuse("max_context_tokens", "applies only with returnFormatted true")
    if rerank is not None:
        errors.extend(_inapplicable_rerank_options(request.engine_name, rerank))
    return errors


def _inapplicable_rerank_options(engine: EngineName, rerank: RerankOptions) -> list[InitErrorDetails]:
    if engine == "naive" and rerank.enabled:
        return [
            not_applicable(
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
            errors.append(not_applicable(("rerank", name), 'applies only with engineName "default"', value))
        elif not rerank.enabled and field != "top_k":
            errors.append(not_applicable(("rerank", name), "applies only with rerank.enabled true", value))
    if rerank.enabled and rerank.strategy == "mmr" and rerank.score is not None:
        errors.append(
            not_applicable(("rerank", "score"), "does not apply to mmr, which gives no score", rerank.score)
        )
    return errors


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
    search_mode: SearchMode | None = Field(
        default=None,
        description="What ran: vector, hybrid or keyword (null for Gemini File Search, which runs its own).",
    )
    hybrid: bool = Field(default=False, description='searchMode "hybrid" ran (kept for older clients).')
    fusion: str | None = None
    keyword_scorer: Literal["bm25", "ts_rank_cd"] | None = Field(
        default=None,
        description="Hybrid and keyword modes only: what keywordScore is. bm25; or ts_rank_cd on an "
        "attached table, or while a store written before BM25 existed is still being indexed for it "
        "(retrieval migrate).",
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
    context: str | None = Field(default=None, exclude_if=absent_when_none, description=CONTEXT_NOTE)
    context_tokens: int | None = Field(
        default=None, exclude_if=absent_when_none, description=CONTEXT_TOKENS_NOTE
    )
    context_tokenizer: str | None = Field(
        default=None, exclude_if=absent_when_none, description=CONTEXT_TOKENIZER_NOTE
    )


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
