"""Wrap the app factory for API Gateway (HTTP API, payload v2) through Mangum, with Powertools.

Every handler logs JSON with the request id as correlation id (the caller's `x-request-id` when usable,
else API Gateway's request id; echoed on the response), answers a malformed event 400 `bad_request`
instead of raising, emits latency and result
count metrics (CloudWatch EMF), and is traced with X-Ray when the function runs with tracing on.
Building a handler imports no ML library, no google.genai and creates no boto3 client; nothing
connects to the database until the first request.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from fastapi import APIRouter
from mangum import Mangum

from retrieval_core.api.app import create_app
from retrieval_core.api.errors import retrieval_error_response
from retrieval_core.api.request_id import REQUEST_ID_HEADER, mint_request_id, usable_request_id
from retrieval_core.exceptions import BadRequestError, ResponseTooLargeError, RetrievalError
from retrieval_core.lambdas.events import http_event_problem
from retrieval_core.lambdas.setup import after_database_failure, instrumented, powertools
from retrieval_core.lambdas.tracing import LambdaHandler
from retrieval_core.search.reply_size import LAMBDA_PAYLOAD_BYTES, RESPONSE_ENVELOPE_BYTES

# Answers after which the instance drops its connection and cached credentials: an outage, or credentials
# refused (a rotated secret, an expired IAM token), which heal by reconnecting with fresh ones.
DATABASE_FAILURE_CODES = frozenset({"database_unavailable", "database_misconfigured"})


def build_handler(*routers: APIRouter, embeds: bool = True) -> LambdaHandler:
    """A Lambda handler serving `routers` behind Powertools logging, metrics and (in Lambda) tracing.

    `embeds`: whether these routes call the embedding provider, whose client is then traced (patching
    it imports it at cold start)."""
    asgi = Mangum(create_app(*routers), lifespan="off")
    tools = powertools()
    logger, metrics = tools.logger, tools.metrics

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        _with_own_event_loop()
        problem = http_event_problem(event)
        if problem is not None:
            request_id = mint_request_id()
            logger.set_correlation_id(request_id)
            logger.warning("malformed event answered 400", extra={"problem": problem})
            return bad_request(problem, request_id)
        event = with_request_id(event)
        logger.set_correlation_id(event["headers"][REQUEST_ID_HEADER])
        response: dict[str, Any] = fitted(asgi(event, context))
        latency_ms = (time.perf_counter() - started) * 1000.0
        status = int(response.get("statusCode", 500))
        body = _json_body(response) if status == 200 or status >= 500 else None
        results = body.get("totalResults") if body is not None else None

        route = _route_key(event)
        metrics.add_dimension(name="route", value=route)
        metrics.add_metric(name="Latency", unit=MetricUnit.Milliseconds, value=latency_ms)
        if isinstance(results, int):
            metrics.add_metric(name="ResultCount", unit=MetricUnit.Count, value=results)
        if status >= 500:
            metrics.add_metric(name="ServerErrors", unit=MetricUnit.Count, value=1)
        logger.info(
            "request served",
            extra={"route": route, "status": status, "latencyMs": round(latency_ms, 2), "results": results},
        )
        if status >= 500 and body is not None and _database_failed(body):
            after_database_failure()
        return response

    return instrumented(invoke, tools, correlation_id_path=correlation_paths.API_GATEWAY_HTTP, embeds=embeds)


_loop: asyncio.AbstractEventLoop | None = None


def _with_own_event_loop() -> None:
    """Make the process's own loop the thread's: Mangum runs each event on `asyncio.get_event_loop()`,
    which fails once anything in the process ran `asyncio.run` (it clears the thread's loop on exit),
    and which Python 3.14 no longer creates on demand."""
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_loop)


def with_request_id(event: dict[str, Any]) -> dict[str, Any]:
    """`event` whose x-request-id header is the caller's usable id, else API Gateway's, else a new one."""
    headers = event.get("headers") or {}
    request_id = (
        usable_request_id(headers.get(REQUEST_ID_HEADER))
        or usable_request_id(event["requestContext"].get("requestId"))
        or mint_request_id()
    )
    return {**event, "headers": {**headers, REQUEST_ID_HEADER: request_id}}


def bad_request(problem: str, request_id: str) -> dict[str, Any]:
    """The 400 `bad_request` response (payload 2.0) to an event that is not an HTTP API event."""
    return _error_payload(BadRequestError(f"malformed Lambda event: {problem}"), request_id)


def fitted(response: dict[str, Any]) -> dict[str, Any]:
    """`response`, or 413 `response_too_large` when it would not fit Lambda's 6 MB response payload.

    Lambda would otherwise fail the invocation, and API Gateway answer a bare 500.
    """
    body = response.get("body")
    # A body of this many characters fits however the runtime escapes it (\uXXXX: 6 bytes a character).
    if not isinstance(body, str) or len(body) * 6 < LAMBDA_PAYLOAD_BYTES - RESPONSE_ENVELOPE_BYTES:
        return response
    size = len(json.dumps(response))
    if size <= LAMBDA_PAYLOAD_BYTES:
        return response
    error = ResponseTooLargeError(size, LAMBDA_PAYLOAD_BYTES, "a Lambda response may hold")
    return _error_payload(error, str((response.get("headers") or {}).get(REQUEST_ID_HEADER, "")))


def _error_payload(error: RetrievalError, request_id: str) -> dict[str, Any]:
    response = retrieval_error_response(error)
    return {
        "statusCode": response.status_code,
        "headers": {"content-type": "application/json", REQUEST_ID_HEADER: request_id},
        "body": bytes(response.body).decode(),
        "isBase64Encoded": False,
    }


def _route_key(event: dict[str, Any]) -> str:
    # routeKey is one of the API's declared routes, so the metric dimension cannot explode with
    # arbitrary paths the way rawPath could.
    route = event.get("routeKey")
    return route if isinstance(route, str) and route else "unknown"


def _json_body(response: dict[str, Any]) -> dict[str, Any] | None:
    body = response.get("body")
    if response.get("isBase64Encoded") or not isinstance(body, str) or not body.startswith("{"):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _database_failed(body: dict[str, Any]) -> bool:
    # Only an unreachable or failing database: a rotated secret or an expired token heals by reconnecting.
    # A busy one (overloaded) or a schema behind the code (schema_not_ready) would not: the connection stays.
    error = body.get("error")
    if isinstance(error, dict):
        return error.get("code") in DATABASE_FAILURE_CODES
    checks = body.get("checks")
    database = checks.get("database") if isinstance(checks, dict) else None
    return isinstance(database, dict) and database.get("status") == "failed"
