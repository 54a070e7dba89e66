"""Hybrid and reranking options through the HTTP app on the real store: each takes effect or is a 422."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"
# Every candidate comes back (naive engine, grade 0), so a test sees the whole fused ranking.
ALL = {"engineName": "naive", "grade": 0.0, "cacheTTLms": 0, "similarityTopK": 10}
QUERY = "rotate the old key after ninety days"


def retrieve(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post(RETRIEVE, json={"query": QUERY, **ALL, **body})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def fused(body: dict[str, Any]) -> dict[str, float]:
    return {r["id"]: r["fusedScore"] for r in body["results"]}


@pytest.mark.parametrize(
    ("options", "field", "says"),
    [
        ({"vectorWeight": 0.2, "keywordWeight": 0.8}, "vectorWeight", 'searchMode "hybrid"'),
        ({"useHybrid": True, "fusion": "rrf", "vectorWeight": 0.7}, "vectorWeight", 'fusion "weighted"'),
        ({"fusion": "weighted"}, "fusion", 'searchMode "hybrid"'),
        ({"mmrLambda": 0.3}, "mmrLambda", 'rerank.strategy "mmr"'),
        (
            {"engineName": "default", "rerank": {"enabled": False, "strategy": "mmr"}},
            "rerank.strategy",
            "enabled",
        ),
        ({"rerank": {"enabled": False, "topK": 3}}, "rerank.topK", 'engineName "default"'),
        ({"useHybrid": True, "fusion": "weighted", "rrfK": 10}, "rrfK", 'fusion "rrf"'),
        ({"useHybrid": True, "fusion": "rrf", "normalization": "max"}, "normalization", 'fusion "weighted"'),
        ({"useHybrid": True, "rrfK": 10}, "rrfK", 'fusion "rrf"'),
        ({"minFusedScore": 0.5}, "minFusedScore", 'searchMode "hybrid"'),
    ],
)
def test_an_option_that_would_do_nothing_is_a_422_naming_what_it_needs(
    client: TestClient, options: dict[str, Any], field: str, says: str
) -> None:
    response = client.post(RETRIEVE, json={"query": QUERY, **ALL, **options})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["message"].startswith(f"{field}: applies only with") and says in error["message"]
    assert error["details"]["errors"][0]["field"] == field


def test_rrf_fused_score_is_rrf_over_its_maximum_so_first_in_both_lists_is_1(client: TestClient) -> None:
    vector_order = ids(retrieve(client))
    hybrid = retrieve(client, useHybrid=True, fusion="rrf")
    keyword_hits = [r for r in hybrid["results"] if r["keywordScore"] is not None]
    keyword_order = [
        r["id"]
        for r in sorted(
            keyword_hits,
            key=lambda r: (-r["keywordScore"], r["metadata"]["documentId"], r["metadata"]["chunkIndex"]),
        )
    ]

    def expected(chunk: str, k: int) -> float:
        raw = sum(
            1 / (k + ranking.index(chunk) + 1)
            for ranking in (vector_order, keyword_order)
            if chunk in ranking
        )
        return raw / (2 / (k + 1))

    assert fused(hybrid) == {chunk: pytest.approx(expected(chunk, 60)) for chunk in ids(hybrid)}
    assert all(0 < score <= 1 for score in fused(hybrid).values())
    # rrfK reaches the fusion: k = 1 weighs the first ranks more.
    k1 = retrieve(client, useHybrid=True, fusion="rrf", rrfK=1)
    assert fused(k1) == {chunk: pytest.approx(expected(chunk, 1)) for chunk in ids(k1)}
    assert fused(k1) != fused(hybrid)


def test_use_hybrid_alone_fuses_max_scaled_scores_weighted_0_7_and_0_3(client: TestClient) -> None:
    body = retrieve(client, useHybrid=True)
    assert body["pipeline"]["fusion"] == "weighted"
    spelled_out = {"fusion": "weighted", "normalization": "max", "vectorWeight": 0.7, "keywordWeight": 0.3}
    assert body["results"] == retrieve(client, useHybrid=True, **spelled_out)["results"]
    assert body["results"] != retrieve(client, useHybrid=True, fusion="rrf")["results"]


def test_a_chunk_first_in_both_lists_scores_exactly_1(client: TestClient) -> None:
    body = retrieve(client, query="espresso machine descaling", useHybrid=True)
    top = body["results"][0]
    assert top["id"] == ids(retrieve(client, query="espresso machine descaling"))[0]
    assert top["keywordScore"] == max(r["keywordScore"] or 0 for r in body["results"])
    assert top["fusedScore"] == 1.0


@pytest.mark.parametrize("normalization", ["minmax", "max"])
def test_weighted_fused_score_is_0_to_1_whatever_the_weights_sum_to(
    client: TestClient, normalization: str
) -> None:
    weighted = {"useHybrid": True, "fusion": "weighted", "normalization": normalization}
    halves = retrieve(client, **weighted, vectorWeight=0.5, keywordWeight=0.5)
    ones = retrieve(client, **weighted, vectorWeight=1, keywordWeight=1)
    assert ids(ones) == ids(halves)
    assert fused(ones) == pytest.approx(fused(halves))
    assert all(0 <= score <= 1 for score in fused(ones).values())


def test_normalization_reaches_the_fusion(client: TestClient) -> None:
    weighted = {"useHybrid": True, "fusion": "weighted", "vectorWeight": 0.7, "keywordWeight": 0.3}
    minmax, by_max = retrieve(client, **weighted, normalization="minmax"), retrieve(client, **weighted)
    assert fused(minmax) != pytest.approx(fused(by_max))
    # max scaling: the best similarity scales to 1 and the best keyword hit to 1, so the chunk best on
    # both would be 1; each score is the weighted mean of similarity / best and keywordScore / best.
    best_score = max(r["score"] for r in by_max["results"])
    best_keyword = max(r["keywordScore"] or 0 for r in by_max["results"])
    for r in by_max["results"]:
        mean = 0.7 * max(r["score"], 0) / best_score + 0.3 * (r["keywordScore"] or 0) / best_keyword
        assert r["fusedScore"] == pytest.approx(mean)


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_min_fused_score_drops_exactly_the_chunks_below_it(client: TestClient, fusion: str) -> None:
    everything = retrieve(client, useHybrid=True, fusion=fusion)
    scores = sorted(fused(everything).values())
    minimum = scores[len(scores) // 2]
    kept = retrieve(client, useHybrid=True, fusion=fusion, minFusedScore=minimum)
    assert ids(kept) == [r["id"] for r in everything["results"] if r["fusedScore"] >= minimum]
    assert 0 < len(ids(kept)) < len(ids(everything))
    assert retrieve(client, useHybrid=True, fusion=fusion, minFusedScore=1.0)["results"] == [
        r for r in everything["results"] if r["fusedScore"] == 1.0
    ]


def test_grade_drops_a_strong_keyword_only_hit_and_min_fused_score_keeps_it(client: TestClient) -> None:
    # "ninety" is only in security-keys, whose similarity is below the nearest chunk's.
    query = {"query": "ninety days", "similarityTopK": 1, "useHybrid": True}
    both = retrieve(client, **query)
    similarity = {r["id"]: r["score"] for r in both["results"]}
    assert similarity["security-keys#0"] < similarity["security-incident#0"]
    graded = retrieve(client, **query, grade=similarity["security-incident#0"])
    assert ids(graded) == ["security-incident#0"]
    by_fused = retrieve(client, **query, minFusedScore=0.5)
    assert set(ids(by_fused)) == {"security-incident#0", "security-keys#0"}


def test_min_fused_score_applies_before_the_default_engine_cuts_to_top_k(client: TestClient) -> None:
    everything = retrieve(client, useHybrid=True)
    minimum = sorted(fused(everything).values())[-3]  # three chunks reach it, barring ties
    body = retrieve(
        client,
        useHybrid=True,
        minFusedScore=minimum,
        engineName="default",
        rerank={"enabled": False, "topK": 5},
    )
    assert ids(body) == [r["id"] for r in everything["results"] if r["fusedScore"] >= minimum][:5]


def test_batch_refuses_the_same_combinations_in_the_item_slot(client: TestClient) -> None:
    response = client.post(
        BATCH,
        json={
            "requests": [
                {"query": QUERY, "grade": 0.0, "vectorWeight": 0.5},
                {
                    "query": QUERY,
                    "grade": 0.0,
                    "useHybrid": True,
                    "fusion": "rrf",
                    "minFusedScore": 0.2,
                    "rrfK": 20,
                },
            ]
        },
    )
    assert response.status_code == 200
    refused, answered = response.json()["results"]
    assert refused["status"] == 422 and refused["error"]["code"] == "validation_error"
    assert (
        refused["error"]["message"]
        == 'vectorWeight: applies only with searchMode "hybrid" and fusion "weighted"'
    )
    assert refused["error"]["details"]["errors"][0]["field"] == "vectorWeight"
    assert answered["status"] == 200
    assert all(r["fusedScore"] >= 0.2 for r in answered["response"]["results"])


def test_the_answer_says_which_keyword_scorer_ran(client: TestClient, service: Any) -> None:
    assert retrieve(client)["pipeline"]["keywordScorer"] is None
    hybrid = retrieve(client, useHybrid=True)
    assert hybrid["pipeline"]["keywordScorer"] == "bm25"
    # A store still waiting for migration 7's backfill is ranked by ts_rank_cd, and says so.
    with service.database.connection() as conn:
        conn.execute("UPDATE stores SET keyword_ready = false WHERE name = 'sample'")
        try:
            legacy = retrieve(client, useHybrid=True)
        finally:
            conn.execute("UPDATE stores SET keyword_ready = true WHERE name = 'sample'")
    assert legacy["pipeline"]["keywordScorer"] == "ts_rank_cd"
    assert {r["id"] for r in legacy["results"] if r["keywordScore"]} == {
        r["id"] for r in hybrid["results"] if r["keywordScore"]
    }
