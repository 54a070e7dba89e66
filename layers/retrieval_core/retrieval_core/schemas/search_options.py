"""Options that retrieve and similarity search share: document ids, the three forms of a metadata filter,
the index knobs, the result cap, and the formatted context."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field, TypeAdapter, WrapValidator

from retrieval_core.filters.predicate import MetadataValue
from retrieval_core.filters.tree import is_tree
from retrieval_core.schemas.common import MAX_DOCUMENT_ID_BYTES, RequestModel, document_id, no_nul
from retrieval_core.settings import (
    EF_SEARCH_MAX,
    EF_SEARCH_MIN,
    MAX_SCAN_TUPLES_MAX,
    MAX_SCAN_TUPLES_MIN,
    IterativeScan,
)

# The most results (and candidates) one request may ask for: similarityTopK, rerank.topK, topK.
MAX_TOP_K = 100


def _storable_value(value: MetadataValue) -> MetadataValue:
    # A filter value travels as jsonb, which has no NaN or Infinity (JSON parsers here accept them).
    if isinstance(value, str):
        return no_nul(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


DocIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID_BYTES), AfterValidator(document_id)]],
    Field(max_length=100, description="Only chunks of these documents (at most 100 ids of 1,024 bytes)."),
]
MetadataEqualities = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=256), AfterValidator(no_nul)],
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
    AfterValidator(no_nul),
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
