"""No secret ever reaches a log line.

A whole session runs with a database password, API keys and provider keys configured: ingest, retrieve,
similarity search, a wrong key, a Lambda invocation (Powertools JSON logs on stdout), a database outage
and a cache outage. Every log record of every logger at DEBUG, and everything written to stdout and
stderr, is searched for each secret.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import uuid
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import EVENTS_DIR
from tests.servers import free_port

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"


def test_secrets_never_appear_in_logs_during_a_whole_session(
    own_runtime: Any,
    postgres_dsn: str,
    service_roles: Any,
    sample_store: Any,
    aws_env: None,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    from retrieval_core.api.app import create_app
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import health, retrieve
    from retrieval_core.container import get_service
    from tests.writing import TextDocument, ensure_store, write_documents

    password = f"pw-{uuid.uuid4().hex}"
    api_key = f"key-{uuid.uuid4().hex}"
    gemini_key = f"gem-{uuid.uuid4().hex}"
    openai_key = f"sk-{uuid.uuid4().hex}"
    secrets = {
        "database password": password,
        "API key": api_key,
        "Gemini key": gemini_key,
        "OpenAI key": openai_key,
    }

    # A login role with a password, a member of the write role: the DSN the service gets carries it, as a
    # production one would.
    role = f"svc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}' IN ROLE {service_roles.write}")
    dsn = make_conninfo(postgres_dsn, user=role, password=password)
    unreachable = make_conninfo(
        postgres_dsn, user=role, password=password, host="127.0.0.1", port=free_port()
    )
    assert conninfo_to_dict(dsn)["password"] == password

    caplog.set_level(logging.DEBUG)  # the root logger: every library's records reach the capture
    common = {
        "API_KEY_HASHES": hashlib.sha256(api_key.encode()).hexdigest(),
        "GEMINI_API_KEY": gemini_key,
        "OPENAI_API_KEY": openai_key,
        "DB_CONNECT_TIMEOUT_S": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "Test",
    }
    own_runtime(DATABASE_URL=dsn, **common)
    service = get_service()
    store = ensure_store(service, "secrets-session")
    write_documents(
        service, store, [TextDocument("note", "The espresso machine is descaled monthly.")], 1000, 100
    )
    with TestClient(create_app()) as client:
        headers = {"x-api-key": api_key}
        ok = client.post(
            RETRIEVE, json={"query": "espresso", "grade": 0.0, "store": "secrets-session"}, headers=headers
        )
        assert ok.status_code == 200
        vector = service.embedder.embed(["espresso"], "query")[0]
        assert client.post(SEARCH, json={"queryEmbedding": vector}, headers=headers).status_code == 200
        assert (
            client.post(
                RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": "nope"}
            ).status_code
            == 401
        )

    # The Lambda handler: Powertools logs JSON (with the Lambda context) to stdout.
    handler = build_handler(retrieve.router, health.router)
    # Powertools' logger does not propagate to the root logger, and its handler keeps the stdout it was
    # created with (possibly an earlier test's). Copy its output, in its own JSON format, here too.
    powertools_logger = logging.getLogger("retrieval-service")
    powertools_json = io.StringIO()
    copy = logging.StreamHandler(powertools_json)
    copy.setFormatter(powertools_logger.handlers[0].formatter)
    powertools_logger.addHandler(copy)
    powertools_logger.addHandler(caplog.handler)
    request.addfinalizer(lambda: powertools_logger.removeHandler(copy))
    request.addfinalizer(lambda: powertools_logger.removeHandler(caplog.handler))
    event = json.loads((EVENTS_DIR / "retrieve.json").read_text())
    event["headers"]["x-api-key"] = api_key
    context = SimpleNamespace(
        function_name="retrieve",
        memory_limit_in_mb=1024,
        aws_request_id="req-secrets",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:retrieve",
    )
    assert handler(event, context)["statusCode"] == 200

    # A database outage: the DSN with its password is what fails to connect.
    own_runtime(DATABASE_URL=unreachable, **common)
    with TestClient(create_app()) as client:
        down = client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": api_key})
        assert down.status_code == 500
    assert handler(event, context)["statusCode"] == 500

    # A cache outage: DynamoDB unreachable, served uncached.
    own_runtime(
        DATABASE_URL=dsn,
        CACHE_TABLE_NAME="retrieval-cache",
        DYNAMODB_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}",
        **common,
    )
    with TestClient(create_app()) as client:
        served = client.post(
            RETRIEVE, json={"query": "espresso", "grade": 0.0}, headers={"x-api-key": api_key}
        )
        assert served.status_code == 200 and served.headers["X-Cache"] == "miss"

    out, err = capfd.readouterr()
    logged = "\n".join(
        [record.getMessage() for record in caplog.records]
        + [repr(record.__dict__) for record in caplog.records]  # extras, args, exception info
        + [caplog.text, powertools_json.getvalue(), out, err]
    )
    assert "database unavailable" in logged and "serving uncached" in logged  # the failures were logged
    assert '"message":"request served"' in powertools_json.getvalue()  # the Powertools JSON was captured
    assert '"function_request_id":"req-secrets"' in powertools_json.getvalue()
    for what, secret in secrets.items():
        assert secret not in logged, f"the {what} appears in the logs"
