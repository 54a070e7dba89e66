"""The Gemini routes' Lambda handlers (retrieve: knowledge search and retrieve on a File Search store;
resolve_store), invoked with their events/*.json against a fake Gemini API, through the real google-genai
client. In a subprocess, the API key comes from Secrets Manager (moto) as template.yaml configures it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EVENTS_DIR
from tests.fakes.gemini import FakeGemini
from tests.functional.test_handlers import (
    AWS_TEST_ENV,
    GEMINI_EVENTS,
    ROUTES,
    FakeLambdaContext,
    body_of,
    load_event,
    load_handler_module,
    run_handler,
)
from tests.integration.knowledge_support import (
    GEMINI_KEY,
    HVAC_DISPLAY,
    HVAC_MANUAL,
    HVAC_STORE,
    knowledge_env,
    stock_fake,
)
from tests.servers import MotoServer
from tests.template import API_KEY_SECRET_ARN, SECRET_ARN, deployed, grants, role_statements

Check = Callable[[int, dict[str, Any], FakeGemini], None]


def check_knowledge_search(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 200, body
    assert body["text"].startswith("Answer to: What is the procedure")
    assert [s["documentId"] for s in body["sources"]] == [
        HVAC_MANUAL,
        HVAC_MANUAL,
        f"{HVAC_STORE}/documents/escalation-02",
    ]
    assert [s["score"] for s in body["sources"]] == [0.88, 0.91, None]
    assert body["sources"][0]["metadata"]["source_type"] == "s3"
    (call,) = gemini.generate_calls()
    sent = call.json()
    assert sent["generationConfig"]["maxOutputTokens"] == 512
    assert sent["systemInstruction"]["parts"] == [{"text": "Answer concisely in one paragraph."}]
    assert json.dumps(HVAC_STORE) in json.dumps(sent["tools"])


def check_knowledge_search_missing_store(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 422, body
    assert body["error"]["details"]["errors"][0]["field"] == "store"
    assert gemini.requests == []


def check_knowledge_search_unknown_store(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 404, body
    assert body["error"]["code"] == "store_not_found"
    assert body["error"]["details"] == {"store": "fileSearchStores/does-not-exist"}


def check_retrieve_gemini(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 200, body
    assert body["engineUsed"] == "gemini-file-search" and body["store"] == HVAC_STORE
    # grade 0.5: the two scored chunks; the unscored one is dropped.
    assert [r["score"] for r in body["results"]] == [0.91, 0.88]
    assert body["totalResults"] == 2


def check_resolve_store(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 200, body
    assert body == {
        "name": HVAC_STORE,
        "displayName": HVAC_DISPLAY,
        "resolvedBy": "displayName",
        "backend": "gemini",
    }
    assert len(gemini.list_calls()) == 3


def check_resolve_store_short_name(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 200, body
    assert body["name"] == HVAC_STORE and body["resolvedBy"] == "pattern"


def check_resolve_store_pgvector(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 200, body
    assert body["name"] == "sample" and body["resolvedBy"] == "name" and body["backend"] == "pgvector"
    assert gemini.requests == []


def check_resolve_store_missing_name(status: int, body: dict[str, Any], gemini: FakeGemini) -> None:
    assert status == 422, body
    assert body["error"]["details"]["errors"][0]["field"] == "name"


# Every event of a Gemini route; tests/functional/test_handlers.py leaves these to this file.
KNOWLEDGE_EVENTS: dict[str, Check] = {
    "knowledge-search.json": check_knowledge_search,
    "knowledge-search-missing-store.json": check_knowledge_search_missing_store,
    "knowledge-search-unknown-store.json": check_knowledge_search_unknown_store,
    "retrieve-gemini.json": check_retrieve_gemini,
    "resolve-store.json": check_resolve_store,
    "resolve-store-short-name.json": check_resolve_store_short_name,
    "resolve-store-pgvector.json": check_resolve_store_pgvector,
    "resolve-store-missing-name.json": check_resolve_store_missing_name,
}


@pytest.fixture()
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini(api_key=GEMINI_KEY) as fake:
        stock_fake(fake)
        yield fake


def test_every_gemini_route_event_is_checked_here() -> None:
    gemini_routes = {"POST /api/v1/knowledge/search", "GET /api/v1/stores/resolve"}
    files = {p.name for p in EVENTS_DIR.glob("*.json") if load_event(p).get("routeKey") in gemini_routes}
    assert files and files <= KNOWLEDGE_EVENTS.keys()
    assert KNOWLEDGE_EVENTS.keys() == GEMINI_EVENTS
    assert all((EVENTS_DIR / name).exists() for name in KNOWLEDGE_EVENTS)


@pytest.mark.parametrize("event_name", sorted(KNOWLEDGE_EVENTS))
def test_handler_answers_each_gemini_event_as_a_user_expects(
    event_name: str, gemini: FakeGemini, sample_store: Any
) -> None:
    event = load_event(EVENTS_DIR / event_name)
    folder = ROUTES[event["routeKey"]]
    with knowledge_env(gemini):
        handler = load_handler_module(folder).handler
        response = handler(event, FakeLambdaContext(function_name=folder))
    KNOWLEDGE_EVENTS[event_name](response["statusCode"], body_of(response), gemini)


def test_template_routes_the_gemini_paths_to_retrieve_and_resolve_store() -> None:
    assert ROUTES["POST /api/v1/knowledge/search"] == "retrieve"
    assert ROUTES["GET /api/v1/stores/resolve"] == "resolve_store"


def test_resolve_store_template_grants_least_privilege() -> None:
    from samtranslator.yaml_helper import yaml_parse

    gemini_arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/gemini-AbC"
    parameters = {"GeminiApiKeySecretArn": gemini_arn, "ApiKeySecretArn": API_KEY_SECRET_ARN}
    deployment = deployed({"DatabaseSecretArn": SECRET_ARN, **parameters})
    # Reads and writes resolutions in the cache (never deletes), the database secret, the Gemini key (a
    # Secrets Manager secret or an SSM parameter: an action never matches another service's ARN) and the
    # API keys its route is guarded by like the others; never embeds. It counts its requests against the
    # caller's rate limit in the cache table (UpdateItem, on the ratelimit# items only).
    assert grants(role_statements(deployment, "ResolveStoreFunctionRole")) == {
        ("dynamodb:GetItem", "CacheTable.Arn"),
        ("dynamodb:PutItem", "CacheTable.Arn"),
        ("dynamodb:UpdateItem", "CacheTable.Arn"),
        ("secretsmanager:GetSecretValue", SECRET_ARN),
        ("secretsmanager:GetSecretValue", gemini_arn),
        ("ssm:GetParameter", gemini_arn),
        ("secretsmanager:GetSecretValue", API_KEY_SECRET_ARN),
    }
    resources = yaml_parse((Path(__file__).resolve().parents[2] / "template.yaml").read_text())["Resources"]
    retrieve = resources["RetrieveFunction"]["Properties"]
    assert "KnowledgeSearch" in retrieve["Events"]
    assert retrieve["Environment"]["Variables"]["GEMINI_API_KEY_SECRET_ARN"]["Fn::If"][1] == {
        "Ref": "GeminiApiKeySecretArn"
    }


def test_key_from_secrets_manager_rotation_and_debug_logs_never_leak_the_key(
    gemini: FakeGemini, moto: MotoServer, tmp_path: Path
) -> None:
    old_key = f"gm-old-{uuid.uuid4().hex}"
    arn = moto.client("secretsmanager").create_secret(
        Name=f"retrieval/gemini-{uuid.uuid4().hex[:8]}", SecretString=old_key
    )["ARN"]
    env = {
        **AWS_TEST_ENV,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": moto.endpoint_url,
        "GEMINI_API_KEY_SECRET_ARN": arn,
        "GEMINI_BASE_URL": gemini.url,
        "GEMINI_RETRY_BASE_DELAY_S": "0.01",
        "GEMINI_STORE_PAGE_SIZE": "2",
        "DATABASE_URL": "postgresql://nobody@db.invalid/none",
        "DEBUG": "retrieval-service",
    }
    event = str(EVENTS_DIR / "resolve-store.json")
    run = run_handler(
        "resolve_store",
        [
            {"invoke": event},
            # Rotated to the key the API accepts, as a console key/value secret.
            {"put_secret": {"arn": arn, "value": {"apiKey": GEMINI_KEY}}},
            {"invoke": event},
            {"invoke": event},
        ],
        env,
        tmp_path,
    )
    rejected, resolved, cached = run.bodies()
    assert run.responses[0]["statusCode"] == 502
    assert rejected["error"]["code"] == "upstream_auth_rejected"
    # The rejection dropped the client and the cached secret: the rotated key applies at once.
    assert resolved["resolvedBy"] == "displayName" and cached["resolvedBy"] == "cache"
    records = run.log_records()
    debug_lines = [
        r["message"] for r in records if str(r.get("message", "")).startswith("retrieval-service ")
    ]
    assert any("cache hit" in line for line in debug_lines), debug_lines
    assert any("5 stores listed" in line for line in debug_lines), debug_lines
    everything = run.output + json.dumps(run.responses)
    assert old_key not in everything and GEMINI_KEY not in everything
