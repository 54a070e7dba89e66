"""What every Lambda handler of the layer shares: when to trace, what to patch, the SnapStart hook.

Kept apart from the HTTP handler factory so that a handler without HTTP (the queue function) does
not import FastAPI and Mangum at cold start.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aws_lambda_powertools.logging import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import Metrics, MetricUnit

from retrieval_core import container
from retrieval_core.clients.aws import aws_client, handler_options
from retrieval_core.clients.secret_store import forget_cached_secrets
from retrieval_core.lambdas.events import split_sqs_event
from retrieval_core.lambdas.tracing import LambdaHandler as LambdaHandler
from retrieval_core.lambdas.tracing import traced
from retrieval_core.settings import Settings, get_settings, in_lambda

DEFAULT_SERVICE_NAME = "retrieval-service"
# Used when POWERTOOLS_METRICS_NAMESPACE is unset (local runs): Powertools refuses to flush without one.
DEFAULT_METRICS_NAMESPACE = "RetrievalService"


@dataclass(frozen=True)
class Powertools:
    """The Logger and Metrics one handler reports through."""

    service: str
    logger: Logger
    metrics: Metrics


def powertools() -> Powertools:
    """Logger and Metrics named from the Powertools environment (with local defaults)."""
    service = os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    logger = Logger(service=service)
    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_METRICS_NAMESPACE
    if in_lambda():
        # The core's own log lines then come out as JSON with the correlation id too. Only in Lambda:
        # elsewhere this would detach the `retrieval_core` loggers from the root logger (and from pytest).
        copy_config_to_registered_loggers(source_logger=logger, include={"retrieval_core"})
    return Powertools(service, logger, Metrics(namespace=namespace, service=service))


def instrumented(
    invoke: LambdaHandler,
    tools: Powertools,
    *,
    also_trace: tuple[str, ...] = (),
    correlation_id_path: str | None = None,
    embeds: bool = True,
) -> LambdaHandler:
    """`invoke` with Lambda context in logs, metrics flushed per invocation and, in Lambda, X-Ray tracing
    (loaded as late as the first request allows: see lambda_tracing).

    `embeds`: whether the function calls the embedding provider (its client is then traced)."""
    if tracing_enabled():
        modules = tuple(dict.fromkeys((*traced_modules(get_settings(), embeds), *also_trace)))
        invoke = traced(invoke, tools.service, modules)
    handler: LambdaHandler = tools.logger.inject_lambda_context(
        tools.metrics.log_metrics(invoke, capture_cold_start_metric=True),
        correlation_id_path=correlation_id_path,
    )
    return handler


def tracing_enabled() -> bool:
    """True where Powertools would trace: inside Lambda, not under `sam local`, not disabled by env."""
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in ("1", "true", "yes", "on"):
        return False
    return "LAMBDA_TASK_ROOT" in os.environ and "AWS_SAM_LOCAL" not in os.environ


def traced_modules(settings: Settings, embeds: bool = True) -> tuple[str, ...]:
    """The libraries the X-Ray SDK should instrument for this configuration.

    Only what the function will call: patching a library imports it, and patching everything (the
    Powertools default) would import requests, sqlite3 and more at cold start for nothing.
    """
    modules = []
    if embeds and settings.embedding_provider in ("openai", "gemini"):
        modules.append("httpx")
    aws_credentials = settings.database_url is None and (
        settings.database_secret_arn or settings.database_iam_auth
    )
    if (embeds and settings.embedding_provider == "bedrock") or aws_credentials:
        modules.append("botocore")
    return tuple(modules)


def after_database_failure() -> None:
    """The next request reconnects with a freshly read secret or a new IAM token.

    A rotated password or an expired token must not keep this instance failing until it is recycled.
    """
    forget_cached_secrets()
    container.reset_service()


def _after_snapshot_restore() -> None:
    # Every instance restored from one snapshot would otherwise draw the same retry jitter.
    random.seed()
    forget_cached_secrets()
    container.reset_service()


def _register_snapstart_hooks() -> None:
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        # Only Lambda's managed Python runtimes ship snapshot_restore_py; elsewhere there is no snapshot.
        return
    register_after_restore(_after_snapshot_restore)


_register_snapstart_hooks()


def idempotent_on_dynamodb(
    function: Callable[..., dict[str, Any]],
    data_keyword_argument: str,
    config: Any,
    settings: Settings,
    key_prefix: str,
) -> Callable[..., dict[str, Any]]:
    """`function` run at most once per key (Powertools idempotency, records in IDEMPOTENCY_TABLE_NAME)."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function

    persistence = DynamoDBPersistenceLayer(
        table_name=settings.idempotency_table_name or "",
        boto3_client=aws_client(
            "dynamodb", handler_options(settings.dynamodb_endpoint_url, read_timeout_s=5)
        ),
    )
    once: Callable[..., dict[str, Any]] = idempotent_function(
        function,
        data_keyword_argument=data_keyword_argument,
        persistence_store=persistence,
        config=config,
        key_prefix=key_prefix,
    )
    return once


class BatchHandling(Protocol):
    """What an SQS-triggered processor does with one invocation's batch."""

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """Process the batch; the partial-failure response."""
        ...


def build_sqs_handler(make_processor: Callable[[Powertools], BatchHandling]) -> LambdaHandler:
    """An SQS-triggered handler: the processor built on the first invocation (it creates the boto3
    clients), one log line and batch metrics per invocation, and botocore traced (SQS, S3 and
    DynamoDB calls are made whatever the configuration)."""
    tools = powertools()
    powertools_logger, emf = tools.logger, tools.metrics
    lock = threading.Lock()
    built: list[BatchHandling] = []

    def processor() -> BatchHandling:
        with lock:
            if not built:
                built.append(make_processor(tools))
            return built[0]

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        # Powertools loggers share their keys: another handler's correlation id must not leak in here.
        powertools_logger.set_correlation_id(None)
        started = time.perf_counter()
        batch = split_sqs_event(event)
        records = len(batch.records) + len(batch.failed_ids)
        if batch.problems:
            # Never sent by SQS itself: a direct invoke or a misrouted trigger. Logged, never raised on;
            # a malformed record with a messageId is failed, so it is retried and then dead-lettered.
            powertools_logger.error("malformed SQS event", extra={"problems": batch.problems[:10]})
            emf.add_metric(name="MalformedRecords", unit=MetricUnit.Count, value=len(batch.problems))
        response: dict[str, Any] = {"batchItemFailures": []}
        if batch.records:
            response = processor().handle({**event, "Records": batch.records}, context)
        response["batchItemFailures"] = [
            *response.get("batchItemFailures", []),
            *({"itemIdentifier": message_id} for message_id in batch.failed_ids),
        ]
        failures = len(response["batchItemFailures"])
        latency_ms = (time.perf_counter() - started) * 1000.0
        emf.add_metric(name="BatchLatency", unit=MetricUnit.Milliseconds, value=latency_ms)
        emf.add_metric(name="Messages", unit=MetricUnit.Count, value=records)
        emf.add_metric(name="BatchItemFailures", unit=MetricUnit.Count, value=failures)
        powertools_logger.info(
            "batch processed",
            extra={"records": records, "failures": failures, "latencyMs": round(latency_ms, 2)},
        )
        return response

    return instrumented(invoke, tools, also_trace=("botocore",))
