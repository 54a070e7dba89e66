"""Grants in Lambda: grants from the JWT authorizer's claims, the queue bound to its
stores, and `retrieval make-api-key`.

Events are API Gateway v2 events as API Gateway hands them to the function after its JWT authorizer ran;
the handler is the one functions/retrieve builds (Mangum, Powertools). The queue runs on moto_server SQS.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import EVENTS_DIR, REPO_ROOT
from tests.integration.test_grants import API_KEYS, FULL, OTHER, other_store  # noqa: F401 (other_store: a fixture)
from tests.integration.test_queue import (  # noqa: F401 (queue_handler, queues: fixtures)
    Queues,
    acknowledge,
    drain,
    invoke,
    job,
    queue_depth,
    queue_handler,
    queues,
    receive_event,
    send,
)

CONTEXT = SimpleNamespace(
    function_name="retrieve",
    memory_limit_in_mb=1024,
    aws_request_id="req-jwt",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:retrieve",
)
UNAUTHORIZED = {"error": {"code": "unauthorized", "message": "missing or invalid API key", "details": {}}}


@pytest.fixture()
def handler(sample_store: Any, configure: Any, request: pytest.FixtureRequest) -> Any:
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import chunks, retrieve, stores

    request.getfixturevalue("other_store")
    configure(POWERTOOLS_METRICS_NAMESPACE="Test", JWT_AUTH="true")
    return build_handler(retrieve.router, chunks.router, stores.router)


def event_with(claims: dict[str, Any] | None, store: str | None = "sample", **headers: str) -> dict[str, Any]:
    """events/retrieve.json as API Gateway sends it once its JWT authorizer accepted a token with `claims`."""
    event = copy.deepcopy(json.loads((EVENTS_DIR / "retrieve.json").read_text()))
    body = json.loads(event["body"])
    body.pop("store")
    if store is not None:
        body["store"] = store
    event["body"] = json.dumps(body)
    event["headers"].pop("content-length")
    event["headers"].update(headers)
    if claims is not None:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


def answer(handler: Any, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = handler(event, CONTEXT)
    return response["statusCode"], json.loads(response["body"])


def claims(scope: str, stores: Any) -> dict[str, Any]:
    # Cognito-style access token claims, as the authorizer passes them (every value a string).
    return {
        "sub": "7d1c-user",
        "client_id": "rag-app",
        "scope": scope,
        "retrieval_stores": stores,
        "exp": "1893456000",
    }


@pytest.mark.parametrize(
    "stores", ["sample", '["sample", "grants-other"]', "[sample grants-other]", "*", "sample,grants-other"]
)
def test_jwt_claims_grant_the_stores_they_name(handler: Any, stores: str) -> None:
    status, body = answer(handler, event_with(claims("openid retrieval:read", stores)))
    assert status == 200, body
    assert body["store"] == "sample" and body["results"]


def test_jwt_store_outside_the_claim_is_a_404_and_default_store_is_checked(handler: Any) -> None:
    token = claims("retrieval:read", OTHER)
    outside = answer(handler, event_with(token, "sample"))
    default = answer(handler, event_with(token, None))
    assert (
        outside
        == default
        == (
            404,
            {
                "error": {
                    "code": "store_not_found",
                    "message": "store 'sample' not found",
                    "details": {"store": "sample"},
                }
            },
        )
    )
    status, body = answer(handler, event_with(token, OTHER))
    assert status == 200 and body["store"] == OTHER


def test_jwt_without_the_read_scope_is_a_403(handler: Any) -> None:
    status, body = answer(handler, event_with(claims("retrieval:write retrieval:admin", "*")))
    assert status == 403 and body["error"]["details"] == {"requiredScope": "read"}
    # A token scope named like ours but not ours grants nothing.
    assert answer(handler, event_with(claims("read retrieval:reader", "*")))[0] == 403


def test_jwt_auth_without_claims_is_a_401(handler: Any) -> None:
    assert answer(handler, event_with(None)) == (401, UNAUTHORIZED)
    assert answer(handler, event_with({})) == (401, UNAUTHORIZED)


def test_an_api_key_takes_precedence_over_the_token(handler: Any, configure: Any) -> None:
    configure(API_KEYS=json.dumps(API_KEYS))
    # The key's grant (every store) applies, whatever the token says.
    assert (
        answer(handler, event_with(claims("retrieval:read", OTHER), "sample", **{"x-api-key": FULL}))[0]
        == 200
    )
    assert answer(handler, event_with(claims("retrieval:read", "*"), "sample", **{"x-api-key": "wrong"})) == (
        401,
        UNAUTHORIZED,
    )
    # Without a key, the token decides, even though keys are configured.
    assert answer(handler, event_with(claims("retrieval:read", "sample")))[0] == 200


def test_claims_count_only_under_jwt_auth(handler: Any, configure: Any) -> None:
    configure(JWT_AUTH="false", API_KEYS=json.dumps(API_KEYS))
    # Keys configured and JWT off: a token's claims do not replace the key.
    assert answer(handler, event_with(claims("retrieval:read", "*"))) == (401, UNAUTHORIZED)


# The queue function: the request queue is bound to QUEUE_STORES.


@pytest.fixture()
def queue(request: pytest.FixtureRequest) -> tuple[Any, Queues]:
    """test_queue's handler (built on its first invocation) and queues, beside the second store."""
    request.getfixturevalue("other_store")
    return request.getfixturevalue("queue_handler"), request.getfixturevalue("queues")


def test_a_queued_job_outside_the_queue_stores_gets_a_404_reply_and_is_acknowledged(
    queue: tuple[Any, Queues], configure: Any
) -> None:
    handle, sqs = queue
    configure(QUEUE_STORES="sample")
    send(
        sqs,
        [
            job("in-sample"),
            job("in-other", store=OTHER),
            job("nowhere", store="grants-xyzzy"),
        ],
    )
    event = receive_event(sqs)
    response = invoke(handle, event)
    acknowledge(sqs, event, response)
    assert response["batchItemFailures"] == []
    assert queue_depth(sqs, sqs.requests) == 0
    replies = {r.body["requestId"]: r.body for r in drain(sqs, sqs.results)}
    assert replies["in-sample"]["status"] == "ok"
    assert replies["in-other"] == {
        "requestId": "in-other",
        "status": "error",
        "error": {
            "code": "store_not_found",
            "message": f"store '{OTHER}' not found",
            "details": {"store": OTHER},
        },
    }
    assert replies["nowhere"]["error"]["code"] == "store_not_found"


def test_a_queue_bound_elsewhere_refuses_jobs_on_the_default_store(
    queue: tuple[Any, Queues], configure: Any
) -> None:
    handle, sqs = queue
    configure(QUEUE_STORES=f" {OTHER} ")
    body = json.loads(job("default-store"))
    body.pop("store")
    send(sqs, [json.dumps(body), job("other", store=OTHER)])
    event = receive_event(sqs)
    response = invoke(handle, event)
    acknowledge(sqs, event, response)
    assert response["batchItemFailures"] == []
    replies = {r.body["requestId"]: r.body for r in drain(sqs, sqs.results)}
    assert replies["default-store"]["error"]["details"] == {"store": "sample"}
    assert replies["other"]["status"] == "ok"


# retrieval make-api-key


def make_api_key(*args: str) -> subprocess.CompletedProcess[str]:
    """`retrieval make-api-key ARGS` in a subprocess on this checkout's core."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "layers" / "retrieval_core")}
    return subprocess.run(
        [sys.executable, "-m", "retrieval_core.cli.main", "make-api-key", *args],
        capture_output=True,
        text=True,
        env=env,
    )


def test_make_api_key_prints_a_key_once_and_an_entry_the_service_accepts(client: Any, configure: Any) -> None:
    run = make_api_key("--name", "reader", "--stores", "sample")
    assert run.returncode == 0, run.stderr
    key, entry_line = run.stdout.strip().splitlines()
    entry = json.loads(entry_line)
    assert entry["name"] == "reader" and entry["stores"] == ["sample"] and entry["scopes"] == ["read"]
    assert key not in entry_line and key not in run.stderr and len(key) >= 40
    configure(API_KEYS=json.dumps([entry]))
    ok = client.post("/api/v1/rag/retrieve", json={"query": "q", "grade": 0.0}, headers={"x-api-key": key})
    assert ok.status_code == 200
    outside = client.post(
        "/api/v1/rag/retrieve", json={"query": "q", "grade": 0.0, "store": OTHER}, headers={"x-api-key": key}
    )
    assert outside.status_code == 404
    again = make_api_key("--name", "reader", "--stores", "sample")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] != key  # random every time
    refused = make_api_key("--name", "x", "--stores", "a", "--scopes", "rw")
    assert refused.returncode == 2 and refused.stdout == "" and "scopes must be" in refused.stderr
