from __future__ import annotations

import pytest
from pydantic import ValidationError

from retrieval_core.models import RetrieveRequest, RetrieveResponse, SimilaritySearchRequest


def test_retrieve_request_reads_camel_case_and_applies_defaults() -> None:
    request = RetrieveRequest.model_validate({"query": "q", "grade": 0.5, "docIds": ["a"]})
    assert request.similarity_top_k == 5
    assert request.doc_ids == ["a"]
    assert request.engine_name == "naive"


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
        ({"query": "q", "grade": 0.5, "engineName": "default"}, "engineName"),
        ({"query": "q", "grade": 0.5, "rerank": {"enabled": True}}, "rerank"),
        ({"query": "x" * 8001, "grade": 0.5}, "query"),
    ],
)
def test_invalid_retrieve_requests_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        RetrieveRequest.model_validate(body)
    assert field in {str(e["loc"][0]) for e in info.value.errors()}


@pytest.mark.parametrize("bad", [[float("nan")], [float("inf")], []])
def test_similarity_search_refuses_non_finite_or_empty_embeddings(bad: list[float]) -> None:
    with pytest.raises(ValidationError):
        SimilaritySearchRequest.model_validate({"queryEmbedding": bad})


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
    assert dumped["pipeline"] == {"reranked": False, "rerankStrategy": None, "candidatesConsidered": 3}
