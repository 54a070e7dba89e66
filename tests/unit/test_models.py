from __future__ import annotations

import pytest
from pydantic import ValidationError

from retrieval_core.models import RetrieveRequest, RetrieveResponse, SimilaritySearchRequest


def test_retrieve_request_reads_camel_case_and_applies_defaults() -> None:
    request = RetrieveRequest.model_validate({"query": "q", "grade": 0.5, "docIds": ["a"]})
    assert request.doc_ids == ["a"]
    # Seed 002: engineName "default" is the advanced engine, and it is the default.
    assert request.engine_name == "default" and request.candidate_count == 20
    assert request.rerank is None and not request.use_hybrid and request.mmr_lambda == 0.7
    naive = RetrieveRequest.model_validate({"query": "q", "grade": 0.5, "engineName": "naive"})
    assert naive.candidate_count == 5


def test_seed_004_hybrid_flags_are_read() -> None:
    request = RetrieveRequest.model_validate(
        {
            "query": "q",
            "grade": 0,
            "useHybrid": True,
            "fusion": "weighted",
            "vectorWeight": 0.8,
            "keywordWeight": 0.2,
        }
    )
    assert request.use_hybrid and request.fusion == "weighted"
    assert (request.vector_weight, request.keyword_weight) == (0.8, 0.2)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"grade": 0.5}, "query"),
        ({"query": "", "grade": 0.5}, "query"),
        ({"query": "q"}, "grade"),
        ({"query": "q", "grade": 1.5}, "grade"),
        ({"query": "q", "grade": 0.5, "similarityTopK": 0}, "similarityTopK"),
        ({"query": "q", "grade": 0.5, "similarityTopK": 51}, "similarityTopK"),
        ({"query": "q", "grade": 0.5, "docIds": ["x"] * 101}, "docIds"),
        ({"query": "q\x00", "grade": 0.5}, "query"),
        ({"query": "q", "grade": 0.5, "engineName": "fancy"}, "engineName"),
        ({"query": "q", "grade": 0.5, "rerank": {"strategy": "cohere"}}, "rerank"),
        ({"query": "q", "grade": 0.5, "rerank": {"topK": 0}}, "rerank"),
        ({"query": "q", "grade": 0.5, "fusion": "concat"}, "fusion"),
        ({"query": "q", "grade": 0.5, "vectorWeight": 1.5}, "vectorWeight"),
        ({"query": "q", "grade": 0.5, "mmrLambda": -0.1}, "mmrLambda"),
        ({"query": "x" * 8001, "grade": 0.5}, "query"),
    ],
)
def test_invalid_retrieve_requests_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        RetrieveRequest.model_validate(body)
    assert field in {str(e["loc"][0]) for e in info.value.errors()}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"engineName": "naive", "rerank": {"strategy": "bge"}}, "naive engine does not rerank"),
        ({"rerank": {"strategy": "mmr", "score": 0.5}}, "does not apply to mmr"),
        ({"useHybrid": True, "fusion": "weighted", "vectorWeight": 0, "keywordWeight": 0}, "both be 0"),
    ],
)
def test_contradictory_options_are_refused_not_ignored(extra: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        RetrieveRequest.model_validate({"query": "q", "grade": 0.5, **extra})


def test_naive_engine_accepts_a_disabled_rerank_object() -> None:
    body = {"query": "q", "grade": 0.5, "engineName": "naive", "rerank": {"enabled": False}}
    assert RetrieveRequest.model_validate(body).rerank is not None


@pytest.mark.parametrize(
    "bad",
    [[float("nan")], [float("inf")], [1.0, float("-inf"), float("nan")], [1e308, 1e308, float("nan")], []],
)
def test_similarity_search_refuses_non_finite_or_empty_embeddings(bad: list[float]) -> None:
    with pytest.raises(ValidationError):
        SimilaritySearchRequest.model_validate({"queryEmbedding": bad})


def test_similarity_search_accepts_finite_components_whose_length_exceeds_a_double() -> None:
    request = SimilaritySearchRequest.model_validate({"queryEmbedding": [1e308, -1e308, 1e308]})
    assert request.query_embedding == [1e308, -1e308, 1e308]


def test_response_serialises_camel_case() -> None:
    response = RetrieveResponse.model_validate(
        {
            "results": [],
            "query": "q",
            "total_results": 0,
            "engine_used": "naive",
            "store": "s",
            "pipeline": {"candidates_considered": 3},
        }
    )
    dumped = response.model_dump(by_alias=True)
    assert dumped["totalResults"] == 0 and dumped["engineUsed"] == "naive"
    assert dumped["pipeline"] == {
        "reranked": False,
        "rerankStrategy": None,
        "candidatesConsidered": 3,
        "hybrid": False,
        "fusion": None,
        "timingsMs": {"embed": 0.0, "search": 0.0, "rerank": 0.0},
        "warnings": [],
    }
