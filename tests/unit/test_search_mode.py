"""searchMode on a retrieve request: what each mode accepts, and the cause named for what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from retrieval_core.backends.router import shares_query_embedding
from retrieval_core.schemas.answer import AnswerRequest
from retrieval_core.schemas.retrieve import RetrieveRequest


def parse(**body: Any) -> RetrieveRequest:
    return RetrieveRequest.model_validate({"query": "refund policy", **body})


def refusal(**body: Any) -> dict[str, Any]:
    with pytest.raises(ValidationError) as caught:
        parse(**body)
    errors = caught.value.errors(include_url=False)
    assert len(errors) == 1, errors
    return dict(errors[0])


@pytest.mark.parametrize(
    ("body", "mode"),
    [
        ({"grade": 0.2}, "vector"),
        ({"grade": 0.2, "searchMode": "vector"}, "vector"),
        ({"grade": 0.2, "useHybrid": False}, "vector"),
        ({"grade": 0.2, "useHybrid": True}, "hybrid"),
        ({"grade": 0.2, "searchMode": "hybrid"}, "hybrid"),
        ({"grade": 0.2, "searchMode": "hybrid", "useHybrid": True}, "hybrid"),
        ({"searchMode": "keyword"}, "keyword"),
        ({"searchMode": "keyword", "useHybrid": False}, "keyword"),
        ({"searchMode": "keyword", "engineName": "naive", "similarityTopK": 7}, "keyword"),
        ({"searchMode": "keyword", "rerank": {"strategy": "bge", "topK": 3}}, "keyword"),
        ({"searchMode": "keyword", "rerank": {"strategy": "llm"}}, "keyword"),
        ({"searchMode": "keyword", "rerank": {"strategy": "bedrock", "score": 0.1}}, "keyword"),
        ({"searchMode": "keyword", "metadataFilter": {"year": 2024}, "docIds": ["a"]}, "keyword"),
        ({"searchMode": "keyword", "returnFormatted": True, "maxContextTokens": 100}, "keyword"),
        ({"searchMode": "hybrid", "grade": 0.0, "fusion": "rrf", "rrfK": 10}, "hybrid"),
        ({"searchMode": "hybrid", "grade": 0.0, "vectorWeight": 0.5, "minFusedScore": 0.1}, "hybrid"),
        ({"grade": 0.0, "rerank": {"strategy": "mmr"}, "mmrLambda": 0.5}, "vector"),
    ],
)
def test_accepted_combinations_and_the_mode_they_run(body: dict[str, Any], mode: str) -> None:
    request = parse(**body)
    assert request.search_mode == mode
    # useHybrid and searchMode always agree once parsed: the rest of the service may read either.
    assert request.use_hybrid is (mode == "hybrid")


def test_both_spellings_of_hybrid_are_one_request_and_one_cache_key() -> None:
    by_flag = parse(grade=0.2, useHybrid=True).model_dump(mode="json")
    by_mode = parse(grade=0.2, searchMode="hybrid").model_dump(mode="json")
    assert by_flag == by_mode
    keyword = parse(searchMode="keyword").model_dump(mode="json")
    vector = parse(grade=0.2).model_dump(mode="json")
    assert len({str(sorted(d.items())) for d in (by_flag, keyword, vector)}) == 3


@pytest.mark.parametrize("mode", ["vector", "keyword"])
def test_use_hybrid_true_with_another_mode_names_the_conflict(mode: str) -> None:
    body: dict[str, Any] = {"searchMode": mode, "useHybrid": True}
    if mode == "vector":
        body["grade"] = 0.1
    error = refusal(**body)
    assert error["loc"] == ("searchMode",) and error["type"] == "not_applicable"
    assert f'"{mode}" conflicts with useHybrid true' in error["msg"]


def test_grade_in_keyword_mode_is_refused_because_no_similarity_is_computed() -> None:
    error = refusal(searchMode="keyword", grade=0.0)
    assert error["loc"] == ("grade",) and error["type"] == "not_applicable"
    assert 'searchMode "keyword"' in error["msg"] and "no similarity" in error["msg"]


def test_grade_null_is_grade_left_out() -> None:
    assert parse(searchMode="keyword", grade=None).grade is None
    assert refusal(grade=None)["type"] == "missing"


@pytest.mark.parametrize(
    "body", [{}, {"searchMode": "vector"}, {"searchMode": "hybrid"}, {"useHybrid": True}]
)
def test_grade_stays_required_in_vector_and_hybrid_modes(body: dict[str, Any]) -> None:
    error = refusal(**body)
    assert error["loc"] == ("grade",) and error["type"] == "missing"


@pytest.mark.parametrize(
    ("options", "field", "needs"),
    [
        ({"fusion": "rrf"}, "fusion", 'searchMode "hybrid"'),
        ({"rrfK": 10}, "rrfK", 'searchMode "hybrid" and fusion "rrf"'),
        ({"normalization": "max"}, "normalization", 'searchMode "hybrid" and fusion "weighted"'),
        (
            {"vectorWeight": 0.0, "keywordWeight": 1.0},
            "vectorWeight",
            'searchMode "hybrid" and fusion "weighted"',
        ),
        ({"minFusedScore": 0.2}, "minFusedScore", 'searchMode "hybrid"'),
    ],
)
@pytest.mark.parametrize("mode", ["vector", "keyword"])
def test_hybrid_options_outside_hybrid_mode_name_what_they_need(
    options: dict[str, Any], field: str, needs: str, mode: str
) -> None:
    body = {"searchMode": mode, **options, **({"grade": 0.1} if mode == "vector" else {})}
    with pytest.raises(ValidationError) as caught:
        parse(**body)
    first = caught.value.errors(include_url=False)[0]
    assert first["loc"] == (field,) and first["msg"] == f"applies only with {needs}"


def test_mmr_in_keyword_mode_is_refused_because_it_needs_the_query_embedding() -> None:
    error = refusal(searchMode="keyword", rerank={"strategy": "mmr"})
    assert error["loc"] == ("rerank", "strategy") and error["type"] == "not_applicable"
    assert "mmr" in error["msg"] and "embedding" in error["msg"]


def test_an_unknown_mode_is_refused_with_the_modes() -> None:
    error = refusal(searchMode="sparse", grade=0.1)
    assert error["loc"] == ("searchMode",) and "'vector', 'hybrid' or 'keyword'" in error["msg"]


def test_a_keyword_request_stays_out_of_a_batch_embedding_call() -> None:
    assert shares_query_embedding(parse(grade=0.1))
    assert shares_query_embedding(parse(grade=0.1, searchMode="hybrid"))
    assert not shares_query_embedding(parse(searchMode="keyword"))


def test_an_answer_in_keyword_mode_retrieves_in_keyword_mode_without_grade() -> None:
    answer = AnswerRequest.model_validate({"query": "refund", "searchMode": "keyword"})
    retrieve = answer.retrieve_request()
    assert retrieve.search_mode == "keyword" and retrieve.grade is None
    hybrid = AnswerRequest.model_validate({"query": "refund", "grade": 0.1, "useHybrid": True})
    assert hybrid.retrieve_request().search_mode == "hybrid"
