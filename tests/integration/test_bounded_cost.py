"""Every request has a bounded cost, on the real embedded PostgreSQL through the HTTP app.

The issue's attack was a hybrid query of 1,600 negated words (7,323 characters): it ran into the 15 s
statement timeout, and eight at once held the whole pool while ordinary retrieves failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from bench.query_cost import negated_terms
from retrieval_core.schemas.search_options import MAX_TOP_K

RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"
HEALTH = "/api/v1/health"
ORDINARY_QUERIES = [
    "How does Kubernetes decide which node runs a pod?",
    "espresso machine cleaning",
    "when are air filters replaced",
    "hybrid search fusion",
]
# Distinct real words, so every one is a keyword term with a lexeme.
WORDS = [
    "kubernetes",
    "scheduler",
    "node",
    "pod",
    "espresso",
    "machine",
    "descale",
    "milk",
    "frother",
    "filter",
    "pressure",
    "unit",
    "label",
    "hybrid",
    "keyword",
    "vector",
    "fusion",
    "rank",
    "reciprocal",
    "badge",
    "visitor",
    "desk",
    "autoscaling",
    "probe",
    "liveness",
    "readiness",
    "container",
    "cluster",
    "replica",
    "deploy",
    "rollout",
    "service",
    "ingress",
    "volume",
    "secret",
    "config",
]


def app_client() -> TestClient:
    from retrieval_core.api.app import create_app

    return TestClient(create_app())


def ordinary(query: str) -> dict[str, Any]:
    return {"query": query, "grade": 0.0, "similarityTopK": 10, "cacheTTLms": 0}


def expensive_bodies(store: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The costliest valid requests we could construct, and one just below the 'expensive' line.

    Also bench.load's attackers (on its own store).
    """
    long_text = " ".join(WORDS[i % len(WORDS)] + str(i // len(WORDS) or "") for i in range(1400))[:8000]
    deep: dict[str, Any] = {"grade": 0.0, "cacheTTLms": 0, "useHybrid": True, "similarityTopK": MAX_TOP_K}
    if store is not None:
        deep["store"] = store
    mmr = {"rerank": {"enabled": True, "strategy": "mmr", "topK": MAX_TOP_K}}
    long_hybrid = {"query": long_text, **deep, **mmr}
    return [
        (RETRIEVE, {"query": negated_terms(1600), **deep, **mmr}),
        (RETRIEVE, long_hybrid),
        (BATCH, {"requests": [long_hybrid] * 20}),
        # Not expensive by cost.py (16 terms, MMR 20 deep): the dearest request that runs unlimited.
        (
            RETRIEVE,
            {
                "query": " ".join(WORDS[:16]),
                **deep,
                "rerank": {"enabled": True, "strategy": "mmr", "topK": 20},
            },
        ),
    ]


@pytest.fixture()
def small_timeouts(own_runtime: Any, write_dsn: str, sample_store: Any) -> Iterator[Any]:
    from retrieval_core.container import get_service

    own_runtime(
        DATABASE_URL=write_dsn,
        SEARCH_STATEMENT_TIMEOUT_MS="1500",
        EXPENSIVE_SEARCH_STATEMENT_TIMEOUT_MS="300",
        DB_STATEMENT_TIMEOUT_MS="15000",
    )
    yield get_service()


def test_the_negated_terms_attack_is_answered_by_the_vector_search_at_once(client: TestClient) -> None:
    body = {"query": negated_terms(1600), "grade": 0.0, "useHybrid": True, "cacheTTLms": 0}
    started = time.perf_counter()
    response = client.post(RETRIEVE, json=body)
    assert response.status_code == 200, response.text
    assert time.perf_counter() - started < 2.0
    answer = response.json()
    assert answer["results"] and all(r["keywordScore"] is None for r in answer["results"])
    assert answer["pipeline"]["hybrid"] is True
    assert any("no word to search for by keyword" in w for w in answer["pipeline"]["warnings"])
    dense = client.post(RETRIEVE, json={**body, "useHybrid": False}).json()
    assert [r["id"] for r in answer["results"]] == [r["id"] for r in dense["results"]]


def test_a_query_of_stopwords_only_skips_the_keyword_scan_with_a_warning(client: TestClient) -> None:
    body = {"query": "the of and to it", "grade": 0.0, "useHybrid": True, "cacheTTLms": 0}
    answer = client.post(RETRIEVE, json=body).json()
    assert any("no word to search for by keyword" in w for w in answer["pipeline"]["warnings"])
    assert answer["results"]
    # Stopwords beside an exclusion would match every chunk without the excluded word: not sent either.
    excluding = client.post(RETRIEVE, json={**body, "query": "the -espresso"}).json()
    assert any("no word to search for by keyword" in w for w in excluding["pipeline"]["warnings"])
    assert all(r["keywordScore"] is None for r in excluding["results"])
    # A query with a real word still searches by keyword.
    real = client.post(RETRIEVE, json={**body, "query": "the espresso"}).json()
    assert real["pipeline"]["warnings"] == []
    assert any(r["keywordScore"] for r in real["results"])


def test_a_long_query_is_cut_to_its_first_64_keyword_terms_says_so_and_is_cached(client: TestClient) -> None:
    query = " ".join(f"{WORDS[i % len(WORDS)]}" for i in range(100))
    body = {"query": query, "grade": 0.0, "useHybrid": True, "cacheTTLms": 60_000}
    first = client.post(RETRIEVE, json=body)
    assert first.json()["pipeline"]["warnings"] == [
        "the keyword search used the first 64 terms of the query (36 more were left out)"
    ]
    # A note on the query, not a degraded answer: the same request is answered from the cache.
    again = client.post(RETRIEVE, json=body)
    assert (first.headers["X-Cache"], again.headers["X-Cache"]) == ("miss", "hit")
    assert again.json() == first.json()


def test_a_search_runs_under_its_own_statement_timeout_shorter_for_the_expensive_kinds(
    small_timeouts: Any, postgres_dsn: str
) -> None:
    cheap = ordinary("espresso machine")
    dear = {**cheap, "query": " ".join(WORDS[:20]), "useHybrid": True}  # 20 keyword terms: expensive
    with app_client() as client, psycopg.connect(postgres_dsn) as locker:
        assert client.post(RETRIEVE, json=cheap).status_code == 200  # warm: the model is loaded
        locker.execute("LOCK TABLE chunks IN ACCESS EXCLUSIVE MODE")  # every search now waits
        timings = {}
        for name, body in (("cheap", cheap), ("dear", dear)):
            started = time.perf_counter()
            response = client.post(RETRIEVE, json=body)
            timings[name] = time.perf_counter() - started
            assert response.status_code == 503, response.text
            assert response.json()["error"]["code"] == "query_timeout"
            assert response.headers["Retry-After"] == "1"
        locker.rollback()
        # SEARCH_STATEMENT_TIMEOUT_MS (1.5 s), not DB_STATEMENT_TIMEOUT_MS (15 s); expensive: 0.3 s.
        assert 1.4 < timings["cheap"] < 5.0, timings
        assert timings["dear"] < 1.2, timings
        assert client.post(RETRIEVE, json=cheap).status_code == 200


def test_a_request_that_finds_every_connection_lent_out_gets_overloaded_in_well_under_a_second(
    own_runtime: Any, write_dsn: str, sample_store: Any
) -> None:
    from retrieval_core.container import get_service

    # A long connect timeout: the wait for a lent-out connection is DB_POOL_WAIT_MS, not that.
    own_runtime(DATABASE_URL=write_dsn, DB_POOL_MIN_SIZE="1", DB_POOL_MAX_SIZE="1", DB_CONNECT_TIMEOUT_S="10")
    service = get_service()
    with app_client() as client:
        body = ordinary("espresso machine")
        assert client.post(RETRIEVE, json=body).status_code == 200
        with service.database.connection():  # the only connection, lent out
            started = time.perf_counter()
            response = client.post(RETRIEVE, json=body)
            elapsed = time.perf_counter() - started
        assert response.status_code == 503 and response.json()["error"]["code"] == "overloaded"
        assert response.headers["Retry-After"] == "1"
        assert elapsed < 0.9, elapsed


def test_eight_expensive_clients_never_fail_eight_ordinary_ones(small_timeouts: Any) -> None:
    attacks = expensive_bodies()
    ordinary_failures: list[str] = []
    ordinary_ok = [0]
    attack_answers: dict[str, int] = {}
    lock = threading.Lock()
    stop = threading.Event()

    with app_client() as client:
        for query in ORDINARY_QUERIES:  # warm-up: the model is loaded before the clock starts
            assert client.post(RETRIEVE, json=ordinary(query)).status_code == 200

        def attacker(worker: int) -> None:
            path, body = attacks[worker % len(attacks)]
            while not stop.is_set():
                response = client.post(path, json=body)
                code = response.json()["error"]["code"] if response.status_code != 200 else "ok"
                with lock:
                    attack_answers[f"{response.status_code} {code}"] = (
                        attack_answers.get(f"{response.status_code} {code}", 0) + 1
                    )

        def neighbour(worker: int) -> None:
            index = worker
            while not stop.is_set():
                response = client.post(
                    RETRIEVE, json=ordinary(ORDINARY_QUERIES[index % len(ORDINARY_QUERIES)])
                )
                index += 1
                with lock:
                    if response.status_code == 200 and response.json()["results"]:
                        ordinary_ok[0] += 1
                    else:
                        ordinary_failures.append(f"{response.status_code}: {response.text[:200]}")

        threads = [threading.Thread(target=attacker, args=(i,)) for i in range(8)]
        threads += [threading.Thread(target=neighbour, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(8)
        stop.set()
        for thread in threads:
            thread.join(60)
        health = client.get(HEALTH)

    assert ordinary_failures == [], ordinary_failures[:5]
    assert ordinary_ok[0] > 16
    # The attackers are answered too, or told to come back: never a 500.
    assert set(attack_answers) <= {"200 ok", "503 overloaded", "503 query_timeout"}, attack_answers
    assert attack_answers.get("200 ok", 0) > 0
    # The expensive slots engaged: some attackers were told to come back (ordinary clients never were).
    assert attack_answers.get("503 overloaded", 0) > 0
    assert health.status_code == 200, health.text
