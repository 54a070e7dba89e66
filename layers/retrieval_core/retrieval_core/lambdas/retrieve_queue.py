"""Queue-triggered retrieval: SQS batches of retrieve jobs in, exactly one reply per job out.

A message body is a retrieve request (the body of POST /api/v1/rag/retrieve) plus `requestId` and an
optional `replyTo` queue URL; with `"answer": true` it is an answer request (the body of POST
/api/v1/rag/answer). Each job is answered with `{requestId, status: "ok", response}` (or `answer`) or
`{requestId, status: "error", error: {code, message, details}}` on `replyTo` (which must be on the
allow-list) or on the results queue, with `requestId` also in the reply's message attributes.

- A permanent failure (malformed JSON, a validation error, an unknown store, a refused `replyTo`) is
  answered with an error reply and the message is acknowledged: retrying could not change the answer.
- A transient failure (database unreachable, embedding provider or SQS failing, the same requestId
  being answered elsewhere right now) is reported as a batch item failure: only that message comes
  back, and after the queue's maxReceiveCount it moves to the dead-letter queue.
- A message without a usable requestId is acknowledged without a reply (nobody could correlate one)
  and logged with its SQS messageId.
- Answering and replying run under Powertools idempotency keyed by requestId (DynamoDB): a redelivered
  or resent message whose requestId was answered within IDEMPOTENCY_TTL_S gets no second reply.

All queries of a batch are embedded in one provider call. Nothing here creates a boto3 client or
imports boto3 before the first invocation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from retrieval_core import container
from retrieval_core.backends.answers import final_answer
from retrieval_core.backends.router import shares_query_embedding
from retrieval_core.clients.aws import handler_options, lazy_aws_client
from retrieval_core.clients.deadline import LAMBDA_MARGIN_S, deadline_of, lambda_remaining_s
from retrieval_core.embeddings.batch import QueryVectors
from retrieval_core.exceptions import (
    ConfigurationError,
    DatabaseUnavailableError,
    InvalidRequestError,
    ResponseTooLargeError,
    RetrievalError,
)
from retrieval_core.grants import Grant, parse_store_setting
from retrieval_core.lambdas.exceptions import JobInProgressError, ReplyDeliveryError, ReplyToNotAllowedError
from retrieval_core.lambdas.setup import (
    after_database_failure,
    build_sqs_handler,
    idempotent_on_dynamodb,
)
from retrieval_core.lambdas.tracing import LambdaHandler
from retrieval_core.observability import metrics
from retrieval_core.observability.debug import DebugLog
from retrieval_core.schemas.answer import AnswerRequest
from retrieval_core.schemas.common import validation_error
from retrieval_core.schemas.retrieve import RetrieveRequest
from retrieval_core.search.reply_size import SQS_ATTRIBUTE_BYTES, SQS_MESSAGE_BYTES, sqs_body_bytes
from retrieval_core.settings import Settings, get_settings

logger = logging.getLogger(__name__)
debug = DebugLog(__name__)


REQUEST_ID = "requestId"
REPLY_TO = "replyTo"
# `"answer": true`: the job asks for a grounded answer (POST /api/v1/rag/answer) instead of chunks.
ANSWER = "answer"
IDEMPOTENCY_KEY_PREFIX = "retrieve-queue"
# A DynamoDB key part and an SQS attribute value: printable ASCII without spaces, bounded.
_USABLE_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
REQUEST_ID_RULE = "must be a string of 1-128 printable ASCII characters without spaces"


@dataclass
class Job:
    """One SQS message, read: either a request to answer, a permanent error to reply, or neither."""

    message_id: str
    request_id: str | None
    reply_to: str | None = None  # None: the results queue
    request: RetrieveRequest | None = None
    error: RetrievalError | None = None  # permanent, found while reading the message
    unrepliable: str | None = None  # why there is no requestId to reply to


def read_job(record: dict[str, Any], allowed_reply_queues: frozenset[str]) -> Job:
    """Parse and validate one SQS record's body; never raises."""
    message_id = str(record.get("messageId", ""))
    attribute_id = _attribute_request_id(record)
    try:
        payload = json.loads(record.get("body") or "")
    except json.JSONDecodeError as exc:
        return _job_with_error(
            message_id,
            attribute_id,
            InvalidRequestError.for_field("body", f"not valid JSON ({exc.msg})", "json_invalid"),
        )
    if not isinstance(payload, dict):
        return _job_with_error(
            message_id,
            attribute_id,
            InvalidRequestError.for_field("body", "must be a JSON object", "model_type"),
        )
    body_id = payload.pop(REQUEST_ID, None)
    if body_id is not None and not (isinstance(body_id, str) and _USABLE_REQUEST_ID.fullmatch(body_id)):
        return _job_with_error(
            message_id,
            attribute_id,
            InvalidRequestError.for_field(REQUEST_ID, REQUEST_ID_RULE, "value_error"),
        )
    request_id = body_id if body_id is not None else attribute_id
    if request_id is None:
        return Job(message_id, None, unrepliable="no requestId in the body or in the message attributes")
    if attribute_id is not None and attribute_id != request_id:
        return Job(
            message_id,
            request_id,
            error=InvalidRequestError.for_field(
                REQUEST_ID, "differs from the requestId message attribute", "value_error"
            ),
        )
    reply_to = payload.pop(REPLY_TO, None)
    if reply_to is not None and reply_to not in allowed_reply_queues:
        return Job(message_id, request_id, error=ReplyToNotAllowedError())
    wants_answer = payload.pop(ANSWER, False)
    if not isinstance(wants_answer, bool):
        error = InvalidRequestError.for_field(ANSWER, "must be true or false", "bool_type")
        return Job(message_id, request_id, reply_to, error=error)
    try:
        request = (AnswerRequest if wants_answer else RetrieveRequest).model_validate(payload)
    except ValidationError as exc:
        return Job(message_id, request_id, reply_to, error=validation_error(exc))
    return Job(message_id, request_id, reply_to, request=request)


def _job_state(job: Job) -> str:
    if job.request is not None:
        return "to answer"
    return f"error {job.error.code}" if job.error is not None else "unrepliable"


def _job_with_error(message_id: str, request_id: str | None, error: RetrievalError) -> Job:
    if request_id is None:
        return Job(message_id, None, unrepliable=f"{error.message}, and no requestId message attribute")
    return Job(message_id, request_id, error=error)


def _attribute_request_id(record: dict[str, Any]) -> str | None:
    attribute = (record.get("messageAttributes") or {}).get(REQUEST_ID) or {}
    value = attribute.get("stringValue")
    return value if isinstance(value, str) and _USABLE_REQUEST_ID.fullmatch(value) else None


def error_reply(request_id: str, error: RetrievalError) -> dict[str, Any]:
    """`{requestId, status: "error", error}`, the error being the HTTP API's error object."""
    return {
        REQUEST_ID: request_id,
        "status": "error",
        "error": {"code": error.code, "message": error.message, "details": error.details},
    }


@dataclass
class Batch:
    jobs: dict[str, Job]
    vectors: QueryVectors
    database_failed: bool = False


class QueueProcessor:
    """Answers SQS batches. Built on the first invocation: it creates the boto3 clients."""

    def __init__(self, settings: Settings, correlate: Callable[[str | None], None] | None = None) -> None:
        """`correlate` is told each job's requestId before it is answered (the log correlation id)."""
        self._correlate = correlate or (lambda _request_id: None)
        if not settings.results_queue_url:
            raise ConfigurationError("RESULTS_QUEUE_URL is not set: the queue function has nowhere to reply")
        if not settings.idempotency_table_name:
            raise ConfigurationError(
                "IDEMPOTENCY_TABLE_NAME is not set: without it a redelivered job would be answered twice"
            )
        self.results_queue_url = settings.results_queue_url
        # The request queue is bound to its stores: anyone allowed to send to it gets this grant.
        self.grant = Grant(
            "queue", frozenset({"read"}), parse_store_setting(settings.queue_stores, "QUEUE_STORES")
        )
        self.allowed_reply_queues = frozenset(
            {self.results_queue_url, *(u.strip() for u in settings.reply_queue_urls.split(",") if u.strip())}
        )
        self._sqs = lazy_aws_client("sqs", handler_options(settings.sqs_endpoint_url, read_timeout_s=5))

        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

        self.idempotency = IdempotencyConfig(
            event_key_jmespath=REQUEST_ID,
            raise_on_no_idempotency_key=True,
            expires_after_seconds=settings.idempotency_ttl_s,
            response_hook=self._already_answered,
        )
        self._answer_once = idempotent_on_dynamodb(
            self._answer, "job_key", self.idempotency, settings, IDEMPOTENCY_KEY_PREFIX
        )

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """`{"batchItemFailures": [...]}` naming exactly the messages to retry."""
        # The in-progress lock of a job expires with this invocation, so a crash cannot block its retry.
        self.idempotency.register_lambda_context(context)
        records = event.get("Records") or []
        jobs = {str(r.get("messageId", "")): read_job(r, self.allowed_reply_queues) for r in records}
        # Only the queries of a backend that embeds them go into the batch's one embedding call.
        # An answer's retrieve embeds its own query.
        queries = [
            job.request.query
            for job in jobs.values()
            if job.request is not None
            and not isinstance(job.request, AnswerRequest)
            and shares_query_embedding(job.request)
        ]
        batch = Batch(jobs, QueryVectors(queries))
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        # Outbound calls end before the function's Timeout: a job they could not finish is retried.
        remaining_s = lambda_remaining_s(context)
        try:
            with deadline_of(None if remaining_s is None else max(0.0, remaining_s - LAMBDA_MARGIN_S)):
                response = process_partial_response(
                    event=event,
                    record_handler=partial(self._process, batch),
                    processor=processor,
                    context=context,
                )
        finally:
            self._correlate(None)
            if batch.database_failed:
                after_database_failure()
        return dict(response)

    def _process(self, batch: Batch, record: SQSRecord) -> None:
        job = batch.jobs[record.message_id]
        self._correlate(job.request_id)
        debug("queue job %s (message %s): %s", job.request_id, job.message_id, _job_state(job))
        where = {"messageId": job.message_id, REQUEST_ID: job.request_id}
        if job.request_id is None:
            logger.warning("message acknowledged without a reply: %s", job.unrepliable, extra=where)
            metrics.count("UnrepliableMessages")
            return
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyInconsistentStateError,
            IdempotencyPersistenceLayerError,
        )

        try:
            self._answer_once(job_key={REQUEST_ID: job.request_id}, job=job, batch=batch)
        except IdempotencyAlreadyInProgressError as exc:
            in_progress = JobInProgressError("this requestId is being answered elsewhere")
            self._transient(job, in_progress)
            raise in_progress from exc
        except (IdempotencyPersistenceLayerError, IdempotencyInconsistentStateError):
            # The idempotency table failed: answering without it could answer twice, so retry later.
            self._transient(job, None)
            raise
        except RetrievalError as exc:
            # Permanent errors became error replies inside _answer; what arrives here is transient.
            if isinstance(exc, DatabaseUnavailableError):
                batch.database_failed = True
            self._transient(job, exc)
            raise

    def _transient(self, job: Job, error: RetrievalError | None) -> None:
        metrics.count("TransientFailures")
        logger.warning(
            "job failed transiently; the message will be retried",
            extra={
                "messageId": job.message_id,
                REQUEST_ID: job.request_id,
                "code": error.code if error is not None else "idempotency_store_unavailable",
            },
        )

    def _answer(self, job_key: dict[str, str], job: Job, batch: Batch) -> dict[str, Any]:
        """Run under idempotency: compute the reply and send it. The stored result is a summary only."""
        request_id = job_key[REQUEST_ID]
        reply = self._outcome(request_id, job, batch)
        destination = job.reply_to or self.results_queue_url
        self._send(destination, fitted(reply))
        logger.info(
            "reply sent",
            extra={
                "messageId": job.message_id,
                REQUEST_ID: request_id,
                "status": reply["status"],
                "code": reply.get("error", {}).get("code"),
            },
        )
        return {REQUEST_ID: request_id, "status": reply["status"], "replyTo": destination}

    def _outcome(self, request_id: str, job: Job, batch: Batch) -> dict[str, Any]:
        if job.error is not None:
            metrics.count("PermanentFailures")
            return error_reply(request_id, job.error)
        assert job.request is not None
        try:
            if isinstance(job.request, AnswerRequest):
                events, _ = container.get_backends().answer(job.request, self.grant, caller="queue")
                answer = final_answer(events)
                return {REQUEST_ID: request_id, "status": "ok", ANSWER: answer.model_dump(mode="json")}
            # The batch's queries are embedded together, by the pgvector service's embedder; a backend
            # that serves no queue (Gemini File Search) is a named 422 before anything is built.
            response, _ = container.get_backends().retrieve(
                job.request,
                self.grant,
                caller="queue",
                embed_query=lambda query: batch.vectors.vector_for(query, container.get_service().embedder),
            )
        except RetrievalError as exc:
            if exc.status_code >= 500:
                raise
            metrics.count("PermanentFailures")
            return error_reply(request_id, exc)
        return {REQUEST_ID: request_id, "status": "ok", "response": response.model_dump(mode="json")}

    def _send(self, queue_url: str, reply: dict[str, Any]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        request_id = str(reply[REQUEST_ID])
        params: dict[str, Any] = {
            "QueueUrl": queue_url,
            "MessageBody": _message_body(reply),
            "MessageAttributes": {
                REQUEST_ID: {"DataType": "String", "StringValue": request_id},
                "status": {"DataType": "String", "StringValue": str(reply["status"])},
            },
        }
        if queue_url.endswith(".fifo"):
            params["MessageGroupId"] = request_id
            params["MessageDeduplicationId"] = hashlib.sha256(request_id.encode()).hexdigest()
        try:
            self._sqs().send_message(**params)
        except (BotoCoreError, ClientError) as exc:
            code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None
            raise ReplyDeliveryError(
                "could not send the reply to its queue", {"awsErrorCode": code or type(exc).__name__}
            ) from exc

    def _already_answered(self, response: Any, idempotent_data: Any) -> Any:
        metrics.count("DuplicatesSuppressed")
        logger.info(
            "requestId already answered; no second reply",
            extra={REQUEST_ID: response.get(REQUEST_ID) if isinstance(response, dict) else None},
        )
        return response


def fitted(reply: dict[str, Any]) -> dict[str, Any]:
    """`reply`, or an error reply `response_too_large` when it would not fit one SQS message.

    Permanent: the same job would make the same answer again.
    """
    limit = SQS_MESSAGE_BYTES - SQS_ATTRIBUTE_BYTES
    size = sqs_body_bytes(_message_body(reply))
    if size <= limit:
        return reply
    metrics.count("PermanentFailures")
    error = ResponseTooLargeError(
        size, limit, "a queue reply may take (one SQS message)", "POST /api/v1/rag/retrieve"
    )
    return error_reply(str(reply[REQUEST_ID]), error)


def _message_body(reply: dict[str, Any]) -> str:
    return json.dumps(reply, separators=(",", ":"))


def build_queue_handler() -> LambdaHandler:
    """The SQS-triggered handler, with Powertools logging, metrics and (in Lambda) tracing."""
    return build_sqs_handler(lambda tools: QueueProcessor(get_settings(), tools.logger.set_correlation_id))
