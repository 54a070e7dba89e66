"""GET and HEAD /api/v1/health, and what searches answer when a check would fail.

Every case runs on a real embedded PostgreSQL: the session's (migrated by the service), or one of the
test's own without a schema, with an old one, stopped, or with every pooled connection held.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.conftest import EVENTS_DIR
from tests.fakes.openai_embeddings import FakeOpenAIEmbeddings
from tests.roles import write_role_dsn
from tests.servers import free_port

HEALTH = "/api/v1/health"
RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"
STORES = "/api/v1/stores"
SECRET = "pr0be-s3cret"


def app_client() -> TestClient:
    from retrieval_core.api.app import create_app

    return TestClient(create_app())


def statuses(body: dict[str, Any]) -> dict[str, str]:
    return {name: check["status"] for name, check in body["checks"].items()}


def apply_migrations(dsn: str, last: int) -> None:
    """Migrations 1..`last` only, recorded the way migrate() records them: a database left behind."""
    from retrieval_core.db.migrations.steps import MIGRATIONS

    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, ddl in MIGRATIONS[:last]:
            conn.execute(ddl.encode())
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))


def assert_schema_not_ready(response: Any, found: int | None) -> None:
    from retrieval_core.db.migrations.steps import SCHEMA_VERSION

    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "30"
    error = response.json()["error"]
    assert error["code"] == "schema_not_ready"
    assert "retrieval migrate" in error["message"]
    assert error["details"] == {"schemaVersion": found, "requiredSchemaVersion": SCHEMA_VERSION}
    assert "SQLSTATE" not in response.text


def test_health_on_a_ready_database_reports_each_check_and_head_answers_without_a_body(
    client: TestClient, service: Any
) -> None:
    from retrieval_core.db.migrations.steps import SCHEMA_VERSION

    service.embedder.embed(["warm"], "query")  # as `retrieval serve` does at start
    response = client.get(HEALTH)
    assert response.status_code == 200
    body = response.json()
    pgvector = body["checks"]["pgvector"]["version"]
    assert body == {
        "status": "ok",
        "checks": {
            "database": {"status": "ok"},
            "schema": {"status": "ok", "version": SCHEMA_VERSION, "requiredVersion": SCHEMA_VERSION},
            "pgvector": {"status": "ok", "version": pgvector},
            "embedder": {"status": "ok", "provider": "local", "model": "all-MiniLM-L6-v2", "loaded": True},
        },
    }
    major, minor = map(int, pgvector.split(".")[:2])
    assert (major, minor) >= (0, 8)

    head = client.head(HEALTH)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == "application/json"


def test_health_is_documented_in_the_openapi_schema(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert {"get", "head"} <= set(schema["paths"][HEALTH])
    responses = schema["paths"][HEALTH]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/HealthResponse"
    }
    assert "503" in responses
    checks = schema["components"]["schemas"]["HealthChecks"]["properties"]
    assert set(checks) == {"database", "schema", "pgvector", "embedder"}
    assert "requiredVersion" in schema["components"]["schemas"]["SchemaCheck"]["properties"]


def test_without_a_schema_health_and_searches_say_to_migrate_then_heal_without_a_restart(
    own_runtime: Any, private_postgres: Any
) -> None:
    from retrieval_core.db.migrations.runner import migrate
    from retrieval_core.db.migrations.steps import SCHEMA_VERSION

    dsn = private_postgres.get_uri()
    own_runtime(DATABASE_URL=dsn, AUTO_MIGRATE="false")
    with app_client() as client:
        health = client.get(HEALTH)
        assert health.status_code == 503
        body = health.json()
        assert body["status"] == "degraded"
        assert statuses(body) == {
            "database": "ok",
            "schema": "failed",
            "pgvector": "failed",
            "embedder": "ok",
        }
        schema = body["checks"]["schema"]
        assert schema["requiredVersion"] == SCHEMA_VERSION and "version" not in schema
        assert schema["reason"].startswith("no retrieval schema: run `retrieval migrate`")
        assert "not installed" in body["checks"]["pgvector"]["reason"]
        assert client.head(HEALTH).status_code == 503

        answers = [
            client.post(RETRIEVE, json={"query": "espresso", "grade": 0.0}),
            client.post(SEARCH, json={"queryEmbedding": [0.1] * 384}),
            client.put(f"{STORES}/handbook/documents/visitors", json={"text": "Visitors sign in."}),
            client.get(STORES),
        ]
        for answer in answers:
            assert_schema_not_ready(answer, found=None)
        for response in (health, *answers):
            assert "SQLSTATE" not in response.text and dsn not in response.text

        migrate(dsn)  # what the deploy's MigrateFunction does, a minute later

        health = client.get(HEALTH)
        assert health.status_code == 200, health.text
        assert health.json()["checks"]["schema"]["version"] == SCHEMA_VERSION
        assert client.head(HEALTH).status_code == 200
        assert client.post(RETRIEVE, json={"query": "espresso", "grade": 0.0}).status_code == 404
        # Vectors written and read back (MMR reads stored embeddings) on connections of the new schema.
        assert client.put(f"{STORES}/handbook", json={"displayName": "Handbook"}).status_code == 201
        text = "Visitors sign in at the front desk and wear a badge."
        put = client.put(f"{STORES}/handbook/documents/visitors", json={"text": text})
        assert put.status_code == 201, put.text
        found = client.post(
            RETRIEVE,
            json={"query": "visitor badge", "grade": 0.0, "store": "handbook", "rerank": {"strategy": "mmr"}},
        )
        assert found.status_code == 200, found.text
        assert found.json()["results"][0]["id"] == "visitors#0"


def test_an_old_schema_is_reported_with_both_versions_and_refused_until_migrated(
    own_runtime: Any, private_postgres: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.cli.main import main
    from retrieval_core.db.migrations.steps import SCHEMA_VERSION

    dsn = private_postgres.get_uri()
    apply_migrations(dsn, 3)
    own_runtime(DATABASE_URL=dsn, AUTO_MIGRATE="false")
    with app_client() as client:
        health = client.get(HEALTH)
        assert health.status_code == 503
        body = health.json()
        assert statuses(body) == {"database": "ok", "schema": "failed", "pgvector": "ok", "embedder": "ok"}
        schema = body["checks"]["schema"]
        assert (schema["version"], schema["requiredVersion"]) == (3, SCHEMA_VERSION)
        assert f"version 3, older than this code's {SCHEMA_VERSION}" in schema["reason"]
        assert "retrieval migrate" in schema["reason"]

        assert_schema_not_ready(
            client.put(f"{STORES}/handbook/documents/visitors", json={"text": "Visitors sign in."}), found=3
        )
        assert_schema_not_ready(client.post(SEARCH, json={"queryEmbedding": [0.1] * 384}), found=3)

        # The advice works with AUTO_MIGRATE off too: the command migrates before building anything.
        assert main(["migrate"]) == 0
        assert (
            capsys.readouterr().out.strip()
            == f"applied migrations {', '.join(str(v) for v in range(4, SCHEMA_VERSION + 1))}: "
            f"schema version {SCHEMA_VERSION}, pgvector 0.8.5"
        )
        assert client.get(HEALTH).status_code == 200
        assert client.post(SEARCH, json={"queryEmbedding": [0.1] * 384}).status_code == 404


def test_a_table_or_column_missing_under_a_running_service_is_schema_not_ready_not_a_500(
    own_runtime: Any, private_postgres: Any
) -> None:
    dsn = private_postgres.get_uri()
    own_runtime(DATABASE_URL=write_role_dsn(dsn), AUTO_MIGRATE="false")
    with app_client() as client:
        assert client.put(f"{STORES}/handbook", json={"displayName": "Handbook"}).status_code == 201
        # Someone restores an old dump under the running service.
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE documents DROP COLUMN caller_metadata")
        response = client.put(f"{STORES}/handbook/documents/visitors", json={"text": "Visitors sign in."})
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "schema_not_ready"
        assert "lacks a table or column" in error["message"] and "retrieval migrate" in error["message"]
        assert "SQLSTATE" not in response.text


def test_database_down_fails_health_quickly_skips_what_needs_it_and_recovers(
    own_runtime: Any, private_postgres: Any
) -> None:
    from retrieval_core.container import get_service
    from retrieval_core.health.checks import PROBE_TIMEOUT_S

    server = private_postgres
    # A long connect timeout: a probe must not wait that long for a connection.
    own_runtime(
        DATABASE_URL=write_role_dsn(server.get_uri()), AUTO_MIGRATE="false", DB_CONNECT_TIMEOUT_S="30"
    )
    get_service()
    with app_client() as client:
        assert client.get(HEALTH).status_code == 200
        server.stop()
        try:
            started = time.monotonic()
            health = client.get(HEALTH)
            elapsed = time.monotonic() - started
            assert health.status_code == 503
            assert elapsed < PROBE_TIMEOUT_S + 3, elapsed
            body = health.json()
            assert body["status"] == "degraded"
            assert statuses(body) == {
                "database": "failed",
                "schema": "skipped",
                "pgvector": "skipped",
                "embedder": "ok",
            }
            assert "could not reach PostgreSQL" in body["checks"]["database"]["reason"]
            assert body["checks"]["schema"]["reason"] == "not checked: the database did not answer"
            assert client.head(HEALTH).status_code == 503
        finally:
            server.ensure_postgres_running()
        # The same process: the pool reconnects (with its own backoff) and health turns ok again.
        for _ in range(30):
            if client.get(HEALTH).status_code == 200:
                break
            threading.Event().wait(0.5)
        assert client.get(HEALTH).json()["status"] == "ok"


def test_health_of_an_unreachable_host_names_no_host_user_or_password(own_runtime: Any) -> None:
    own_runtime(DATABASE_URL=f"postgresql://svc_user:{SECRET}@127.0.0.1:{free_port()}/rag")
    with app_client() as client:
        health = client.get(HEALTH)
    assert health.status_code == 503
    assert statuses(health.json())["database"] == "failed"
    for leak in (SECRET, "svc_user", "127.0.0.1", "postgresql://"):
        assert leak not in health.text


@pytest.fixture()
def one_connection_pool(own_runtime: Any, write_dsn: str, sample_store: Any) -> Any:
    """The service on a pool of one connection, waiting at most a second for it."""
    from retrieval_core.container import get_service

    own_runtime(DATABASE_URL=write_dsn, DB_POOL_MIN_SIZE="1", DB_POOL_MAX_SIZE="1", DB_CONNECT_TIMEOUT_S="1")
    return get_service()


def test_a_saturated_pool_is_overloaded_in_health_and_searches_never_unreachable(
    one_connection_pool: Any,
) -> None:
    service = one_connection_pool
    body = {"query": "espresso machine", "grade": 0.0, "cacheTTLms": 0}
    with app_client() as client:
        with service.database.connection():  # the only connection, lent out
            health = client.get(HEALTH)
            search = client.post(RETRIEVE, json=body)
            head = client.head(HEALTH)
        assert health.status_code == 503 and head.status_code == 503
        assert health.json()["status"] == "overloaded"
        assert statuses(health.json()) == {
            "database": "overloaded",
            "schema": "skipped",
            "pgvector": "skipped",
            "embedder": "ok",
        }
        assert "busy" in health.json()["checks"]["database"]["reason"]
        assert search.status_code == 503, search.text
        assert search.json()["error"]["code"] == "overloaded"
        assert search.headers["Retry-After"] == "1"

        # Given back: both answer again.
        assert client.get(HEALTH).status_code == 200
        assert client.post(RETRIEVE, json=body).status_code == 200


def test_a_remote_embedder_without_its_key_fails_health_with_what_to_set(
    own_runtime: Any, sample_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "EMBEDDING_API_KEY_SECRET_ARN"):
        monkeypatch.delenv(name, raising=False)
    own_runtime(EMBEDDING_PROVIDER="openai")
    with app_client() as client:
        health = client.get(HEALTH)
    assert health.status_code == 503
    body = health.json()
    assert body["status"] == "degraded"
    assert statuses(body) == {"database": "ok", "schema": "ok", "pgvector": "ok", "embedder": "failed"}
    embedder = body["checks"]["embedder"]
    assert (embedder["provider"], embedder["model"]) == ("openai", "text-embedding-3-small")
    assert "OPENAI_API_KEY" in embedder["reason"] and "EMBEDDING_API_KEY_SECRET_ARN" in embedder["reason"]


def test_a_configured_remote_embedder_is_ok_and_probes_never_call_it(
    own_runtime: Any, sample_store: Any
) -> None:
    key = "sk-health-0123456789"
    with FakeOpenAIEmbeddings(dimension=384, api_key=key) as fake:
        own_runtime(EMBEDDING_PROVIDER="openai", OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=key)
        with app_client() as client:
            answers = [client.get(HEALTH) for _ in range(3)] + [client.head(HEALTH)]
        assert [a.status_code for a in answers] == [200] * 4
        assert answers[0].json()["checks"]["embedder"] == {
            "status": "ok",
            "provider": "openai",
            "model": "text-embedding-3-small",
        }
        assert key not in answers[0].text
        assert fake.requests == []  # no embedding call, paid or not


# --- Lambda: what a 5xx does to the container's connection ---------------------------------------


@pytest.fixture()
def lambda_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The retrieve function's handler (retrieve and health routes) on Lambda's single connection."""
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import health, retrieve

    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Test")
    handler = build_handler(retrieve.router, health.router)
    # Set only now: at handler build time it would move the core's loggers off the root logger.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "retrieval-test")
    context = SimpleNamespace(
        function_name="retrieval-test",
        memory_limit_in_mb=1024,
        aws_request_id="req",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:retrieval-test",
    )
    yield lambda event: handler(event, context)


def backend_pids(dsn: str) -> set[int]:
    """Server processes of client connections other than this query's own."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return {row[0] for row in rows}


def test_lambda_keeps_its_connection_when_the_schema_is_behind(
    own_runtime: Any, private_postgres: Any, lambda_handler: Any
) -> None:
    dsn = private_postgres.get_uri()
    own_runtime(DATABASE_URL=dsn, AUTO_MIGRATE="false")
    event = json.loads((EVENTS_DIR / "retrieve.json").read_text())
    health_event = json.loads((EVENTS_DIR / "health.json").read_text())
    head_event = json.loads((EVENTS_DIR / "health-head.json").read_text())

    first = lambda_handler(event)
    assert first["statusCode"] == 503 and json.loads(first["body"])["error"]["code"] == "schema_not_ready"
    pids = backend_pids(dsn)
    assert len(pids) == 1
    health = lambda_handler(health_event)
    assert health["statusCode"] == 503
    assert json.loads(health["body"])["checks"]["schema"]["status"] == "failed"
    head = lambda_handler(head_event)
    assert head["statusCode"] == 503 and head["body"] == ""
    assert lambda_handler(event)["statusCode"] == 503
    # Not a database failure: the container kept its one connection instead of reconnecting each time.
    assert backend_pids(dsn) == pids
