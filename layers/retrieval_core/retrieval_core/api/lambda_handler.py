"""Wrap the app factory for API Gateway (HTTP API, payload v2) through Mangum, with Powertools.

Every handler logs JSON with the API Gateway request id as correlation id, emits latency and result
count metrics (CloudWatch EMF), and is traced with X-Ray when the function runs with tracing on.
Building a handler imports no ML library, no google.genai and creates no boto3 client; nothing
connects to the database until the first request.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.logging import Logger, correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import Metrics, MetricUnit
from fastapi import APIRouter
from mangum import Mangum

from ..lambda_runtime import after_database_failure, traced_modules, tracing_enabled
from ..runtime_env import in_lambda
from ..settings import get_settings
from .app import create_app

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]

SERVICE_NAME_ENV = "POWERTOOLS_SERVICE_NAME"
METRICS_NAMESPACE_ENV = "POWERTOOLS_METRICS_NAMESPACE"
DEFAULT_SERVICE_NAME = "retrieval-service"
# Used when POWERTOOLS_METRICS_NAMESPACE is unset (local runs): Powertools refuses to flush without one.
DEFAULT_METRICS_NAMESPACE = "RetrievalService"
DATABASE_FAILURE_CODE = "database_unavailable"


def build_handler(*routers: APIRouter) -> LambdaHandler:
    """A Lambda handler serving `routers` behind Powertools logging, metrics and (in Lambda) tracing."""
    asgi = Mangum(create_app(*routers), lifespan="off")
    service = os.environ.get(SERVICE_NAME_ENV) or DEFAULT_SERVICE_NAME
    logger = Logger(service=service)
    metrics = Metrics(
        namespace=os.environ.get(METRICS_NAMESPACE_ENV) or DEFAULT_METRICS_NAMESPACE, service=service
    )
    if in_lambda():
        # The core's own log lines then come out as JSON with the correlation id too. Only in Lambda:
        # elsewhere this would detach the `retrieval_core` loggers from the root logger (and from pytest).
        copy_config_to_registered_loggers(source_logger=logger, include={"retrieval_core"})

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        response: dict[str, Any] = asgi(event, context)
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

    traced = invoke
    if tracing_enabled():
        from aws_lambda_powertools.tracing import Tracer

        modules = traced_modules(get_settings())
        tracer = Tracer(service=service, auto_patch=bool(modules), patch_modules=modules or None)
        # Responses carry document text: keep them out of trace metadata.
        traced = tracer.capture_lambda_handler(invoke, capture_response=False)

    handler: LambdaHandler = logger.inject_lambda_context(
        metrics.log_metrics(traced, capture_cold_start_metric=True),
        correlation_id_path=correlation_paths.API_GATEWAY_HTTP,
    )
    return handler


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
    error = body.get("error")
    if isinstance(error, dict) and error.get("code") == DATABASE_FAILURE_CODE:
        return True
    return body.get("database") == "unreachable"
