"""POST /api/v1/stores/{store}/evaluate: judged queries scored against a store, per retrieval method.

The request carries a BEIR-style query set (queries, and judgments naming documents by documentId) and
the methods to compare, each a retrieve request's options; the answer has every method's mean nDCG@k
and recall@k and every query's scores and first k documents, for a chart and a per-query comparison.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from retrieval_core.schemas.common import RequestModel, ResponseModel, Text, document_id

# The bounds keep an evaluation within the function's time-out (docs/api.md "Evaluation"): measured at
# 100 queries x 3 methods on a 5,000-document store in docs/benchmarks.md "Evaluation".
MAX_QUERIES = 100
MAX_METHODS = 6
MAX_JUDGMENTS = 20_000
MAX_K = 50
DEFAULT_K = 10
MAX_RELEVANCE = 10
MAX_NAME_CHARS = 64
MAX_QUERY_ID_CHARS = 256
# Chunks each method ranks per query, as `retrieval eval` does: a document ranks by its best chunk, so the
# first k documents need more than k chunks.
SEARCH_DEPTH = 100

# Retrieve options a method may not set: the evaluation sets them itself (query, store, grade 0, no
# cache, the pgvector backend), or its own depth replaces them (similarityTopK, rerank.topK), or they
# shape only a prompt context the scores never read.
SET_BY_EVALUATION = {
    "query": "is each query's text",
    "store": "is the store in the path",
    "grade": "is 0: every method ranks without a threshold",
    "cacheTTLms": "is 0: an evaluation is never cached",
    "backend": "is pgvector: only pgvector stores are evaluated",
    "similarityTopK": f"is the evaluation's own depth ({SEARCH_DEPTH} chunks)",
    "returnFormatted": "has no effect on the scores",
    "maxContextTokens": "has no effect on the scores",
}
RERANK_TOP_K_NOTE = f"is the evaluation's own depth ({SEARCH_DEPTH} chunks)"

DocumentId = Annotated[Text, Field(min_length=1), AfterValidator(document_id)]
QueryId = Annotated[Text, Field(min_length=1, max_length=MAX_QUERY_ID_CHARS)]


class EvaluationQuery(RequestModel):
    """One query of the set."""

    id: QueryId
    text: Text = Field(min_length=1, max_length=8000, description="The query, as a retrieve query.")


class Judgment(RequestModel):
    """How relevant one document is to one query (a line of a BEIR qrels file)."""

    query_id: QueryId
    document_id: DocumentId = Field(description="The store's documentId (a BEIR corpus-id as loaded).")
    relevance: int = Field(
        ge=0,
        le=MAX_RELEVANCE,
        description="0: judged not relevant; 1 and above: relevant, graded (nDCG gains 2^relevance - 1).",
    )


class EvaluationMethod(RequestModel):
    """A named retrieve configuration to score."""

    name: Text = Field(min_length=1, max_length=MAX_NAME_CHARS)
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="POST /rag/retrieve options (camelCase), without query, store and grade, e.g. "
        '{"engineName": "naive", "useHybrid": true}. Validated as a retrieve request is.',
    )


class EvaluateRequest(RequestModel):
    """POST /api/v1/stores/{store}/evaluate."""

    queries: list[EvaluationQuery] = Field(min_length=1, max_length=MAX_QUERIES)
    judgments: list[Judgment] = Field(
        min_length=1,
        max_length=MAX_JUDGMENTS,
        description="Queries with no judgment of relevance 1 or more are skipped and counted, as BEIR's "
        "tools do.",
    )
    methods: list[EvaluationMethod] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_METHODS,
        description="Default: dense (naive engine), hybrid (naive engine, useHybrid) and keyword.",
    )
    k: int = Field(
        default=DEFAULT_K, ge=1, le=MAX_K, description="The cut of nDCG@k, recall@k and topDocuments."
    )

    @model_validator(mode="after")
    def _consistent(self) -> EvaluateRequest:
        errors = [*_repeated_ids(self), *_unknown_query_ids(self), *_repeated_judgments(self)]
        for index, method in enumerate(self.methods or ()):
            errors += method_option_errors(index, method)
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self


def _repeated_ids(request: EvaluateRequest) -> list[InitErrorDetails]:
    errors: list[InitErrorDetails] = []
    for field, values in (
        ("queries", [(q.id, "id") for q in request.queries]),
        ("methods", [(m.name, "name") for m in request.methods or ()]),
    ):
        seen: set[str] = set()
        for index, (value, key) in enumerate(values):
            if value in seen:
                errors.append(_error((field, index, key), f"'{value}' is given twice", value, "value_error"))
            seen.add(value)
    return errors


def _unknown_query_ids(request: EvaluateRequest) -> list[InitErrorDetails]:
    known = {q.id for q in request.queries}
    return [
        _error(
            ("judgments", i, "queryId"), f"names query '{j.query_id}', which is not in queries", j.query_id
        )
        for i, j in enumerate(request.judgments)
        if j.query_id not in known
    ]


def _repeated_judgments(request: EvaluateRequest) -> list[InitErrorDetails]:
    seen: set[tuple[str, str]] = set()
    errors: list[InitErrorDetails] = []
    for index, judgment in enumerate(request.judgments):
        pair = (judgment.query_id, judgment.document_id)
        if pair in seen:
            message = f"query '{pair[0]}' and document '{pair[1]}' are judged twice"
            errors.append(_error(("judgments", index), message, list(pair), "value_error"))
        seen.add(pair)
    return errors


def method_option_errors(index: int, method: EvaluationMethod) -> list[InitErrorDetails]:
    """Why method `index`'s options are refused, each error at `methods.{index}.options.{option}` and
    naming the method; none when a retrieve request would accept them."""
    from retrieval_core.schemas.retrieve import RetrieveRequest, no_threshold

    at = ("methods", index, "options")
    named = f"method '{method.name}': "
    errors = [
        _error((*at, key), f"{named}{key} {why}", method.options[key], "not_applicable")
        for key, why in SET_BY_EVALUATION.items()
        if key in method.options
    ]
    rerank = method.options.get("rerank")
    if isinstance(rerank, dict) and "topK" in rerank:
        errors.append(
            _error(
                (*at, "rerank", "topK"), f"{named}rerank.topK {RERANK_TOP_K_NOTE}", rerank, "not_applicable"
            )
        )
    if errors:
        return errors
    try:
        RetrieveRequest.model_validate({**method.options, "query": "check", **no_threshold(method.options)})
    except ValidationError as exc:
        return [
            _error((*at, *e["loc"]), f"{named}{e['msg']}", e.get("input"), e["type"])
            for e in exc.errors(include_url=False)
        ]
    return []


def _error(
    loc: tuple[str | int, ...], message: str, value: Any, kind: str = "value_error"
) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError(kind, message), loc=loc, input=value)


class MethodScore(ResponseModel):
    """One method's means over the scored queries (None when no query was scored)."""

    name: str
    options: dict[str, Any] = Field(description="The retrieve options the method ran with.")
    ndcg: float | None = Field(description="Mean nDCG@k.")
    recall: float | None = Field(description="Mean recall@k: the share of relevant documents in the first k.")
    median_latency_ms: float | None = Field(
        description="Median time of one query's search, embedding excluded."
    )


class QueryMethodScore(ResponseModel):
    """One query ranked by one method."""

    ndcg: float
    recall: float
    top_documents: list[str] = Field(description="The first k documentIds the method ranked, best first.")


class QueryScore(ResponseModel):
    """One scored query: its scores under every method, keyed by method name."""

    id: str
    text: str
    relevant_documents: int = Field(description="Documents judged with relevance 1 or more.")
    scores: dict[str, QueryMethodScore]


StoppedBy = Literal["deadline", "responseSize"]


class EvaluateResponse(ResponseModel):
    """Every method's means, then every scored query in request order."""

    store: str
    k: int
    complete: bool = Field(
        description="false: stopped early (see stoppedBy); the scores cover the queries done."
    )
    stopped_by: StoppedBy | None = Field(
        description="Why the evaluation stopped early: deadline (the request's time ran short) or "
        "responseSize (the answer would outgrow one Lambda response). None when complete.",
    )
    scored_queries: int
    skipped_queries: int = Field(
        description="Queries without any judgment of relevance 1 or more: not scored."
    )
    methods: list[MethodScore]
    queries: list[QueryScore]
