"""Faults. PostgreSQL stopped mid-run, DynamoDB unreachable.

(The single-request restart case is test_api.py::test_service_recovers_when_postgres_restarts.
These add requests in flight while PostgreSQL stops, the Lambda handler's path, and the cache
outage through the runtime's own wiring. Reranker hangs and Gemini 429/500 belong with those
features.)
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.observability import metrics
from tests.conftest import EVENTS_DIR
from tests.roles import write_role_dsn
from tests.servers import free_port

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"
HEALTH = "/api/v1/health"


def wait_until(condition: Any, what: str) -> None:
    # A guard against hanging the suite, not a timing assertion: the bound is far above any normal run.
    done = threading.Event()
    for _ in range(12_000):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError(f"gave up waiting for {what}")


def assert_descriptive_database_500(response: Any, dsn: str) -> None:
    assert response.status_code == 500, response.text
    error = response.json()["error"]
    assert error["code"] == "database_unavailable"
    assert error["message"].startswith(("database unavailable while", "database error while"))
    assert error["details"]["operation"]
    for leak in (dsn, "postgresql://", "Traceback", "psycopg"):
        assert leak not in response.text


def test_fault_postgres_stopped_mid_run_with_requests_in_flight_then_recovers(
    own_runtime: Any, private_postgres: Any
) -> None:
    from retrieval_core.api.app import create_app
    from retrieval_core.container import get_service
    from retrieval_core.documents.sample import load_sample_corpus

    server = private_postgres
    dsn = write_role_dsn(server.get_uri())
    own_runtime(DATABASE_URL=dsn, AUTO_MIGRATE="false", DB_CONNECT_TIMEOUT_S="1", DB_POOL_MAX_SIZE="4")
    service = get_service()
    load_sample_corpus(service)
    vector = service.embedder.embed(["espresso machine"], "query")[0]
    bodies = [
        (RETRIEVE, {"query": "espresso machine", "grade": 0.0, "cacheTTLms": 0}),
        (SEARCH, {"queryEmbedding": vector, "cacheTTLms": 0}),
    ]
    outcomes: Counter[str] = Counter()
    stop = threading.Event()
    failures: list[str] = []

    with TestClient(create_app()) as client:

        def hammer(path: str, body: dict[str, Any]) -> None:
            while not stop.is_set():
                response = client.post(path, json=body)
                if response.status_code == 200:
                    outcomes["ok"] += 1
                elif (
                    response.status_code == 500 and response.json()["error"]["code"] == "database_unavailable"
                ):
                    outcomes["database_unavailable"] += 1
                    try:
                        assert_descriptive_database_500(response, dsn)
                    except AssertionError as exc:
                        failures.append(str(exc))
                else:
                    failures.append(f"{path}: {response.status_code} {response.text}")

        threads = [
            threading.Thread(target=hammer, args=pair, daemon=True) for pair in bodies for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        try:
            wait_until(lambda: outcomes["ok"] >= 10 or failures, "successful requests")
            server.stop()  # mid-run, with requests in flight
            wait_until(lambda: outcomes["database_unavailable"] >= 4 or failures, "database errors")
            health = client.get(HEALTH).json()
            assert health["status"] == "degraded" and health["checks"]["database"]["status"] == "failed"
        finally:
            server.ensure_postgres_running()
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
        assert not failures, failures[:3]

        # The same process and app, no restart: the next requests succeed.
        for path, body in bodies:
            response = client.post(path, json=body)
            assert response.status_code == 200, response.text
            assert response.json()["results"][0]["id"] == "coffee-machine#0"
        assert client.get(HEALTH).status_code == 200


def test_fault_postgres_restart_lambda_handler_recovers_in_the_same_container(
    own_runtime: Any, private_postgres: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import chunks, health, retrieve
    from retrieval_core.container import get_service
    from retrieval_core.db.connection import SingleConnection
    from retrieval_core.documents.sample import load_sample_corpus

    server = private_postgres
    dsn = write_role_dsn(server.get_uri())
    own_runtime(
        DATABASE_URL=dsn, AUTO_MIGRATE="false", DB_CONNECT_TIMEOUT_S="1", POWERTOOLS_METRICS_NAMESPACE="Test"
    )
    handler = build_handler(retrieve.router, chunks.router, health.router)
    # Set only now: at handler build time it would move the core's loggers off the root logger.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "retrieval-test")
    load_sample_corpus(get_service())
    assert isinstance(get_service().database, SingleConnection)  # one connection per container
    context = SimpleNamespace(
        function_name="retrieval-test",
        memory_limit_in_mb=1024,
        aws_request_id="req",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:retrieval-test",
    )
    event = json.loads((EVENTS_DIR / "retrieve.json").read_text())
    event["body"] = json.dumps({"query": "espresso machine", "grade": 0.0, "cacheTTLms": 0})
    health_event = json.loads((EVENTS_DIR / "health.json").read_text())

    assert handler(event, context)["statusCode"] == 200
    server.stop()
    down = handler(event, context)
    assert_descriptive_database_500(SimpleNamespace(**_as_response(down)), dsn)
    assert handler(health_event, context)["statusCode"] == 503
    server.ensure_postgres_running()
    up = handler(event, context)
    assert up["statusCode"] == 200
    assert json.loads(up["body"])["results"][0]["id"] == "coffee-machine#0"
    assert handler(health_event, context)["statusCode"] == 200


def _as_response(lambda_response: dict[str, Any]) -> dict[str, Any]:
    body = lambda_response["body"]
    return {"status_code": lambda_response["statusCode"], "text": body, "json": lambda: json.loads(body)}


def test_fault_dynamodb_unreachable_searches_are_served_uncached(
    own_runtime: Any, write_dsn: str, sample_store: Any, aws_env: None, caplog: pytest.LogCaptureFixture
) -> None:
    from retrieval_core.api.app import create_app
    from retrieval_core.container import get_service

    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    own_runtime(DATABASE_URL=write_dsn, CACHE_TABLE_NAME="retrieval-cache", DYNAMODB_ENDPOINT_URL=closed)
    assert get_service().cache is not None and get_service().cache.shared
    vector = get_service().embedder.embed(["espresso machine"], "query")[0]
    errors_before = metrics.counters["CacheError"]
    with TestClient(create_app()) as client:
        for _ in range(2):  # the second is not a hit either: nothing could be stored
            for path, body in (
                (RETRIEVE, {"query": "espresso machine", "grade": 0.0}),
                (SEARCH, {"queryEmbedding": vector}),
            ):
                response = client.post(path, json=body)
                assert response.status_code == 200, response.text
                assert response.headers["X-Cache"] == "miss"
                assert response.json()["results"][0]["id"] == "coffee-machine#0"
    assert metrics.counters["CacheError"] > errors_before
    assert "serving uncached" in caplog.text
