"""Malformed Lambda events: every HTTP handler answers 400 `bad_request`, every SQS
handler answers a batch response; none raises. The events are events/*.json, truncated and mistyped."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EVENTS_DIR
from tests.functional.test_handlers import (  # noqa: F401 (handlers, no_handbook_store: fixtures)
    FakeLambdaContext,
    handlers,
    load_event,
    load_handler_module,
    no_handbook_store,
)

Event = dict[str, Any]


def _set(path: str, value: Any) -> Callable[[Event], Any]:
    def apply(event: Event) -> Any:
        *parents, last = path.split(".")
        target = event
        for name in parents:
            target = target[name]
        target[last] = value
        return event

    return apply


def _drop(path: str) -> Callable[[Event], Any]:
    def apply(event: Event) -> Any:
        *parents, last = path.split(".")
        target = event
        for name in parents:
            target = target[name]
        del target[last]
        return event

    return apply


HTTP_MUTATIONS: dict[str, Callable[[Event], Any]] = {
    "not-an-object": lambda _: ["not", "an", "event"],
    "a-string": lambda _: "GET /api/v1/health",
    "empty-object": lambda _: {},
    "truncated": lambda event: {k: event[k] for k in list(event)[:3]},
    "no-requestContext": _drop("requestContext"),
    "requestContext-string": _set("requestContext", "x"),
    "requestContext-empty": _set("requestContext", {}),
    "no-http": _drop("requestContext.http"),
    "method-number": _set("requestContext.http.method", 5),
    "no-rawPath": _drop("rawPath"),
    "version-1.0": _set("version", "1.0"),
    "headers-string": _set("headers", "x"),
    "header-number": _set("headers.accept", 5),
    "query-string-number": _set("rawQueryString", 5),
    "query-parameters-list": _set("queryStringParameters", ["name"]),
    "cookies-string": _set("cookies", "a=b"),
    "body-number": _set("body", 5),
    "body-object": _set("body", {"query": "q"}),
    "isBase64Encoded-string": _set("isBase64Encoded", "yes"),
    "bad-base64": lambda event: {**event, "isBase64Encoded": True, "body": "not base64!"},
}

# One event of each HTTP function: the handler must refuse the event, whatever route it names.
HTTP_EVENTS = {
    "retrieve": "retrieve.json",
    "similarity_search": "similarity-search.json",
    "resolve_store": "resolve-store.json",
    "documents": "stores-09-get.json",
}


@pytest.mark.parametrize("folder", sorted(HTTP_EVENTS))
@pytest.mark.parametrize("mutation", sorted(HTTP_MUTATIONS))
def test_a_malformed_http_event_is_a_400(
    handlers: dict[str, Callable[[Event, Any], Any]],  # noqa: F811
    folder: str,
    mutation: str,
) -> None:
    event = HTTP_MUTATIONS[mutation](load_event(EVENTS_DIR / HTTP_EVENTS[folder]))
    response = handlers[folder](copy.deepcopy(event), FakeLambdaContext(function_name=folder))
    assert response["statusCode"] == 400, response
    assert response["headers"]["x-request-id"]
    error = json.loads(response["body"])["error"]
    assert error["code"] == "bad_request" and error["message"].startswith("malformed Lambda event: ")


SQS_MUTATIONS: dict[str, Callable[[Event], Any]] = {
    "not-an-object": lambda _: [],
    "no-Records": lambda _: {},
    "Records-string": _set("Records", "x"),
    "record-null": lambda event: {"Records": [None]},
    "record-without-messageId": lambda event: {"Records": [{"body": "{}"}]},
    "record-without-body": lambda event: {"Records": [{"messageId": "m-1"}]},
    "record-body-object": lambda event: {"Records": [{"messageId": "m-1", "body": {"query": "q"}}]},
    "messageAttributes-string": lambda event: {
        "Records": [{"messageId": "m-1", "body": "{}", "messageAttributes": "x"}]
    },
}


@pytest.mark.parametrize("folder", ["retrieve_queue", "ingest"])
@pytest.mark.parametrize("mutation", sorted(SQS_MUTATIONS))
def test_a_malformed_sqs_event_is_answered_and_names_what_to_retry(
    service: Any, folder: str, mutation: str
) -> None:
    source = "sqs-retrieve.json" if folder == "retrieve_queue" else "sqs-ingest-put.json"
    event = SQS_MUTATIONS[mutation](load_event(Path(EVENTS_DIR / source)))
    handler = load_handler_module(folder).handler
    response = handler(event, FakeLambdaContext(function_name=folder))
    # A malformed record with a messageId is retried (then dead-lettered); one without cannot be named.
    named = mutation in {"record-without-body", "record-body-object", "messageAttributes-string"}
    expected = [{"itemIdentifier": "m-1"}] if named else []
    assert response == {"batchItemFailures": expected}
