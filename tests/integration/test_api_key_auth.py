"""API-key authentication (the JWT authorizer is tested on the template in tests/bundle).

Keys are configured as SHA-256 digests, from API_KEYS, API_KEY_HASHES or a Secrets Manager secret
(moto_server, real boto3 through Powertools). Every route but health then needs `x-api-key`. What each
key may do (scopes, stores) is tested in test_grants.py.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import EVENTS_DIR
from tests.servers import MotoServer

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"
HEALTH = "/api/v1/health"
KEY_A = "rk_live_" + "a1" * 20
KEY_B = "rk_live_" + "b2" * 20
UNAUTHORIZED = {"error": {"code": "unauthorized", "message": "missing or invalid API key", "details": {}}}


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def requests_to_protected_routes(client: TestClient, headers: dict[str, str]) -> list[Any]:
    return [
        client.post(RETRIEVE, json={"query": "espresso", "grade": 0.0}, headers=headers),
        client.post(SEARCH, json={"queryEmbedding": [0.1] * 384}, headers=headers),
        # Even requests that would be refused for other reasons are refused for the key first,
        # so an unauthenticated caller learns nothing about the API.
        client.post(RETRIEVE, content=b"{not json", headers={**headers, "content-type": "application/json"}),
        client.post(RETRIEVE, json={"query": "q", "grade": 0.1, "store": "no-such-store"}, headers=headers),
        client.get("/api/v1/no-such-route", headers=headers),
    ]


def test_auth_without_configured_keys_the_api_is_public(client: TestClient, configure: Any) -> None:
    configure(API_KEY_HASHES="")
    assert client.post(RETRIEVE, json={"query": "espresso", "grade": 0.0}).status_code == 200


def test_auth_every_route_but_health_requires_x_api_key(client: TestClient, configure: Any) -> None:
    configure(API_KEY_HASHES=f"{digest(KEY_A)}, {digest(KEY_B)}")
    for response in requests_to_protected_routes(client, {}):
        assert response.status_code == 401, response.text
        assert response.json() == UNAUTHORIZED
    health = client.get(HEALTH)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    head = client.head(HEALTH)
    assert head.status_code == 200 and head.content == b""


def test_auth_any_configured_key_is_accepted(client: TestClient, configure: Any) -> None:
    configure(API_KEY_HASHES=f"{digest(KEY_A)}\n{digest(KEY_B).upper()}")
    for key in (KEY_A, KEY_B):
        first, search, malformed, unknown_store, unknown_route = requests_to_protected_routes(
            client, {"x-api-key": key}
        )
        assert first.status_code == 200 and first.json()["results"]
        assert search.status_code == 200
        assert malformed.status_code == 422
        assert unknown_store.status_code == 404
        assert unknown_route.status_code == 404
    # Header names are case-insensitive in HTTP.
    assert (
        client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"X-Api-Key": KEY_A}).status_code
        == 200
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-api-key": ""},
        {"x-api-key": "wrong"},
        {"x-api-key": KEY_A.upper()},
        {"x-api-key": KEY_A[:-1]},
        {"x-api-key": KEY_A + " "},
        {"x-api-key": digest(KEY_A)},  # the configured digest itself is not a key
        {"authorization": f"Bearer {KEY_A}"},
        {"x-api-key-a": KEY_A},
    ],
    ids=["missing", "empty", "wrong", "case", "prefix", "suffix", "digest", "bearer", "other-header"],
)
def test_auth_401_does_not_say_which_part_failed(
    client: TestClient, configure: Any, headers: dict[str, str]
) -> None:
    configure(API_KEY_HASHES=digest(KEY_A))
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers=headers)
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED
    assert "www-authenticate" not in response.headers
    assert KEY_A not in response.text and digest(KEY_A) not in response.text


def test_auth_a_key_pasted_where_its_hash_belongs_is_a_configuration_error_that_does_not_echo_it(
    client: TestClient, configure: Any
) -> None:
    configure(API_KEY_HASHES=KEY_A)
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": KEY_A})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "configuration_error"
    assert "retrieval hash-api-key" in response.json()["error"]["message"]
    assert KEY_A not in response.text


@pytest.fixture()
def key_secret(moto: MotoServer, aws_env: None, configure: Any) -> Iterator[Any]:
    """A Secrets Manager secret on moto_server holding digests; returns (arn, client)."""
    client = moto.client("secretsmanager")
    arn = client.create_secret(
        Name=f"retrieval/api-keys-{uuid.uuid4().hex[:8]}", SecretString=f"{digest(KEY_A)},{digest(KEY_B)}"
    )["ARN"]
    configure(AWS_ENDPOINT_URL_SECRETS_MANAGER=moto.endpoint_url, API_KEY_SECRET_ARN=arn)
    yield arn, client


def test_auth_keys_from_secrets_manager(client: TestClient, key_secret: Any, configure: Any) -> None:
    arn, secrets = key_secret
    for key in (KEY_A, KEY_B):
        ok = client.post(RETRIEVE, json={"query": "espresso", "grade": 0.0}, headers={"x-api-key": key})
        assert ok.status_code == 200
    assert client.post(RETRIEVE, json={"query": "q", "grade": 0.0}).json() == UNAUTHORIZED
    # A rotation (B revoked) reaches the service once its cached copy expires; here, at once.
    secrets.put_secret_value(SecretId=arn, SecretString=digest(KEY_A))
    configure()
    revoked = client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": KEY_B})
    assert revoked.status_code == 401
    assert (
        client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": KEY_A}).status_code
        == 200
    )


def test_auth_an_unreadable_key_secret_lets_nobody_in(
    client: TestClient, moto: MotoServer, aws_env: None, configure: Any
) -> None:
    missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/none-AbCdEf"
    configure(AWS_ENDPOINT_URL_SECRETS_MANAGER=moto.endpoint_url, API_KEY_SECRET_ARN=missing)
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": KEY_A})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "authentication_unavailable"
    assert client.get(HEALTH).status_code == 200


def test_auth_cli_hash_api_key_prints_the_digest_to_configure(client: TestClient, configure: Any) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "retrieval_core.cli.main", "hash-api-key"],
        input=KEY_A + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    printed = run.stdout.strip()
    assert printed == digest(KEY_A) and KEY_A not in run.stdout + run.stderr
    configure(API_KEY_HASHES=printed)
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": KEY_A})
    assert response.status_code == 200


def test_auth_lambda_handlers_enforce_the_same_keys(sample_store: Any, configure: Any) -> None:
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import health, retrieve

    configure(API_KEY_HASHES=digest(KEY_A), POWERTOOLS_METRICS_NAMESPACE="Test")
    handler = build_handler(retrieve.router, health.router)
    context = SimpleNamespace(
        function_name="retrieve",
        memory_limit_in_mb=1024,
        aws_request_id="req-1",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:retrieve",
    )
    event = json.loads((EVENTS_DIR / "retrieve.json").read_text())
    refused = handler(event, context)
    assert refused["statusCode"] == 401 and json.loads(refused["body"]) == UNAUTHORIZED
    event["headers"]["x-api-key"] = KEY_A
    assert handler(event, context)["statusCode"] == 200
    for name in ("health.json", "health-head.json"):
        health_event = json.loads((EVENTS_DIR / name).read_text())
        assert handler(health_event, context)["statusCode"] == 200


def test_auth_the_openapi_document_describes_the_key_and_the_refusals(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["ApiKey"] == {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
        "description": schema["components"]["securitySchemes"]["ApiKey"]["description"],
    }
    for path in (RETRIEVE, SEARCH):
        operation = schema["paths"][path]["post"]
        assert operation["security"] == [{"ApiKey": []}, {}]
        assert {"401", "413"} <= set(operation["responses"])
    for method in ("get", "head"):
        health_operation = schema["paths"][HEALTH][method]
        assert "security" not in health_operation and "401" not in health_operation["responses"]


def test_auth_a_secret_holding_a_json_list_gives_each_key_its_grant(
    client: TestClient, moto: MotoServer, aws_env: None, configure: Any
) -> None:
    entries = [
        {"name": "reader", "sha256": digest(KEY_A), "stores": ["sample"], "scopes": ["read"]},
        {"name": "uploader", "sha256": digest(KEY_B), "stores": ["*"], "scopes": ["write"]},
    ]
    secrets = moto.client("secretsmanager")
    arn = secrets.create_secret(
        Name=f"retrieval/api-keys-{uuid.uuid4().hex[:8]}", SecretString=json.dumps(entries, indent=2)
    )["ARN"]
    configure(AWS_ENDPOINT_URL_SECRETS_MANAGER=moto.endpoint_url, API_KEY_SECRET_ARN=arn)
    body = {"query": "espresso", "grade": 0.0}
    assert client.post(RETRIEVE, json=body, headers={"x-api-key": KEY_A}).status_code == 200
    outside = client.post(RETRIEVE, json={**body, "store": "elsewhere"}, headers={"x-api-key": KEY_A})
    assert outside.status_code == 404
    assert client.post(RETRIEVE, json=body, headers={"x-api-key": KEY_B}).status_code == 403
    assert client.post(RETRIEVE, json=body).json() == UNAUTHORIZED
    # Plain digests in API_KEY_HASHES still work beside the secret's list: read-only, every store.
    key_c = "rk_live_" + "c3" * 20
    configure(API_KEY_HASHES=digest(key_c))
    assert client.post(RETRIEVE, json=body, headers={"x-api-key": key_c}).status_code == 200


@pytest.mark.parametrize(
    ("api_keys", "message"),
    [
        (
            [{"name": "a", "sha256": KEY_A, "stores": ["*"], "scopes": ["read"]}],
            "API_KEYS entry 1: sha256 must be the SHA-256 hex digest of the key",
        ),
        (
            [
                {"name": "a", "sha256": digest(KEY_A), "stores": ["*"], "scopes": ["read"]},
                {"name": "b", "sha256": digest(KEY_A), "stores": ["*"], "scopes": ["write"]},
            ],
            "API_KEYS entry 1 and API_KEYS entry 2 have the same sha256",
        ),
    ],
    ids=["key-pasted-as-digest", "duplicate-digest"],
)
def test_auth_a_bad_api_keys_list_is_a_configuration_error_quoting_no_key_or_digest(
    client: TestClient, configure: Any, api_keys: list[dict[str, Any]], message: str
) -> None:
    configure(API_KEYS=json.dumps(api_keys))
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers={"x-api-key": KEY_A})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "configuration_error"
    assert response.json()["error"]["message"].startswith(message)
    assert KEY_A not in response.text and digest(KEY_A) not in response.text


def test_auth_the_openapi_document_describes_the_403(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    for path, method in ((RETRIEVE, "post"), (SEARCH, "post"), ("/api/v1/stores/resolve", "get")):
        assert "403" in schema["paths"][path][method]["responses"]
    assert "403" not in schema["paths"][HEALTH]["get"]["responses"]
