"""Every Lambda handler in functions/, invoked like Lambda does with every events/*.json routed to it.

The routes come from template.yaml, so an event for a route no function serves fails here. The
in-process tests run on the real embedded PostgreSQL with the sample corpus and the local model.
The subprocess tests configure a handler the way template.yaml does in AWS (DATABASE_HOST plus a
Secrets Manager secret in moto_server, or an RDS IAM token) and check what an operator would see.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ATTACHABLE_ROWS, ATTACHABLE_TABLE, EVENTS_DIR, REPO_ROOT
from tests.servers import MotoServer, XRayDaemon, create_idempotency_table
from tests.template import SECRET_ARN, deployed, grants, role_statements

FUNCTIONS_DIR = REPO_ROOT / "functions"
TEMPLATE = REPO_ROOT / "template.yaml"

Event = dict[str, Any]
Response = dict[str, Any]


@dataclass(frozen=True)
class FakeLambdaContext:
    """The attributes of Lambda's context object that Powertools and Mangum read."""

    function_name: str
    function_version: str = "1"
    memory_limit_in_mb: int = 1024
    aws_request_id: str = "0f3e3a52-5a4b-4c8e-9d37-0d1f2f6c7a11"
    log_group_name: str = "/aws/lambda/retrieval"
    log_stream_name: str = "2025/11/22/[1]0123456789abcdef"
    remaining_ms: int = 29_000

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}:live"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def template_routes() -> dict[str, str]:
    """routeKey ("POST /api/v1/...") -> function folder name, from the HttpApi events in template.yaml."""
    from samtranslator.yaml_helper import yaml_parse

    template = yaml_parse(TEMPLATE.read_text())
    routes: dict[str, str] = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        folder = Path(resource["Properties"]["CodeUri"]).name
        for source in resource["Properties"].get("Events", {}).values():
            if source["Type"] == "HttpApi":
                props = source["Properties"]
                routes[f"{props['Method'].upper()} {props['Path']}"] = folder
    return routes


def load_event(path: Path) -> Event:
    event: Event = json.loads(path.read_text())
    return event


ROUTES = template_routes()
ALL_EVENT_FILES = sorted(EVENTS_DIR.glob("*.json"))
# HTTP API events name their route; SQS events carry Records; CloudFormation custom resource requests
# (cfn-migrate-*.json, for functions/migrate: test_migrate_handler.py) carry a RequestType; scheduled
# tasks (schedule-*.json, for functions/migrate too) a task.
EVENT_FILES = [p for p in ALL_EVENT_FILES if "routeKey" in load_event(p)]
SQS_EVENT_FILES = [p for p in ALL_EVENT_FILES if "Records" in load_event(p)]
CUSTOM_RESOURCE_EVENT_FILES = [p for p in ALL_EVENT_FILES if "RequestType" in load_event(p)]
SCHEDULE_EVENT_FILES = [p for p in ALL_EVENT_FILES if "task" in load_event(p)]
# The retrieve queue's events; sqs-ingest-*.json feed the ingest function (test_ingest_handler.py).
RETRIEVE_QUEUE_EVENT_FILES = [p for p in SQS_EVENT_FILES if not p.name.startswith("sqs-ingest-")]


def load_handler_module(folder: str) -> ModuleType:
    """functions/<folder>/app.py under a unique module name: every function's file is called app.py."""
    path = FUNCTIONS_DIR / folder / "app.py"
    spec = importlib.util.spec_from_file_location(f"lambda_function_{folder}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def no_handbook_store(service: Any) -> None:
    """The stores-*.json events walk one store's life in file order, from its PUT to its DELETE, then
    attach a store to a table of the database (`attachable_table`), refresh it and drop it."""
    from retrieval_core.container import get_document_service

    docs = get_document_service()
    for name in {"handbook", "handbook-faq"} & {s.name for s in docs.list_stores(prefix="handbook")[0]}:
        docs.delete_store(name)


@pytest.fixture(scope="module")
def handlers(
    sample_store: Any, no_handbook_store: None, attachable_table: str
) -> dict[str, Callable[[Event, Any], Response]]:
    """Each function folder's `handler`, imported after the database holds the sample store."""
    return {folder: load_handler_module(folder).handler for folder in sorted(set(ROUTES.values()))}


def test_every_event_is_an_http_api_an_sqs_a_custom_resource_or_a_schedule_event() -> None:
    assert (
        sorted(EVENT_FILES + SQS_EVENT_FILES + CUSTOM_RESOURCE_EVENT_FILES + SCHEDULE_EVENT_FILES)
        == ALL_EVENT_FILES
    )
    assert [p.name for p in SCHEDULE_EVENT_FILES] == ["schedule-index-stores.json"]
    assert SQS_EVENT_FILES, "the queue function has no event"
    assert {p.name for p in CUSTOM_RESOURCE_EVENT_FILES} == {
        f"cfn-migrate-{kind}.json" for kind in ("create", "update", "delete")
    }


def body_of(response: Response) -> dict[str, Any]:
    if response["statusCode"] == 204:
        assert not response["body"]
        return {}
    assert response["isBase64Encoded"] is False
    assert response["headers"]["content-type"].startswith("application/json")
    parsed: dict[str, Any] = json.loads(response["body"])
    return parsed


def assert_ranked_chunks(body: dict[str, Any], first_document: str, *, grade: float = 0.0) -> None:
    results = body["results"]
    assert results, body
    assert results[0]["metadata"]["documentId"] == first_document
    assert results[0]["id"] == f"{first_document}#0"
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert all(grade <= s <= 1.0 for s in scores)
    assert body["totalResults"] == len(results)
    for result in results:
        # Metadata always travels with the text.
        assert result["content"]
        assert {"documentId", "chunkIndex", "fileName"} <= result["metadata"].keys()


def check_retrieve(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert_ranked_chunks(body, "k8s-scheduling", grade=0.3)
    assert body["results"][0]["metadata"]["fileName"] == "k8s-docs.pdf"
    assert body["results"][0]["metadata"]["pageNumber"] == 12
    # No engineName: the default (advanced) engine; no reranker configured, so search order.
    assert body["store"] == "sample" and body["engineUsed"] == "advanced"
    assert body["pipeline"]["reranked"] is False and body["pipeline"]["warnings"] == []
    assert body["query"].startswith("How does the Kubernetes scheduler")


def check_answer(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    # The default generator (extractive) answers with sentences of the sources, each cited.
    assert body["grounded"] is True and body["pipeline"]["provider"] == "extractive"
    assert body["sources"][0]["metadata"]["documentId"] == "k8s-scheduling"
    assert "k8s-scheduling" in {d for c in body["citations"] for d in c["documentIds"]}
    for citation in body["citations"]:
        assert body["text"][citation["start"] : citation["end"]] == citation["text"]
    assert body["pipeline"]["inputTokens"] is None  # the extractive generator counts no tokens


def check_answer_model_not_allowed(status: int, body: dict[str, Any]) -> None:
    assert status == 422, body
    assert body["error"]["details"]["errors"][0]["field"] == "model"
    assert "GENERATION_MODELS_ALLOWED" in body["error"]["message"]


def check_retrieve_metadata_filter(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert_ranked_chunks(body, "hvac-cold-complaints", grade=0.2)
    assert {r["metadata"]["project_name"] for r in body["results"]} == {"Facilities"}


def check_retrieve_invalid_grade(status: int, body: dict[str, Any]) -> None:
    assert status == 422, body
    assert body["error"]["code"] == "validation_error"
    assert body["error"]["message"].startswith("grade:")
    assert body["error"]["details"]["errors"][0]["field"] == "grade"


def check_retrieve_unknown_store(status: int, body: dict[str, Any]) -> None:
    assert status == 404, body
    assert body["error"]["code"] == "store_not_found"
    assert "does-not-exist" in body["error"]["message"]
    assert body["error"]["details"] == {"store": "does-not-exist"}


def check_retrieve_hybrid_mmr(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    pipeline = body["pipeline"]
    assert pipeline["hybrid"] is True and pipeline["fusion"] == "weighted"
    assert pipeline["reranked"] is True and pipeline["rerankStrategy"] == "mmr"
    assert body["totalResults"] == len(body["results"]) == 3
    assert len({r["id"] for r in body["results"]}) == 3
    assert all(r["fusedScore"] is not None for r in body["results"])


def check_retrieve_batch(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    first, second, third = body["results"]
    assert first["status"] == 200 and second["status"] == 200
    assert_ranked_chunks(first["response"], "k8s-scheduling", grade=0.3)
    assert_ranked_chunks(second["response"], "hvac-cold-complaints", grade=0.2)
    assert third["status"] == 404 and third["error"]["code"] == "store_not_found"


def check_retrieve_batch_too_many(status: int, body: dict[str, Any]) -> None:
    assert status == 422, body
    assert body["error"]["code"] == "validation_error" and body["error"]["message"].startswith("requests")


def check_evaluate(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["store"] == "sample" and body["k"] == 5 and body["complete"] is True
    # q4 has only a judgment of relevance 0: skipped, as BEIR's tools do.
    assert (body["scoredQueries"], body["skippedQueries"]) == (3, 1)
    assert [m["name"] for m in body["methods"]] == ["dense", "hybrid", "keyword"]
    dense = body["methods"][0]
    assert dense["ndcg"] > 0.8 and dense["recall"] == 1.0 and dense["medianLatencyMs"] > 0
    first = body["queries"][0]
    assert first["id"] == "q1" and first["relevantDocuments"] == 1
    assert first["scores"]["dense"]["topDocuments"][0] == "k8s-scheduling"
    assert len(first["scores"]["dense"]["topDocuments"]) == 5


def check_evaluate_unknown_query(status: int, body: dict[str, Any]) -> None:
    assert status == 422, body
    assert body["error"]["code"] == "validation_error"
    assert body["error"]["details"]["errors"][0]["field"] == "judgments.0.queryId"
    assert "'q2'" in body["error"]["message"]


def check_similarity_search(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert_ranked_chunks(body, "k8s-scheduling")
    assert body["totalResults"] == 3 and body["store"] == "sample"
    # The embedding is MiniLM's for a question about pod scheduling: a close match, not noise.
    assert body["results"][0]["score"] > 0.5


def check_similarity_search_wrong_dimension(status: int, body: dict[str, Any]) -> None:
    assert status == 422, body
    assert body["error"]["code"] == "dimension_mismatch"
    assert "768" in body["error"]["message"] and "384" in body["error"]["message"]
    assert body["error"]["details"] == {"store": "sample", "expectedDimension": 384, "actualDimension": 768}


def check_health(status: int, body: dict[str, Any]) -> None:
    from retrieval_core.db.migrations.steps import SCHEMA_VERSION

    assert status == 200, body
    assert body["status"] == "ok"
    checks = body["checks"]
    assert {name: check["status"] for name, check in checks.items()} == dict.fromkeys(
        ("database", "schema", "pgvector", "embedder"), "ok"
    )
    assert checks["schema"] == {"status": "ok", "version": SCHEMA_VERSION, "requiredVersion": SCHEMA_VERSION}
    assert re.fullmatch(r"\d+\.\d+\.\d+", checks["pgvector"]["version"])
    assert checks["embedder"]["provider"] == "local" and checks["embedder"]["model"] == "all-MiniLM-L6-v2"


def check_health_head(status: int, body: dict[str, Any]) -> None:
    # The status code of GET, no body: what load balancers and uptime probes read.
    assert status == 200 and body == {}


def check_stores_put(status: int, body: dict[str, Any]) -> None:
    assert status == 201, body
    assert body["name"] == "handbook" and body["displayName"] == "Employee handbook"
    assert body["dimension"] == 384 and body["documentCount"] == 0 and body["storage"] == "vector"


def check_documents_put_text(status: int, body: dict[str, Any]) -> None:
    assert status == 201, body
    # rawPath holds the id API Gateway decoded from policies%2Fvisitors%232026.
    assert body["documentId"] == "policies/visitors#2026" and body["status"] == "created"
    assert (
        body["chunkCount"] == 1 and body["contentType"] == "text/plain" and len(body["contentSha256"]) == 64
    )


def check_documents_put_markdown(status: int, body: dict[str, Any]) -> None:
    assert status == 201, body
    assert body["documentId"] == "guides/onboarding.md" and body["contentType"] == "text/markdown"
    assert body["chunkCount"] >= 2  # one chunk per section at least


def check_documents_put_unsupported(status: int, body: dict[str, Any]) -> None:
    assert status == 415, body
    assert body["error"]["code"] == "unsupported_content_type"
    assert "application/pdf" in body["error"]["details"]["supported"]


def check_documents_put_bad_base64(status: int, body: dict[str, Any]) -> None:
    assert status == 422, body
    assert body["error"]["details"]["errors"][0]["field"] == "content"


def check_documents_put_notes(status: int, body: dict[str, Any]) -> None:
    assert status == 201, body
    assert body["documentId"] == "notes/faq.txt" and body["status"] == "created"


def check_documents_put_dot_segment(status: int, body: dict[str, Any]) -> None:
    # A path resolves `..`: the id would climb out of store `handbook`, so no write takes it.
    assert status == 422, body
    error = body["error"]["details"]["errors"][0]
    assert error["field"] == "documentId" and error["type"] == "dot_segment", body
    assert "'..' path segment" in error["message"]


def check_documents_get(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["documentId"] == "policies/visitors#2026"
    assert body["metadata"] == {"team": "facilities", "year": 2026, "contentType": "text/plain"}


def check_documents_list(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert [d["documentId"] for d in body["documents"]] == ["guides/onboarding.md"]
    assert body["documents"][0]["title"] == "Onboarding" and body["nextCursor"] is None


def check_list_chunks(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["documentId"] == "k8s-scheduling" and body["nextCursor"] is None
    (chunk,) = body["chunks"]
    assert chunk["id"] == "k8s-scheduling#0" and chunk["chunkIndex"] == 0
    assert chunk["content"].startswith("The Kubernetes scheduler watches")
    assert chunk["pageNumber"] == 12 and chunk["section"] is None
    assert chunk["metadata"]["fileName"] == "k8s-docs.pdf"


def check_documents_delete(status: int, body: dict[str, Any]) -> None:
    assert status == 204 and body == {}


def check_stores_get(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["documentCount"] == 1 and body["chunkCount"] == 1


def check_stores_list(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    names = [s["name"] for s in body["stores"]]
    assert "handbook" in names and all(n.startswith("handbook") for n in names), body


def check_stores_attach(status: int, body: dict[str, Any]) -> None:
    assert status == 201, body
    source = body["source"]
    assert body["name"] == "handbook-faq" and source["table"] == ATTACHABLE_TABLE
    assert source["readOnly"] is True
    assert source["columns"] == {"id": "id", "content": "body", "embedding": "embedding"}
    assert source["rows"] == ATTACHABLE_ROWS and source["dimension"] == 384


def check_stores_refresh(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["name"] == "handbook-faq" and body["source"]["table"] == ATTACHABLE_TABLE
    assert body["source"]["rows"] == ATTACHABLE_ROWS


def check_stores_refresh_own_store(status: int, body: dict[str, Any]) -> None:
    # A store of the service's own has nothing to refresh: its writes keep its answers current.
    assert status == 409, body
    assert body["error"]["code"] == "conflict" and "holds its own documents" in body["error"]["message"]


# POST /mcp answers JSON-RPC in a JSON body (stateless, JSON responses). Locally no API key is configured:
# the open grant offers every tool.
MCP_TOOLS = {"memory_search", "memory_store", "memory_delete", "retrieve", "answer", "list_stores"}


def check_mcp_initialize(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    result = body["result"]
    assert body["id"] == 1 and result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "retrieval-service" and "tools" in result["capabilities"]


def check_mcp_tools_list(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    tools = {t["name"]: t for t in body["result"]["tools"]}
    assert set(tools) == MCP_TOOLS
    assert tools["memory_search"]["inputSchema"]["required"] == ["query"]


def check_mcp_memory_search(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    result = body["result"]
    assert result["isError"] is False
    found = result["structuredContent"]
    assert found["store"] == "sample" and found["count"] == len(found["results"]) == 3
    first = found["results"][0]
    assert (first["documentId"], first["id"]) == ("k8s-scheduling", f"k8s-scheduling#{first['chunkIndex']}")
    # The filter's string "2024" matched the corpus's number 2024.
    assert all(r["metadata"]["year"] == 2024 for r in found["results"])
    similarities = [r["similarity"] for r in found["results"]]
    assert similarities == sorted(similarities, reverse=True) and similarities[0] > 0.5


def check_mcp_memory_search_invalid(status: int, body: dict[str, Any]) -> None:
    # A tool's input error is a tool error (isError), which the model reads; the HTTP call succeeded.
    assert status == 200, body
    result = body["result"]
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["code"] == "validation_error" and error["message"].startswith("limit:")
    assert result["content"][0]["text"].startswith("validation_error: limit:")


def check_console(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["type"] == "text/html; charset=utf-8"
    assert body["csp"].startswith("default-src 'self'")
    assert '<script type="module" src="/console/app.js"></script>' in body["text"]


def check_console_file(status: int, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["type"] == "text/javascript; charset=utf-8"
    assert 'from "/console/api.js"' in body["text"]


EXPECTED: dict[str, Callable[[int, dict[str, Any]], None]] = {
    "console.json": check_console,
    "console-file.json": check_console_file,
    "retrieve.json": check_retrieve,
    "answer.json": check_answer,
    "answer-model-not-allowed.json": check_answer_model_not_allowed,
    "retrieve-metadata-filter.json": check_retrieve_metadata_filter,
    "retrieve-invalid-grade.json": check_retrieve_invalid_grade,
    "retrieve-unknown-store.json": check_retrieve_unknown_store,
    "retrieve-hybrid-mmr.json": check_retrieve_hybrid_mmr,
    "retrieve-batch.json": check_retrieve_batch,
    "retrieve-batch-too-many.json": check_retrieve_batch_too_many,
    "evaluate.json": check_evaluate,
    "evaluate-unknown-query.json": check_evaluate_unknown_query,
    "similarity-search.json": check_similarity_search,
    "similarity-search-wrong-dimension.json": check_similarity_search_wrong_dimension,
    "health.json": check_health,
    "health-head.json": check_health_head,
    "list-chunks.json": check_list_chunks,
    "stores-01-put.json": check_stores_put,
    "stores-02-documents-put-text.json": check_documents_put_text,
    "stores-03-documents-put-markdown.json": check_documents_put_markdown,
    "stores-03a-documents-put-notes.json": check_documents_put_notes,
    "stores-04-documents-put-unsupported.json": check_documents_put_unsupported,
    "stores-05-documents-put-bad-base64.json": check_documents_put_bad_base64,
    "stores-05a-documents-put-dot-segment.json": check_documents_put_dot_segment,
    "stores-06-documents-get.json": check_documents_get,
    "stores-07-documents-list.json": check_documents_list,
    "stores-08-documents-delete.json": check_documents_delete,
    "stores-08a-documents-delete-by-query.json": check_documents_delete,
    "stores-09-get.json": check_stores_get,
    "stores-10-list.json": check_stores_list,
    "stores-11-delete.json": check_documents_delete,
    "stores-12-attach.json": check_stores_attach,
    "stores-13-refresh.json": check_stores_refresh,
    "stores-14-refresh-own-store.json": check_stores_refresh_own_store,
    "stores-15-delete-attached.json": check_documents_delete,
    "mcp-01-initialize.json": check_mcp_initialize,
    "mcp-02-tools-list.json": check_mcp_tools_list,
    "mcp-03-memory-search.json": check_mcp_memory_search,
    "mcp-04-memory-search-invalid.json": check_mcp_memory_search_invalid,
}


# Events of the Gemini routes need a fake Gemini API: tests/functional/test_knowledge_handlers.py runs them.
GEMINI_EVENTS = frozenset(
    {"knowledge-search.json", "knowledge-search-missing-store.json", "knowledge-search-unknown-store.json"}
    | {"retrieve-gemini.json", "resolve-store.json", "resolve-store-short-name.json"}
    | {"resolve-store-pgvector.json", "resolve-store-missing-name.json"}
)


def answer_body(event: Event, response: Response) -> dict[str, Any]:
    """The JSON body; {} for a HEAD request, whose answer has the headers of GET and no body; for one of
    the console's files, its type, its Content-Security-Policy and its text."""
    if event["requestContext"]["http"]["method"] == "HEAD":
        assert response["body"] == "" and response["headers"]["content-type"] == "application/json"
        return {}
    if event["rawPath"].startswith("/console") and response["statusCode"] == 200:
        return console_answer(response)
    return body_of(response)


def console_answer(response: Response) -> dict[str, Any]:
    """One of the console's files as the checks read it: its type, its Content-Security-Policy, its text."""
    headers = response["headers"]
    return {
        "type": headers["content-type"],
        "csp": headers["content-security-policy"],
        "text": response["body"],
    }


@pytest.mark.parametrize(
    "event_file", [p for p in EVENT_FILES if p.name not in GEMINI_EVENTS], ids=lambda p: p.name
)
def test_handler_answers_each_event_as_a_user_expects(
    event_file: Path, handlers: dict[str, Callable[[Event, Any], Response]]
) -> None:
    event = load_event(event_file)
    assert event_file.name in EXPECTED, f"add the expected answer for {event_file.name}"
    folder = ROUTES[event["routeKey"]]
    response = handlers[folder](event, FakeLambdaContext(function_name=folder))
    EXPECTED[event_file.name](response["statusCode"], answer_body(event, response))


def test_the_function_serving_get_health_answers_head_with_its_status_and_no_body(
    handlers: dict[str, Callable[[Event, Any], Response]],
) -> None:
    folder = ROUTES["GET /api/v1/health"]
    event = load_event(EVENTS_DIR / "health-head.json")
    response = handlers[folder](event, FakeLambdaContext(function_name=folder))
    check_health_head(response["statusCode"], answer_body(event, response))


def test_a_handler_answers_after_asyncio_run_cleared_the_threads_event_loop(
    handlers: dict[str, Callable[[Event, Any], Response]],
) -> None:
    # asyncio.run leaves the thread with no loop, where Mangum's asyncio.get_event_loop() fails.
    asyncio.run(asyncio.sleep(0))
    folder = ROUTES["GET /api/v1/health"]
    event = load_event(EVENTS_DIR / "health.json")
    response = handlers[folder](event, FakeLambdaContext(function_name=folder))
    check_health(response["statusCode"], answer_body(event, response))


# A refresh names its store in the path and sends nothing else.
BODYLESS_ROUTES = frozenset({"POST /api/v1/stores/{store}/refresh"})


@pytest.mark.parametrize("event_file", EVENT_FILES, ids=lambda p: p.name)
def test_events_are_realistic_http_api_v2_payloads(event_file: Path) -> None:
    event = load_event(event_file)
    method, path = event["routeKey"].split(" ", 1)
    assert event["routeKey"] in ROUTES, "no function in template.yaml serves this route"
    assert event["version"] == "2.0" and event["isBase64Encoded"] is False
    assert re.fullmatch(route_pattern(path), event["rawPath"]), (path, event["rawPath"])
    context = event["requestContext"]
    assert context["requestId"] and context["routeKey"] == event["routeKey"]
    assert context["http"]["method"] == method and context["http"]["path"] == event["rawPath"]
    if method in ("POST", "PUT") and event["routeKey"] not in BODYLESS_ROUTES:
        assert event["headers"]["content-type"] == "application/json"
        assert int(event["headers"]["content-length"]) == len(event["body"].encode())
        json.loads(event["body"])
    else:
        assert "body" not in event and "content-type" not in event["headers"]


GOOD_EVENTS = {
    "answer.json",
    "retrieve.json",
    "retrieve-metadata-filter.json",
    "retrieve-hybrid-mmr.json",
    "retrieve-batch.json",
    "similarity-search.json",
    "health.json",
    "health-head.json",
}
GOOD_EVENTS |= {"knowledge-search.json", "resolve-store.json"}
GOOD_EVENTS |= {
    "evaluate.json",
    "list-chunks.json",
    "stores-01-put.json",
    "stores-02-documents-put-text.json",
    "stores-03-documents-put-markdown.json",
    "stores-03a-documents-put-notes.json",
    "stores-06-documents-get.json",
    "stores-07-documents-list.json",
    "stores-08-documents-delete.json",
    "stores-08a-documents-delete-by-query.json",
    "stores-09-get.json",
    "stores-10-list.json",
    "stores-11-delete.json",
    "stores-12-attach.json",
    "stores-13-refresh.json",
    "stores-15-delete-attached.json",
}
GOOD_EVENTS |= {"console.json", "console-file.json"}
GOOD_EVENTS |= {"mcp-01-initialize.json", "mcp-02-tools-list.json", "mcp-03-memory-search.json"}


def test_every_route_has_an_event_and_every_input_route_a_bad_input_event() -> None:
    good: dict[str, int] = dict.fromkeys(ROUTES, 0)
    bad: dict[str, int] = dict.fromkeys(ROUTES, 0)
    for event_file in EVENT_FILES:
        route = load_event(event_file)["routeKey"]
        if route not in ROUTES:
            continue  # an event of no route: test_events_are_realistic_http_api_v2_payloads says so
        (good if event_file.name in GOOD_EVENTS else bad)[route] += 1
    assert all(good.values()), f"routes without a valid-request event: {good}"
    # GET and HEAD /api/v1/health take no input, so they have no bad-input variant.
    with_bodies = [route for route in bad if route.startswith("POST") or route.endswith("{documentId+}")]
    with_bodies = [route for route in with_bodies if not route.startswith(("GET", "DELETE"))]
    assert all(bad[route] for route in with_bodies), f"routes without bad input: {bad}"


def template_resources() -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    resources: dict[str, Any] = yaml_parse(TEMPLATE.read_text())["Resources"]
    return resources


def test_the_queue_function_is_wired_for_partial_batch_failures_retries_and_a_dead_letter_queue() -> None:
    resources = template_resources()
    from samtranslator.yaml_helper import yaml_parse

    globals_fn = yaml_parse(TEMPLATE.read_text())["Globals"]["Function"]
    function = resources["RetrieveQueueFunction"]["Properties"]
    assert function["CodeUri"] == "functions/retrieve_queue/" and function["Handler"] == "app.handler"
    ((source),) = function["Events"].values()
    assert source["Type"] == "SQS"
    assert source["Properties"]["Queue"] == {"Fn::GetAtt": ["RequestQueue", "Arn"]}
    assert source["Properties"]["BatchSize"] == 10
    assert source["Properties"]["MaximumBatchingWindowInSeconds"] > 0
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]

    queue = resources["RequestQueue"]["Properties"]
    timeout = function.get("Timeout", globals_fn["Timeout"])
    assert queue["VisibilityTimeout"] >= 6 * timeout
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": ["RequestDeadLetterQueue", "Arn"]},
        "maxReceiveCount": 3,
    }
    for name in ("RequestQueue", "RequestDeadLetterQueue", "ResultsQueue"):
        assert resources[name]["Properties"]["SqsManagedSseEnabled"] is True

    table = resources["IdempotencyTable"]["Properties"]
    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert table["BillingMode"] == "PAY_PER_REQUEST" and table["SSESpecification"]["SSEEnabled"] is True

    variables = function["Environment"]["Variables"]
    assert variables["RESULTS_QUEUE_URL"] == {"Ref": "ResultsQueue"}
    assert variables["IDEMPOTENCY_TABLE_NAME"] == {"Ref": "IdempotencyTable"}

    # Least privilege: replies only to the results queue and the allowed reply queues.
    reply_arn = "arn:aws:sqs:us-east-1:123456789012:team-replies"
    deployed_resources = deployed({"ReplyQueueArns": reply_arn, "DatabaseSecretArn": SECRET_ARN})
    statements = role_statements(deployed_resources, "RetrieveQueueFunctionRole")
    sends = {resource for action, resource in grants(statements) if action == "sqs:SendMessage"}
    assert sends == {"ResultsQueue.Arn", reply_arn}
    idempotency = {action for action, resource in grants(statements) if resource == "IdempotencyTable.Arn"}
    assert idempotency == {f"dynamodb:{a}" for a in ("DeleteItem", "GetItem", "PutItem", "UpdateItem")}
    assert all("*" not in json.dumps(s["Action"]) and s["Resource"] != "*" for s in statements)


@pytest.mark.parametrize("event_file", RETRIEVE_QUEUE_EVENT_FILES, ids=lambda p: p.name)
def test_queue_handler_answers_the_sqs_event_as_a_user_expects(
    event_file: Path,
    sample_store: Any,
    moto: MotoServer,
    aws_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from retrieval_core.settings import get_settings

    sqs = moto.client("sqs")
    results = sqs.create_queue(QueueName=f"results-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    table = f"idempotency-{uuid.uuid4().hex[:8]}"
    create_idempotency_table(moto.client("dynamodb"), table)
    for key, value in {
        "RESULTS_QUEUE_URL": results,
        "IDEMPOTENCY_TABLE_NAME": table,
        "SQS_ENDPOINT_URL": moto.endpoint_url,
        "DYNAMODB_ENDPOINT_URL": moto.endpoint_url,
    }.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    try:
        handler = load_handler_module("retrieve_queue").handler
        event = load_event(event_file)
        response = handler(event, FakeLambdaContext(function_name="retrieve_queue"))
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()

    assert response == {"batchItemFailures": []}
    messages = sqs.receive_message(QueueUrl=results, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    replies = {
        m["MessageAttributes"]["requestId"]["StringValue"]: json.loads(m["Body"])
        for m in messages["Messages"]
    }
    assert set(replies) == {json.loads(r["body"])["requestId"] for r in event["Records"]}
    check_retrieve_reply_ok = replies["job-7f3a-0001"]
    assert check_retrieve_reply_ok["status"] == "ok"
    assert_ranked_chunks(check_retrieve_reply_ok["response"], "k8s-scheduling", grade=0.3)
    facilities = replies["job-7f3a-0002"]
    assert facilities["status"] == "ok"
    assert_ranked_chunks(facilities["response"], "hvac-cold-complaints", grade=0.2)
    assert {r["metadata"]["project_name"] for r in facilities["response"]["results"]} == {"Facilities"}
    invalid = replies["job-7f3a-0003"]
    assert invalid["status"] == "error" and invalid["error"]["code"] == "validation_error"
    assert invalid["error"]["details"]["errors"][0]["field"] == "grade"


def test_handler_emits_latency_and_result_count_metrics(
    handlers: dict[str, Callable[[Event, Any], Response]], capsys: pytest.CaptureFixture[str]
) -> None:
    event = load_event(EVENTS_DIR / "similarity-search.json")
    capsys.readouterr()
    response = handlers["similarity_search"](event, FakeLambdaContext(function_name="similarity_search"))
    assert response["statusCode"] == 200
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    request_metrics = [b for b in blobs if "Latency" in b]
    assert len(request_metrics) == 1, blobs
    metric = request_metrics[0]
    assert metric["route"] == "POST /api/v1/chunks/similarity-search"
    # EMF carries each metric's values as a list.
    assert metric["ResultCount"] == [3.0]
    assert 0 < metric["Latency"][0] < 10_000
    directive = metric["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "RetrievalService"
    units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert units["Latency"] == "Milliseconds" and units["ResultCount"] == "Count"


# Subprocess tests: a fresh interpreter per scenario, so the handler is built from the environment the
# way Lambda builds it, and this process's shared service is left alone.

DRIVER = textwrap.dedent(
    """
    import importlib.util, json, sys

    handler_file, commands_file, results_file = sys.argv[1:4]

    class Context:
        function_name = "retrieval-test"
        function_version = "1"
        memory_limit_in_mb = 1024
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:retrieval-test:live"
        aws_request_id = "6f1c3c9e-1111-4222-8333-944455556666"
        log_group_name = "/aws/lambda/retrieval-test"
        log_stream_name = "stream"

        def get_remaining_time_in_millis(self):
            return 29000

    spec = importlib.util.spec_from_file_location("lambda_app", handler_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = {"modules": sorted(m for m in sys.modules), "responses": []}
    for command in json.loads(open(commands_file).read()):
        if "invoke" in command:
            event = json.loads(open(command["invoke"]).read())
            results["responses"].append(module.handler(event, Context()))
        elif "put_secret" in command:
            import boto3
            boto3.client("secretsmanager").put_secret_value(
                SecretId=command["put_secret"]["arn"], SecretString=json.dumps(command["put_secret"]["value"])
            )
        elif "restore" in command:
            import snapshot_restore_py
            results["hooks"] = len(snapshot_restore_py.AFTER_RESTORE)
            for hook, args, kwargs in snapshot_restore_py.AFTER_RESTORE:
                hook(*args, **kwargs)
    with open(results_file, "w") as out:
        json.dump(results, out)
    """
)

# Stands in for the module Lambda's managed Python runtimes ship for SnapStart.
FAKE_SNAPSHOT_RESTORE_PY = textwrap.dedent(
    """
    AFTER_RESTORE = []
    BEFORE_SNAPSHOT = []

    def register_after_restore(func, *args, **kwargs):
        AFTER_RESTORE.append((func, args, kwargs))
        return func

    def register_before_snapshot(func, *args, **kwargs):
        BEFORE_SNAPSHOT.append((func, args, kwargs))
        return func
    """
)


@dataclass
class Run:
    """What one subprocess run produced."""

    responses: list[Response]
    modules: list[str]
    output: str  # stdout and stderr: Powertools logs and EMF metrics
    hooks: int | None

    def bodies(self) -> list[dict[str, Any]]:
        return [body_of(r) for r in self.responses]

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.output.splitlines():
            if line.startswith("{") and '"level"' in line:
                records.append(json.loads(line))
        return records

    def metric_blobs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.output.splitlines() if line.startswith('{"_aws"')]


def run_handler(
    folder: str,
    commands: list[dict[str, Any]],
    env: dict[str, str],
    tmp_path: Path,
    *,
    snapstart: bool = False,
) -> Run:
    commands_file = tmp_path / "commands.json"
    results_file = tmp_path / "results.json"
    commands_file.write_text(json.dumps(commands))
    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HUB_OFFLINE": "1",
        "AWS_LAMBDA_FUNCTION_NAME": "retrieval-test",
        "POWERTOOLS_SERVICE_NAME": "retrieval-service",
        "POWERTOOLS_METRICS_NAMESPACE": "RetrievalService",
        "AUTO_MIGRATE": "false",
        "EMBEDDING_PROVIDER": "local",
        # This checkout's layer, as Lambda puts the layer on sys.path (not whatever the venv installed).
        "PYTHONPATH": str(REPO_ROOT / "layers" / "retrieval_core"),
        **env,
    }
    if snapstart:
        stub_dir = tmp_path / "runtime"
        stub_dir.mkdir(exist_ok=True)
        (stub_dir / "snapshot_restore_py.py").write_text(FAKE_SNAPSHOT_RESTORE_PY)
        full_env["PYTHONPATH"] = f"{stub_dir}{os.pathsep}{full_env['PYTHONPATH']}"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            DRIVER,
            str(FUNCTIONS_DIR / folder / "app.py"),
            str(commands_file),
            str(results_file),
        ],
        env=full_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(results_file.read_text())
    return Run(results["responses"], results["modules"], proc.stdout + proc.stderr, results.get("hooks"))


AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture()
def aws_database_env(postgres_dsn: str, moto: MotoServer, sample_store: Any) -> dict[str, str]:
    """DATABASE_HOST/PORT/NAME of the test database, as template.yaml passes them; no DATABASE_URL."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(postgres_dsn)
    return {
        "DATABASE_HOST": str(parts["host"]),  # the unix socket folder: libpq takes it as a host
        "DATABASE_PORT": str(parts.get("port") or 5432),
        "DATABASE_NAME": str(parts["dbname"]),
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": moto.endpoint_url,
        **AWS_TEST_ENV,
    }


@pytest.fixture()
def read_role(service_roles: Any) -> str:
    """The user a read function's secret names: the serving role, as in the deployed stack."""
    return str(service_roles.serve)


def create_secret(moto: MotoServer, value: dict[str, str]) -> str:
    created = moto.client("secretsmanager").create_secret(
        Name=f"retrieval/db-{uuid.uuid4().hex[:8]}", SecretString=json.dumps(value)
    )
    arn: str = created["ARN"]
    return arn


SEARCH_EVENT = str(EVENTS_DIR / "similarity-search.json")


def test_handler_import_loads_no_ml_library_genai_or_boto3(tmp_path: Path) -> None:
    env = {"DATABASE_URL": "postgresql://nobody@db.invalid/none"}
    for folder in sorted(set(ROUTES.values())):
        run = run_handler(folder, [], env, tmp_path)
        heavy = {"torch", "numpy", "sentence_transformers", "google.genai", "boto3"} & set(run.modules)
        assert not heavy, f"{folder} imports {heavy} at import time"


def test_secret_credentials_recover_after_rotation_and_never_leak(
    aws_database_env: dict[str, str], read_role: str, moto: MotoServer, tmp_path: Path
) -> None:
    old_password = f"old-{uuid.uuid4().hex}"
    new_password = f"new-{uuid.uuid4().hex}"
    # The secret names a role that no longer exists, as after a botched rotation.
    arn = create_secret(moto, {"username": "rotated_away", "password": old_password})
    env = {**aws_database_env, "DATABASE_SECRET_ARN": arn}
    run = run_handler(
        "similarity_search",
        [
            {"invoke": SEARCH_EVENT},
            {"put_secret": {"arn": arn, "value": {"username": read_role, "password": new_password}}},
            {"invoke": SEARCH_EVENT},
        ],
        env,
        tmp_path,
    )
    failed, recovered = run.bodies()
    assert run.responses[0]["statusCode"] == 500
    # A role the server does not know (SQLSTATE 28000): credentials refused, not an outage.
    assert failed["error"]["code"] == "database_misconfigured"
    assert "refused this service's credentials or database" in failed["error"]["message"]
    assert "rotated_away" not in failed["error"]["message"]
    # The failure made the instance drop its connection and cached secret: the fix applies at once.
    assert run.responses[1]["statusCode"] == 200
    check_similarity_search(200, recovered)

    everything = run.output + json.dumps(run.responses)
    for secret in (old_password, new_password, aws_database_env["DATABASE_HOST"]):
        assert secret not in everything
    records = run.log_records()
    served = [r for r in records if r.get("message") == "request served"]
    assert [r["status"] for r in served] == [500, 200]
    assert all(r["correlation_id"] == "Ux05bJvqIAMEbQ=" for r in served)
    assert all(r["function_name"] == "retrieval-test" for r in served)
    # The core's own error line comes out through Powertools too, as JSON with the correlation id.
    core_errors = [
        r for r in records if r.get("name", "").startswith("retrieval_core") and r["level"] == "ERROR"
    ]
    assert core_errors and core_errors[0]["correlation_id"] == "Ux05bJvqIAMEbQ="
    metrics = [m for m in run.metric_blobs() if "Latency" in m]
    assert [m.get("ServerErrors") for m in metrics] == [[1.0], None]
    assert metrics[1]["ResultCount"] == [3.0]


def test_snapstart_restore_hook_reconnects_and_rereads_the_secret(
    aws_database_env: dict[str, str], read_role: str, moto: MotoServer, tmp_path: Path
) -> None:
    arn = create_secret(moto, {"username": read_role, "password": "first"})
    env = {**aws_database_env, "DATABASE_SECRET_ARN": arn}
    run = run_handler(
        "similarity_search",
        [
            {"invoke": SEARCH_EVENT},
            {"put_secret": {"arn": arn, "value": {"username": "rotated_away", "password": "second"}}},
            {"invoke": SEARCH_EVENT},
            {"restore": True},
            {"invoke": SEARCH_EVENT},
        ],
        env,
        tmp_path,
        snapstart=True,
    )
    assert run.hooks == 1
    statuses = [r["statusCode"] for r in run.responses]
    # Warm: the open connection and the cached secret are reused. Restored: both are fetched anew.
    assert statuses == [200, 200, 500]


# What Lambda sets for each invocation of a function with `Tracing: Active`.
TRACE_ID = "1-6920f3a0-afca48e959ea5a28b8a488e0"
LAMBDA_TRACE_HEADER = f"Root={TRACE_ID};Parent=53995c3f42cd8ad8;Sampled=1"


@pytest.mark.parametrize("initialization", ["on-demand", "snap-start"])
def test_the_first_request_is_traced_with_its_aws_calls_however_the_function_was_initialised(
    aws_database_env: dict[str, str], read_role: str, moto: MotoServer, tmp_path: Path, initialization: str
) -> None:
    arn = create_secret(moto, {"username": read_role, "password": "any"})
    with XRayDaemon() as daemon:
        env = {
            **aws_database_env,
            "DATABASE_SECRET_ARN": arn,
            "LAMBDA_TASK_ROOT": str(tmp_path),  # in Lambda: tracing on
            "AWS_LAMBDA_INITIALIZATION_TYPE": initialization,
            "AWS_XRAY_DAEMON_ADDRESS": daemon.address,
            "_X_AMZN_TRACE_ID": LAMBDA_TRACE_HEADER,
        }
        run = run_handler("similarity_search", [{"invoke": SEARCH_EVENT}], env, tmp_path)
        documents = daemon.documents()
    assert run.responses[0]["statusCode"] == 200, run.output[-6000:]

    # On demand, the request waits for the init: the X-Ray SDK and botocore are left to it. A SnapStart
    # init runs before any request, and its snapshot keeps both loaded.
    loaded_by_init = {"aws_xray_sdk", "botocore.client"} & set(run.modules)
    assert loaded_by_init == (set() if initialization == "on-demand" else {"aws_xray_sdk", "botocore.client"})
    (handler,) = [d for d in documents if d["name"] == "## invoke"]
    assert handler["annotations"]["ColdStart"] is True
    assert handler["trace_id"] == TRACE_ID
    # The secret read by the first request went through a botocore already patched, in that request's
    # trace. Its parent is the function's segment, not `## invoke`: FastAPI runs the route in a worker
    # thread, where the X-Ray context (thread-local) holds no subsegment.
    calls = [
        (d["name"], d["aws"]["operation"], d["trace_id"]) for d in documents if d.get("namespace") == "aws"
    ]
    assert calls == [("secretsmanager", "GetSecretValue", TRACE_ID)]


def test_rds_iam_auth_builds_a_tls_conninfo_with_a_signed_token(monkeypatch: pytest.MonkeyPatch) -> None:
    # Built in-process, not connected: the test database only listens on a unix socket without TLS,
    # while RDS IAM auth requires TLS to a DNS host.
    from psycopg.conninfo import conninfo_to_dict

    from retrieval_core.db.credentials import aws_conninfo
    from retrieval_core.settings import Settings

    for key, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(key, value)
    settings = Settings(
        _env_file=None,
        database_host="rag-proxy.proxy-abc123.us-east-1.rds.amazonaws.com",
        database_port=5432,
        database_name="rag",
        database_user="retrieval_app",
        database_iam_auth=True,
    )
    parts = conninfo_to_dict(aws_conninfo(settings))
    assert parts["host"] == "rag-proxy.proxy-abc123.us-east-1.rds.amazonaws.com"
    assert (parts["port"], parts["dbname"], parts["user"], parts["sslmode"]) == (
        "5432",
        "rag",
        "retrieval_app",
        "require",
    )
    token = str(parts["password"])
    assert token.startswith("rag-proxy.proxy-abc123.us-east-1.rds.amazonaws.com:5432/?")
    assert "Action=connect" in token and "DBUser=retrieval_app" in token and "X-Amz-Signature=" in token


@pytest.mark.parametrize(
    ("extra_env", "named"),
    [
        ({}, ("DATABASE_SECRET_ARN", "DATABASE_IAM_AUTH")),
        ({"DATABASE_IAM_AUTH": "true"}, ("DATABASE_USER",)),
    ],
    ids=["no-credentials", "iam-without-user"],
)
def test_database_host_without_usable_credentials_is_a_clear_configuration_error(
    aws_database_env: dict[str, str], tmp_path: Path, extra_env: dict[str, str], named: tuple[str, ...]
) -> None:
    run = run_handler(
        "similarity_search", [{"invoke": SEARCH_EVENT}], {**aws_database_env, **extra_env}, tmp_path
    )
    assert run.responses[0]["statusCode"] == 500
    error = run.bodies()[0]["error"]
    assert error["code"] == "configuration_error"
    assert all(name in error["message"] for name in named), error["message"]


def route_pattern(template: str) -> str:
    """A regex of the paths an HTTP API route serves: `{name}` one segment, greedy `{name+}` the rest."""
    parts = re.split(r"(\{\w+\+?\})", template)
    return "".join(
        (".+" if part.endswith("+}") else "[^/]+") if part.startswith("{") else re.escape(part)
        for part in parts
    )
