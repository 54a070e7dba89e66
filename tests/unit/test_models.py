from __future__ import annotations

import pytest
from pydantic import ValidationError

from retrieval_core.schemas.retrieve import RetrieveRequest, RetrieveResponse
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest


def test_retrieve_request_reads_camel_case_and_applies_defaults() -> None:
    request = RetrieveRequest.model_validate({"query": "q", "grade": 0.5, "docIds": ["a"]})
    assert request.doc_ids == ["a"]
    # engineName "default" is the advanced engine, and it is the default.
    assert request.engine_name == "default" and request.candidate_count == 20
    assert request.rerank is None and not request.use_hybrid and request.mmr_lambda == 0.7
    naive = RetrieveRequest.model_validate({"query": "q", "grade": 0.5, "engineName": "naive"})
    assert naive.candidate_count == 5


def test_the_hybrid_flags_are_read() -> None:
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
        ({"query": "q", "grade": 0.5, "similarityTopK": 101}, "similarityTopK"),
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
    rerank = RetrieveRequest.model_validate(body).rerank
    assert rerank is not None and rerank.enabled is False


HYBRID = {"useHybrid": True}
WEIGHTED = {"useHybrid": True, "fusion": "weighted"}
RRF = {"useHybrid": True, "fusion": "rrf"}
MMR = {"rerank": {"strategy": "mmr"}}


@pytest.mark.parametrize(
    ("options", "field", "says"),
    [
        # Each was accepted and did nothing before: the answer was the same with or without it.
        ({"fusion": "weighted"}, "fusion", 'applies only with searchMode "hybrid"'),
        ({"fusion": "rrf"}, "fusion", 'applies only with searchMode "hybrid"'),
        ({"vectorWeight": 0.1}, "vectorWeight", 'only with searchMode "hybrid" and fusion "weighted"'),
        ({**RRF, "vectorWeight": 0.1}, "vectorWeight", 'and fusion "weighted"'),
        ({**HYBRID, "fusion": "rrf", "keywordWeight": 0.9}, "keywordWeight", 'and fusion "weighted"'),
        ({"mmrLambda": 0.1}, "mmrLambda", 'applies only with rerank.strategy "mmr"'),
        ({"rerank": {"enabled": False}, "mmrLambda": 0.1}, "mmrLambda", 'rerank.strategy "mmr"'),
        ({"rerank": {"strategy": "bge"}, "mmrLambda": 0.1}, "mmrLambda", 'rerank.strategy "mmr"'),
        ({"engineName": "naive", "rerank": {"enabled": False, "topK": 2}}, "rerank.topK", "engineName"),
        ({"rerank": {"enabled": False, "strategy": "llm"}}, "rerank.strategy", "rerank.enabled true"),
        ({"rerank": {"enabled": False, "score": 0.5}}, "rerank.score", "rerank.enabled true"),
        # The options added with them.
        ({"rrfK": 10}, "rrfK", 'applies only with searchMode "hybrid" and fusion "rrf"'),
        ({**WEIGHTED, "rrfK": 10}, "rrfK", 'fusion "rrf"'),
        ({"normalization": "max"}, "normalization", 'fusion "weighted"'),
        ({**RRF, "normalization": "minmax"}, "normalization", 'fusion "weighted"'),
        # useHybrid alone is weighted fusion now: rrfK needs fusion "rrf" said out loud.
        ({**HYBRID, "rrfK": 10}, "rrfK", 'fusion "rrf"'),
        ({"minFusedScore": 0.5}, "minFusedScore", 'applies only with searchMode "hybrid"'),
        ({"useHybrid": False, "minFusedScore": 0.5}, "minFusedScore", 'searchMode "hybrid"'),
    ],
)
def test_an_option_that_would_do_nothing_is_refused_naming_what_it_needs(
    options: dict[str, object], field: str, says: str
) -> None:
    with pytest.raises(ValidationError) as info:
        RetrieveRequest.model_validate({"query": "q", "grade": 0.5, **options})
    errors = info.value.errors()
    assert [".".join(map(str, e["loc"])) for e in errors] == [field]
    assert says in errors[0]["msg"]


def test_an_option_sent_with_its_default_value_is_refused_too() -> None:
    # vectorWeight 0.7 is the default, yet sending it with rrf asks for a weighting rrf never makes.
    with pytest.raises(ValidationError, match="vectorWeight"):
        RetrieveRequest.model_validate({"query": "q", "grade": 0.5, **RRF, "vectorWeight": 0.7})


def test_every_inapplicable_option_is_listed_at_once() -> None:
    with pytest.raises(ValidationError) as info:
        RetrieveRequest.model_validate(
            {"query": "q", "grade": 0.5, "fusion": "weighted", "vectorWeight": 0.5, "mmrLambda": 0.3}
        )
    assert [e["loc"] for e in info.value.errors()] == [("fusion",), ("vectorWeight",), ("mmrLambda",)]


@pytest.mark.parametrize(
    "options",
    [
        {**RRF, "rrfK": 1, "minFusedScore": 0.0},
        {**RRF, "rrfK": 1000, "minFusedScore": 1.0},
        {**HYBRID, "vectorWeight": 0.5, "keywordWeight": 0.5},
        {**HYBRID, "normalization": "minmax"},
        {**WEIGHTED, "normalization": "max", "vectorWeight": 1, "keywordWeight": 1, "minFusedScore": 0.4},
        {**MMR, "mmrLambda": 0.5},
        {**HYBRID, **MMR, "mmrLambda": 0.5},
        {"useHybrid": False, "rerank": {"enabled": False, "topK": 3}},
    ],
)
def test_options_that_take_effect_are_accepted(options: dict[str, object]) -> None:
    RetrieveRequest.model_validate({"query": "q", "grade": 0.5, **options})


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({**RRF, "rrfK": 0}, "rrfK"),
        ({**RRF, "rrfK": 1001}, "rrfK"),
        ({**RRF, "rrfK": 2.5}, "rrfK"),
        ({**WEIGHTED, "normalization": "zscore"}, "normalization"),
        ({**HYBRID, "minFusedScore": 1.01}, "minFusedScore"),
        ({**HYBRID, "minFusedScore": -0.1}, "minFusedScore"),
    ],
)
def test_new_hybrid_options_are_bounded(options: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        RetrieveRequest.model_validate({"query": "q", "grade": 0.5, **options})
    assert field in {str(e["loc"][0]) for e in info.value.errors()}


def test_use_hybrid_alone_is_the_fusion_measured_best_max_scaled_weighted_0_7_0_3() -> None:
    request = RetrieveRequest.model_validate({"query": "q", "grade": 0.5, **HYBRID})
    chosen = (request.fusion, request.normalization, request.vector_weight, request.keyword_weight)
    assert chosen == ("weighted", "max", 0.7, 0.3)
    assert request.min_fused_score is None


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
        "searchMode": None,
        "hybrid": False,
        "fusion": None,
        "keywordScorer": None,
        "timingsMs": {"embed": 0.0, "search": 0.0, "rerank": 0.0},
        "warnings": [],
    }
