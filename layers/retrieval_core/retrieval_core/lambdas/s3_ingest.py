"""The ingest function: SQS batches of S3 events in, document writes and deletes out.

- `ObjectCreated` reads the object (only the version the event names, by its ETag) and writes it as
  the source `<id>` of store `<store>`, creating the store on its first object. A sidecar
  `<id>.metadata.json` sets the metadata of source `<id>` instead, without re-embedding it.
- `ObjectRemoved` deletes the source (or clears the sidecar's metadata), unless the key holds an object
  again: a later upload's event then decides, and a versioned bucket's old versions do not count.
- Order: every write carries S3's sequencer; the service applies it only if it is newer than the
  last one applied to that key, in the write's own transaction. Replays and reorderings converge.
- Idempotency (Powertools, DynamoDB; key: bucket, key, sequencer, event name): a redelivered event
  does no work at all, not even the S3 read.
- Audit: each change's rows name `s3:<principal>` (the event's userIdentity.principalId, EventBridge's
  requester) and, as request id, the S3 request that made the change (x-amz-request-id), which S3's
  access logs and CloudTrail also show; a redelivery keeps it, unlike the Lambda's own request id.
- Failures: a message that is not an S3 event, and any transient fault (database, embedder, OCR engine,
  S3, the idempotency table), fails its batch item: retried, then dead-lettered after the queue's
  maxReceiveCount. An object we cannot read as a document (415, 422, 413: a property of that object, a
  scanned PDF with OCR off included, `no_text_layer`) is logged at ERROR with its key, code and reason,
  counted (UnreadableObjects) and acknowledged: fixing the object means uploading it again, which is a
  new event. An object gone by the time it is read is
  acknowledged: its removal's event came or will come.
- Status: the service records each object's outcome (ok, failed, skipped) and the store's counts
  (GET .../documents?status=failed); the "S3 event applied" line carries the outcome and those counts.

Nothing here creates a boto3 client or imports boto3 before the first invocation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from retrieval_core import container
from retrieval_core.clients.aws import handler_options, lazy_aws_client
from retrieval_core.db.document_status import COUNTED
from retrieval_core.documents import ingest_status
from retrieval_core.documents.exceptions import ObjectReadError, ObjectTooLargeError, S3EventError
from retrieval_core.documents.models import Actor, Sequence, SourceInput, StoreDefinition
from retrieval_core.documents.s3_events import ObjectChange, Target, read_message
from retrieval_core.documents.service import DocumentService
from retrieval_core.documents.sidecar import read_sidecar
from retrieval_core.exceptions import (
    ConfigurationError,
    DatabaseUnavailableError,
    RetrievalError,
    StoreNotFoundError,
)
from retrieval_core.lambdas.exceptions import JobInProgressError
from retrieval_core.lambdas.setup import (
    after_database_failure,
    build_sqs_handler,
    idempotent_on_dynamodb,
)
from retrieval_core.lambdas.tracing import LambdaHandler
from retrieval_core.observability import metrics
from retrieval_core.settings import Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_PREFIX = "s3-ingest"
# Refusals that are a property of the object itself: retrying cannot change them.
PERMANENT_STATUSES = frozenset({413, 415, 422})
# What S3 gives an object uploaded without a type: no information, so the parser decides.
UNTYPED = frozenset({"binary/octet-stream", "application/octet-stream"})


@dataclass(frozen=True, slots=True)
class S3Object:
    data: bytes
    content_type: str | None


@dataclass
class Batch:
    database_failed: bool = False


class IngestProcessor:
    """Ingests SQS batches of S3 events. Built on the first invocation: it creates the boto3 clients."""

    def __init__(self, settings: Settings) -> None:
        if not settings.idempotency_table_name:
            raise ConfigurationError(
                "IDEMPOTENCY_TABLE_NAME is not set: without it a redelivered event would be ingested twice"
            )
        self.settings = settings
        self._s3: Callable[[], S3Client] = lazy_aws_client(
            "s3", handler_options(settings.s3_endpoint_url, read_timeout_s=30)
        )

        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

        self.idempotency = IdempotencyConfig(
            expires_after_seconds=settings.idempotency_ttl_s, response_hook=self._already_done
        )
        self._apply_once = idempotent_on_dynamodb(
            self._apply, "change_key", self.idempotency, settings, IDEMPOTENCY_KEY_PREFIX
        )

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """`{"batchItemFailures": [...]}` naming exactly the messages to retry."""
        # The in-progress lock of an event expires with this invocation, so a crash cannot block its retry.
        self.idempotency.register_lambda_context(context)
        batch = Batch()
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        try:
            response = process_partial_response(
                event=event,
                record_handler=partial(self._process, batch),
                processor=processor,
                context=context,
            )
        finally:
            if batch.database_failed:
                after_database_failure()
        return dict(response)

    def _process(self, batch: Batch, record: SQSRecord) -> None:
        try:
            message = read_message(record.body)
        except S3EventError as exc:
            metrics.count("MalformedMessages")
            logger.error(
                "not an S3 event; retried, then dead-lettered: %s",
                exc.message,
                extra={"messageId": record.message_id},
            )
            raise
        for reason in message.ignored:
            metrics.count("IgnoredEvents")
            logger.info("acknowledged without work: %s", reason, extra={"messageId": record.message_id})
        for change in message.changes:
            self._process_change(batch, change)

    def _process_change(self, batch: Batch, change: ObjectChange) -> None:
        where = {"bucket": change.bucket, "key": change.key, "event": change.event_name}
        expected = self.settings.documents_bucket
        if expected and change.bucket != expected:
            metrics.count("IgnoredEvents")
            logger.warning("event of another bucket than %s acknowledged without work", expected, extra=where)
            return
        if change.key.endswith("/"):
            # What the S3 console's "Create folder" makes: an empty object, not a document.
            metrics.count("IgnoredEvents")
            logger.info("folder marker acknowledged without work", extra=where)
            return
        target = change.target
        if target is None:
            metrics.count("UnroutableKeys")
            logger.warning("key names no `<store>/<document id>`; acknowledged without work", extra=where)
            return

        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyInconsistentStateError,
            IdempotencyPersistenceLayerError,
        )

        try:
            self._apply_once(change_key=change.idempotency_key, change=change, target=target)
        except IdempotencyAlreadyInProgressError as exc:
            in_progress = JobInProgressError("this S3 event is being ingested elsewhere")
            self._transient(where, in_progress.code)
            raise in_progress from exc
        except (IdempotencyPersistenceLayerError, IdempotencyInconsistentStateError):
            # Without the idempotency table an event could be applied twice: retry later instead.
            self._transient(where, "idempotency_store_unavailable")
            raise
        except RetrievalError as exc:
            if isinstance(exc, DatabaseUnavailableError):
                batch.database_failed = True
            self._transient(where, exc.code)
            raise

    def _transient(self, where: dict[str, str], code: str) -> None:
        metrics.count("TransientFailures")
        logger.warning("event failed transiently; the message will be retried", extra={**where, "code": code})

    def _apply(self, change_key: dict[str, str], change: ObjectChange, target: Target) -> dict[str, Any]:
        """Run under idempotency: apply one change. The stored result is a summary only."""
        documents = container.get_document_service()
        sequence = Sequence(target.object_key, change.sequencer) if change.sequencer else None
        actor = s3_actor(change)
        where = {
            "bucket": change.bucket,
            "key": change.key,
            "store": target.store,
            "source": target.source_id,
        }
        try:
            if change.action == "removed":
                outcome = self._remove(documents, change, target, sequence, actor)
            else:
                outcome = self._create(documents, change, target, sequence, actor)
        except RetrievalError as exc:
            if exc.status_code not in PERMANENT_STATUSES:
                raise
            metrics.count("UnreadableObjects")
            logger.error(
                "object not ingested: %s",
                exc.message,
                extra={**where, "code": exc.code, "reason": exc.message},
            )
            status = "skipped" if isinstance(exc, ingest_status.SKIPPING_ERRORS) else "failed"
            outcome = {"outcome": "refused", "code": exc.code, "status": status}
        logger.info("S3 event applied", extra={**where, **outcome, **_store_counts(documents, target.store)})
        return outcome

    def _create(
        self,
        documents: DocumentService,
        change: ObjectChange,
        target: Target,
        sequence: Sequence | None,
        actor: Actor,
    ) -> dict[str, Any]:
        obj = self._read(change)
        if obj is None:
            metrics.count("MissingObjects")
            return {"outcome": "gone"}
        if target.sidecar:
            changed = documents.put_source_metadata(
                target.store,
                target.source_id,
                read_sidecar(obj.data),
                sequence=sequence,
                create=StoreDefinition(),
                actor=actor,
            )
            metrics.count("SidecarsApplied")
            return {"outcome": "sidecar", "documentsChanged": changed}
        source = SourceInput(target.source_id, obj.data, obj.content_type, name=target.file_name)
        written = documents.write_source(
            target.store, source, create=StoreDefinition(), sequence=sequence, actor=actor
        )
        if written.stale:
            metrics.count("StaleEvents")
            return {"outcome": "stale"}
        metrics.count("ObjectsIngested")
        return {"outcome": written.status, "status": "ok", "chunks": written.chunk_count}

    def _remove(
        self,
        documents: DocumentService,
        change: ObjectChange,
        target: Target,
        sequence: Sequence | None,
        actor: Actor,
    ) -> dict[str, Any]:
        if self._exists(change):
            # A later upload's event decides (or decided); in a versioned bucket, removing an old
            # version leaves the current one.
            metrics.count("StaleEvents")
            return {"outcome": "superseded"}
        try:
            if target.sidecar:
                changed = documents.put_source_metadata(
                    target.store, target.source_id, None, sequence=sequence, actor=actor
                )
                return {"outcome": "sidecar-removed", "documentsChanged": changed}
            deleted = documents.delete_source(target.store, target.source_id, sequence=sequence, actor=actor)
        except StoreNotFoundError:
            return {"outcome": "no-store"}
        metrics.count("ObjectsDeleted")
        return {"outcome": "deleted", "documents": len(deleted)}

    def _read(self, change: ObjectChange) -> S3Object | None:
        """The object version the event names; None when it is gone or already replaced."""
        s3 = self._s3()
        with _S3Errors("read the object from", absent=("NoSuchKey", "404", "PreconditionFailed", "412")):
            if change.etag:
                # Only the bytes this event announced: a newer upload has (or will have) its own event.
                response = s3.get_object(Bucket=change.bucket, Key=change.key, IfMatch=f'"{change.etag}"')
            else:
                response = s3.get_object(Bucket=change.bucket, Key=change.key)
            size = int(response.get("ContentLength") or 0)
            if size > self.settings.s3_ingest_max_bytes:
                response["Body"].close()
                raise ObjectTooLargeError(size, self.settings.s3_ingest_max_bytes)
            data: bytes = response["Body"].read()
            content_type = (response.get("ContentType") or "").strip()
            return S3Object(
                data, None if content_type.lower() in UNTYPED or not content_type else content_type
            )
        return None  # absent: a newer event decides

    def _exists(self, change: ObjectChange) -> bool:
        with _S3Errors("look the object up in", absent=("NoSuchKey", "404", "NotFound")):
            self._s3().head_object(Bucket=change.bucket, Key=change.key)
            return True
        return False

    def _already_done(self, response: Any, idempotent_data: Any) -> Any:
        metrics.count("DuplicatesSuppressed")
        logger.info("S3 event already applied; nothing done", extra={"result": response})
        return response


def _store_counts(documents: DocumentService, store: str) -> dict[str, Any]:
    """The store's ingestion counts for the log line; none when they cannot be read (no store yet)."""
    try:
        counts = documents.ingestion_counts(store)
    except RetrievalError:
        return {}
    return {"ingestion": {name: getattr(counts, name) for name in COUNTED}, "failingNow": counts.now_failed}


def s3_actor(change: ObjectChange) -> Actor:
    """Who made an S3 change, for the audit trail: `s3:<principal>` (`s3:unknown` when the event has none)."""
    return Actor(f"s3:{change.principal or 'unknown'}", change.request_id)


class _S3Errors(AbstractContextManager[None]):
    """S3 failures as ObjectReadError (retried), except the `absent` codes, which are swallowed: the
    `with` body is then cut short and the caller goes on after it."""

    def __init__(self, action: str, absent: tuple[str, ...]) -> None:
        self.action = action
        self.absent = absent

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(exc, ClientError):
            if _error_code(exc) in self.absent:
                return True
            code = _error_code(exc)
        elif isinstance(exc, BotoCoreError):
            code = type(exc).__name__
        else:
            return False
        raise ObjectReadError(f"could not {self.action} S3", {"awsErrorCode": code}) from exc


def _error_code(exc: Any) -> str:
    return str(
        exc.response.get("Error", {}).get("Code")
        or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
    )


def build_ingest_handler() -> LambdaHandler:
    """The SQS-triggered ingest handler, with Powertools logging, metrics and (in Lambda) tracing."""
    return build_sqs_handler(lambda _tools: IngestProcessor(get_settings()))
