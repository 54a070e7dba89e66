"""S3 sync end to end on real parts: moto S3 emits the events, moto SQS queues them, the ingest handler
(functions/ingest) writes through DocumentService into the embedded PostgreSQL, and the documents are
searched through `RetrievalService.retrieve` with the local model.

The bucket's notification configuration sends ObjectCreated:* and ObjectRemoved:* to an SQS queue with
a dead-letter queue (maxReceiveCount 3), as template.yaml does. Lambda's event source is played by
`receive` (records built from `receive_message` as Lambda builds them) and `run` (acknowledged messages
deleted, failed ones left for SQS to redeliver), so receive counts and the redrive are SQS's own.

moto 5.2 omits S3's `sequencer` from its notifications. Tests marked `sequenced` add the one S3 would
have sent (increasing in the order moto emitted the events, per bucket) before the handler sees them;
the others hand the handler moto's messages untouched, which exercises the fallback of reading S3's
current state (ETag-matched reads, a removal skipped while the key holds an object).
"""

from __future__ import annotations

import itertools
import json
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

import pytest

from retrieval_core.exceptions import StoreNotFoundError
from retrieval_core.grants import OPEN_GRANT
from retrieval_core.observability import metrics
from retrieval_core.schemas.retrieve import RetrieveRequest
from tests.files import corrupt_pdf_bytes, paragraph_bomb_docx, pdf_bytes, rows_csv, scanned_pdf
from tests.servers import MotoServer, create_cache_table, create_idempotency_table
from tests.writing import HashingEmbedder

HANDBOOK = (
    "Expense reports are due within 30 days of the trip. Receipts over 25 EUR must be attached, "
    "and hotel invoices must name the traveller."
)
HANDBOOK_V2 = (
    "Since 2026, parking fees at the airport are reimbursed for trips of up to five days; "
    "taxis need a receipt and a reason."
)


class LambdaContext:
    function_name = "IngestFunction"
    function_version = "1"
    memory_limit_in_mb = 2048
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:IngestFunction:live"
    aws_request_id = "4c1d2e3f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
    log_group_name = "/aws/lambda/IngestFunction"
    log_stream_name = "2026/11/23/[1]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


class CountingEmbedder:
    """The session's local model, counting the texts it embeds (to see what was re-embedded)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts = 0

    @property
    def model(self) -> str:
        return str(self.inner.model)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed(self, texts: Sequence[str], kind: Any) -> list[list[float]]:
        if kind != "query":
            self.texts += len(texts)
        result: list[list[float]] = self.inner.embed(texts, kind)
        return result


@dataclass
class Sync:
    """A documents bucket wired to an ingest queue, and the ingest handler reading it."""

    moto: MotoServer
    handler: Any
    service: Any
    embedder: CountingEmbedder
    bucket: str
    queue: str
    dead_letters: str
    store: str
    sequencers: Iterator[int] = field(default_factory=lambda: itertools.count(0x0062E99A88DC4000))
    # A message received again keeps the sequencer S3 gave its event.
    given: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.s3 = self.moto.client("s3")
        self.sqs = self.moto.client("sqs")

    def put(self, key: str, data: bytes, content_type: str | None = None) -> None:
        extra = {"ContentType": content_type} if content_type else {}
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.store}/{key}", Body=data, **extra)

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=f"{self.store}/{key}")

    def receive(self, sequenced: bool = False) -> list[dict[str, Any]]:
        """The waiting messages as Lambda's SQS event source hands them over (moto's emission order)."""
        messages: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", [])
            # The queue's visibility timeout is 0: stop at the first message seen twice.
            fresh = [m for m in got if m["MessageId"] not in {s["MessageId"] for s in messages}]
            messages += fresh
            if len(fresh) < 10:
                break
        return [self._record(m, sequenced) for m in messages]

    def _record(self, message: dict[str, Any], sequenced: bool) -> dict[str, Any]:
        body = message["Body"]
        if sequenced:
            payload = json.loads(body)
            for record in payload.get("Records", []):
                sequencer = self.given.setdefault(message["MessageId"], f"{next(self.sequencers):018X}")
                record["s3"]["object"]["sequencer"] = sequencer
            body = json.dumps(payload)
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": body,
            "attributes": message.get("Attributes", {}),
            "messageAttributes": {},
            "md5OfBody": message["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{self.queue.rsplit('/', 1)[-1]}",
            "awsRegion": "us-east-1",
        }

    def run(self, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Invoke the handler on `records`; delete what it acknowledged, as Lambda does."""
        response: dict[str, Any] = self.handler({"Records": list(records)}, LambdaContext())
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for record in records:
            if record["messageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=record["receiptHandle"])
        return response

    def sync(self, sequenced: bool = False) -> None:
        """Receive every waiting message and run them in one batch (Lambda never sends an empty one)."""
        records = self.receive(sequenced)
        if records:
            assert self.run(records) == {"batchItemFailures": []}

    def search(self, query: str, **fields: Any) -> list[Any]:
        """The store's chunks for `query`; none while the store does not exist."""
        request = RetrieveRequest.model_validate(
            {"query": query, "store": self.store, "grade": 0.0, **fields}
        )
        try:
            response, _ = self.service.retrieve(request, grant=OPEN_GRANT)
        except StoreNotFoundError:
            return []
        return list(response.results)

    def document_ids(self) -> set[str]:
        """The store's documents; none while the store does not exist."""
        from retrieval_core import container

        try:
            documents, _ = container.get_document_service().list_documents(self.store)
        except StoreNotFoundError:
            return set()
        return {d.id for d in documents}

    def depth(self, url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


def create_bucket_and_queues(moto: MotoServer) -> tuple[str, str, str]:
    """A bucket notifying a queue of every object created and removed; the queue redrives after 3."""
    s3, sqs = moto.client("s3"), moto.client("sqs")
    suffix = uuid.uuid4().hex[:8]
    dead_letters = sqs.create_queue(QueueName=f"ingest-dlq-{suffix}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dead_letters, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue = sqs.create_queue(
        QueueName=f"ingest-{suffix}",
        # Visibility 0: a message the handler failed is visible again at once, so retries are quick.
        Attributes={
            "VisibilityTimeout": "0",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    bucket = f"documents-{suffix}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]},
                {"QueueArn": queue_arn, "Events": ["s3:ObjectRemoved:*"]},
            ]
        },
    )
    return bucket, queue, dead_letters


@pytest.fixture()
def sync(service: Any, moto: MotoServer, aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sync]:
    """The ingest handler configured as template.yaml configures it, on a fresh bucket and store.

    The process-wide service is swapped for one on the same database and a DynamoDB cache table,
    whose embedder counts its texts.
    """
    from retrieval_core import container
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.lambdas.s3_ingest import build_ingest_handler
    from retrieval_core.settings import get_settings

    bucket, queue, dead_letters = create_bucket_and_queues(moto)
    table, cache_table = f"idempotency-{uuid.uuid4().hex[:8]}", f"cache-{uuid.uuid4().hex[:8]}"
    create_idempotency_table(moto.client("dynamodb"), table)
    create_cache_table(moto.client("dynamodb"), cache_table)
    for key, value in {
        "IDEMPOTENCY_TABLE_NAME": table,
        "CACHE_TABLE_NAME": cache_table,
        "DOCUMENTS_BUCKET": bucket,
        "S3_ENDPOINT_URL": moto.endpoint_url,
        "DYNAMODB_ENDPOINT_URL": moto.endpoint_url,
        "POWERTOOLS_METRICS_NAMESPACE": "Test",
    }.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    embedder = CountingEmbedder(service.embedder)
    cache = container.build_cache(get_settings())  # the shared DynamoDB cache, as in Lambda
    counting = RetrievalService(service.database, embedder, "sample", service.ef_search, cache=cache)
    shared = container.replace_service(counting)
    try:
        store = f"s3-{uuid.uuid4().hex[:8]}"
        yield Sync(moto, build_ingest_handler(), counting, embedder, bucket, queue, dead_letters, store)
    finally:
        container.replace_service(shared)
        monkeypatch.undo()
        get_settings.cache_clear()


@pytest.fixture()
def ingest_log() -> Iterator[list[logging.LogRecord]]:
    """The ingest handler's log records (its logger may not propagate once Powertools configured it)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("retrieval_core.lambdas.s3_ingest")
    keep, level = Keep(level=logging.DEBUG), logger.level
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    yield records
    logger.removeHandler(keep)
    logger.setLevel(level)


def test_a_put_object_becomes_searchable_and_its_delete_removes_it(sync: Sync) -> None:
    sync.put("policies/travel expenses+été.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()  # moto's own messages: the s3:TestEvent, then ObjectCreated:Put

    results = sync.search("When are expense reports due?")
    assert [r.metadata["documentId"] for r in results] == ["policies/travel expenses+été.txt"]
    assert results[0].content.startswith("Expense reports are due within 30 days")
    assert results[0].metadata["fileName"] == "travel expenses+été.txt"

    sync.delete("policies/travel expenses+été.txt")
    sync.sync()
    assert sync.search("When are expense reports due?") == []
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0


@pytest.mark.heavy
def test_a_csv_of_100000_rows_put_in_s3_loads(sync: Sync, configure: Any) -> None:
    from retrieval_core import container

    # That the rows load is checked here, not how fast: no parse deadline a busy machine could trip
    # (test_large_row_sources.py says why).
    configure(PARSE_TIMEOUT_S="300")
    sync.embedder.inner = HashingEmbedder()  # the write is measured here, not the model
    sync.put("exports/rows.csv", rows_csv(100_000), "text/csv")
    sync.sync()
    assert container.get_document_service().get_store(sync.store).document_count == 100_000
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0


def test_an_s3_update_and_delete_change_keyword_results_at_once(sync: Sync) -> None:
    def keyword_hits(query: str) -> list[str]:
        results = sync.search(query, useHybrid=True)
        return [r.metadata["documentId"] for r in results if r.keyword_score is not None]

    sync.put("policies/travel.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()
    assert keyword_hits("hotel invoices") == ["policies/travel.txt"]
    sync.put("policies/travel.txt", HANDBOOK_V2.encode(), "text/plain")  # the same key, new text
    sync.sync()
    assert keyword_hits("hotel invoices") == []
    assert keyword_hits("parking taxis") == ["policies/travel.txt"]
    sync.delete("policies/travel.txt")
    sync.sync()
    assert keyword_hits("parking taxis") == []


def test_a_pdf_without_a_content_type_is_read_by_its_name_and_bytes(sync: Sync) -> None:
    data = pdf_bytes(["Badges open every door of building A.", HANDBOOK], title="Travel and access")
    sync.put("guides/access.pdf", data)  # boto3 uploads it as binary/octet-stream
    sync.sync()
    results = sync.search("When are expense reports due?")
    assert results[0].metadata["documentId"] == "guides/access.pdf"
    assert results[0].metadata["pageNumber"] == 2


def test_a_sidecar_before_and_after_its_object_and_a_change_of_it_re_embeds_nothing(sync: Sync) -> None:
    sidecar = {
        "metadataAttributes": {
            "department": "Finance",
            "owner": {"value": {"type": "STRING", "stringValue": "Ana Ruiz"}, "includeForEmbedding": True},
        }
    }
    # The sidecar arrives first: kept until its object comes.
    sync.put("expenses.txt.metadata.json", json.dumps(sidecar).encode(), "application/json")
    sync.sync()
    assert sync.search("expense reports") == []

    sync.put("expenses.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()
    (result,) = sync.search("expense reports", metadataFilter={"department": "Finance"})
    assert result.metadata["documentId"] == "expenses.txt" and result.metadata["owner"] == "Ana Ruiz"
    embedded = sync.embedder.texts
    assert embedded > 0

    # A changed sidecar after its object: metadata only.
    sidecar["metadataAttributes"]["department"] = "Travel"
    sync.put("expenses.txt.metadata.json", json.dumps(sidecar).encode(), "application/json")
    sync.sync()
    assert sync.search("expense reports", metadataFilter={"department": "Finance"}) == []
    (result,) = sync.search("expense reports", metadataFilter={"department": "Travel"})
    assert sync.embedder.texts == embedded  # nothing re-embedded

    # The sidecar removed: its keys leave the document, the document stays.
    sync.delete("expenses.txt.metadata.json")
    sync.sync()
    (result,) = sync.search("expense reports")
    assert "department" not in result.metadata and "owner" not in result.metadata
    assert sync.embedder.texts == embedded


def test_an_s3_write_invalidates_answers_another_instance_cached(sync: Sync, service: Any) -> None:
    """A retrieve function's instance caches an answer in the shared table; the ingest function's write
    through S3 makes it serve the new state, not the cached one."""
    from retrieval_core import container
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.cache.json_cache import CacheStatus
    from retrieval_core.settings import get_settings

    reader = RetrievalService(
        service.database,
        service.embedder,
        "sample",
        service.ef_search,
        cache=container.build_cache(get_settings()),
    )
    request = RetrieveRequest.model_validate(
        {"query": "parking at the airport", "store": sync.store, "grade": 0.0}
    )
    sync.put("expenses.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()
    first, status = reader.retrieve(request, grant=OPEN_GRANT)
    assert status == CacheStatus.MISS
    cached, status = reader.retrieve(request, grant=OPEN_GRANT)
    assert status == CacheStatus.HIT and cached.results == first.results

    sync.put("parking.txt", HANDBOOK_V2.encode(), "text/plain")
    sync.sync()
    fresh, status = reader.retrieve(request, grant=OPEN_GRANT)
    assert status == CacheStatus.MISS
    assert fresh.results[0].metadata["documentId"] == "parking.txt"


def test_an_older_event_after_a_newer_one_changes_nothing(sync: Sync) -> None:
    sync.sync()  # the s3:TestEvent
    sync.put("policy.txt", HANDBOOK.encode(), "text/plain")
    sync.put("policy.txt", HANDBOOK_V2.encode(), "text/plain")
    first, second = sync.receive(sequenced=True)
    sync.run([second])
    sync.run([first])
    (result,) = sync.search("parking at the airport")
    assert result.content.startswith("Since 2026, parking fees")


def test_an_old_put_after_a_newer_delete_changes_nothing_even_when_the_same_bytes_are_back(
    sync: Sync,
) -> None:
    """put A, delete, put A again (same bytes, same ETag); the first put's event arrives last but one.

    Reading the key for it finds A again, so only the sequencer can tell that put from the newer one.
    """
    # The store exists already (docs/s3-sync.md: a removal for a store not created yet records nothing).
    sync.put("other.txt", HANDBOOK_V2.encode(), "text/plain")
    sync.sync(sequenced=True)
    sync.put("policy.txt", HANDBOOK.encode(), "text/plain")
    (put,) = sync.receive(sequenced=True)  # held back
    sync.delete("policy.txt")
    (delete,) = [r for r in sync.receive(sequenced=True) if r["messageId"] != put["messageId"]]
    assert sync.run([delete]) == {"batchItemFailures": []}

    sync.put("policy.txt", HANDBOOK.encode(), "text/plain")
    (put_again,) = [r for r in sync.receive(sequenced=True) if r["messageId"] != put["messageId"]]
    assert (
        json.loads(put_again["body"])["Records"][0]["s3"]["object"]["eTag"]
        == (json.loads(put["body"])["Records"][0]["s3"]["object"]["eTag"])
    )
    assert sync.run([put]) == {"batchItemFailures": []}
    assert sync.document_ids() == {"other.txt"}  # the old put did not bring back what the delete removed

    assert sync.run([put_again]) == {"batchItemFailures": []}
    assert sync.document_ids() == {"other.txt", "policy.txt"}


@pytest.mark.parametrize("sequenced", [True, False], ids=["sequenced", "moto-as-is"])
@pytest.mark.parametrize("order", list(permutations(range(3))), ids=lambda o: "".join(map(str, o)))
def test_put_delete_put_of_the_same_bytes_delivered_in_any_order_ends_present(
    sync: Sync, order: tuple[int, ...], sequenced: bool
) -> None:
    sync.sync()
    sync.put("same.txt", HANDBOOK.encode(), "text/plain")
    sync.delete("same.txt")
    sync.put("same.txt", HANDBOOK.encode(), "text/plain")
    sync.put("gone.txt", HANDBOOK_V2.encode(), "text/plain")
    sync.delete("gone.txt")
    events = sync.receive(sequenced)
    assert len(events) == 5
    same, gone = events[:3], events[3:]
    for i in order:
        sync.run([same[i]])
    for record in reversed(gone) if order[0] else gone:
        sync.run([record])
    assert sync.document_ids() == {"same.txt"}
    assert sync.depth(sync.queue) == 0


def test_a_redelivered_event_does_no_work(sync: Sync) -> None:
    sync.sync()
    sync.put("policy.txt", HANDBOOK.encode(), "text/plain")
    (record,) = sync.receive(sequenced=True)
    sync.run([record])
    before = {name: metrics.counters[name] for name in ("DuplicatesSuppressed", "ObjectsIngested")}
    embedded = sync.embedder.texts

    # SQS delivers the same message again (at-least-once).
    sync.sqs.send_message(QueueUrl=sync.queue, MessageBody=record["body"])
    (again,) = sync.receive()
    assert sync.run([again]) == {"batchItemFailures": []}
    assert metrics.counters["DuplicatesSuppressed"] == before["DuplicatesSuppressed"] + 1
    assert metrics.counters["ObjectsIngested"] == before["ObjectsIngested"]  # not even read again
    assert sync.embedder.texts == embedded
    assert sync.document_ids() == {"policy.txt"}


def test_records_moved_to_another_file_load_once_the_old_file_is_deleted(sync: Sync) -> None:
    # A document id belongs to one source: the new file's write is refused (409) while the old file
    # still holds the record, and its event retried, not dropped.
    record = {"_id": "d1", "text": "Expense reports are due within 30 days."}
    sync.put("a.jsonl", json.dumps(record).encode(), "application/x-ndjson")
    sync.sync()
    sync.put("b.jsonl", json.dumps(record).encode(), "application/x-ndjson")
    sync.delete("a.jsonl")
    records = sync.receive()
    response = sync.run(records)
    assert len(records) == 2 and len(response["batchItemFailures"]) == 1
    sync.sync()  # the retried write of b.jsonl, now that a.jsonl is gone
    from retrieval_core import container

    assert container.get_document_service().get_document(sync.store, "d1").source == "b.jsonl"
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0


def test_a_poison_message_reaches_the_dead_letter_queue_after_3_receives(sync: Sync) -> None:
    sync.sync()
    sync.sqs.send_message(QueueUrl=sync.queue, MessageBody="this is not an S3 event")
    sync.put("policy.txt", HANDBOOK.encode(), "text/plain")
    for receive in (1, 2, 3):
        records = sync.receive()
        response = sync.run(records)
        poison = [r for r in records if r["body"] == "this is not an S3 event"]
        assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [poison[0]["messageId"]]
        assert poison[0]["attributes"]["ApproximateReceiveCount"] == str(receive)
    assert sync.receive() == []  # the fourth receive moves it to the dead-letter queue
    (dead,) = sync.sqs.receive_message(QueueUrl=sync.dead_letters, MaxNumberOfMessages=10)["Messages"]
    assert dead["Body"] == "this is not an S3 event"
    # The good message of those batches was ingested once.
    assert sync.document_ids() == {"policy.txt"}


def test_the_same_file_under_a_second_key_is_logged_as_a_duplicate_of_the_first(
    sync: Sync, ingest_log: list[logging.LogRecord]
) -> None:
    sync.put("policies/expenses.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()
    sync.put("archive/expenses-2025.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()
    applied = {
        getattr(r, "source", None): getattr(r, "duplicateOf", None)
        for r in ingest_log
        if r.getMessage() == "S3 event applied"
    }
    assert applied == {"policies/expenses.txt": [], "archive/expenses-2025.txt": ["policies/expenses.txt"]}
    # Both are stored; search shows the content once.
    assert sync.document_ids() == {"policies/expenses.txt", "archive/expenses-2025.txt"}
    assert len(sync.search("When are expense reports due?")) == 1
    assert len(sync.search("When are expense reports due?", collapseDuplicates=False)) == 2


def test_a_corrupt_pdf_and_a_scan_are_acknowledged_and_logged_with_their_key_and_reason(
    sync: Sync, ingest_log: list[logging.LogRecord]
) -> None:
    refused = metrics.counters["UnreadableObjects"]
    sync.put("reports/q3.pdf", corrupt_pdf_bytes(), "application/pdf")
    sync.put("reports/signed.pdf", scanned_pdf([None, None]), "application/pdf")
    sync.put("notes/sidecar-broken.txt.metadata.json", b"{not json", "application/json")
    sync.sync()
    errors = [r for r in ingest_log if r.levelno == logging.ERROR]
    assert {getattr(r, "key", None): getattr(r, "code", None) for r in errors} == {
        f"{sync.store}/reports/q3.pdf": "unreadable_document",
        f"{sync.store}/reports/signed.pdf": "no_text_layer",
        f"{sync.store}/notes/sidecar-broken.txt.metadata.json": "invalid_sidecar",
    }
    assert all(getattr(r, "reason", "") for r in errors)
    [scan] = [r for r in errors if getattr(r, "code", None) == "no_text_layer"]
    assert "no text layer: a scanned PDF? OCR is not enabled" in getattr(scan, "reason", "")
    assert metrics.counters["UnreadableObjects"] == refused + 3
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0
    assert sync.document_ids() == set()

    # Fixing the file is a new upload, hence a new event.
    sync.put(
        "reports/q3.pdf", pdf_bytes(["Quarterly report: expenses fell by 4 percent."]), "application/pdf"
    )
    sync.sync()
    assert sync.document_ids() == {"reports/q3.pdf"}


def test_each_objects_outcome_is_kept_and_the_log_line_carries_the_stores_counts(
    sync: Sync, ingest_log: list[logging.LogRecord]
) -> None:
    from retrieval_core import container

    documents = container.get_document_service()
    documents.ensure_store(sync.store)  # a failed first object creates no store: nothing to record it in
    sync.put("reports/q3.pdf", corrupt_pdf_bytes(), "application/pdf")
    sync.sync()
    (failed,), _, counts = documents.document_statuses(sync.store, "failed")
    assert (failed.document_id, failed.code) == ("reports/q3.pdf", "unreadable_document")
    assert failed.written_by is not None and failed.written_by.startswith("s3:")
    assert (counts.scanned, counts.failed, counts.now_failed) == (1, 1, 1)
    applied = [r for r in ingest_log if r.getMessage() == "S3 event applied"]
    assert getattr(applied[-1], "status", None) == "failed"
    assert getattr(applied[-1], "ingestion", {})["failed"] == 1

    report = pdf_bytes(["Quarterly report: expenses fell by 4 percent."])
    sync.put("reports/q3.pdf", report, "application/pdf")
    sync.sync()
    sync.put("reports/q3.pdf", report, "application/pdf")  # the same bytes again: unchanged, not parsed
    sync.sync()
    ok, _, counts = documents.document_statuses(sync.store, "ok")
    assert [(r.document_id, r.change) for r in ok] == [("reports/q3.pdf", "unchanged")]
    assert (counts.added, counts.unchanged, counts.now_failed) == (1, 1, 0)
    applied = [r for r in ingest_log if r.getMessage() == "S3 event applied"]
    assert [getattr(r, "outcome", None) for r in applied[-2:]] == ["created", "unchanged"]
    assert getattr(applied[-1], "ingestion", {})["scanned"] == 3

    sync.delete("reports/q3.pdf")
    sync.sync()
    ok, _, counts = documents.document_statuses(sync.store, "ok")
    assert (ok, counts.deleted) == ([], 1)


def test_an_object_over_its_parsing_budget_is_acknowledged_and_logged_with_the_limit(
    sync: Sync, ingest_log: list[logging.LogRecord]
) -> None:
    sync.put("bomb.docx", paragraph_bomb_docx(3_000_000), "application/octet-stream")
    sync.put("policy.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()
    [error] = [r for r in ingest_log if r.levelno == logging.ERROR]
    assert (getattr(error, "key", None), getattr(error, "code", None)) == (
        f"{sync.store}/bomb.docx",
        "document_limit_exceeded",
    )
    assert "DOCUMENT_MAX_ELEMENTS" in getattr(error, "reason", "")
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0
    assert sync.document_ids() == {"policy.txt"}


def test_an_object_over_the_size_limit_is_acknowledged_and_logged(
    sync: Sync, ingest_log: list[logging.LogRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_core.settings import get_settings

    monkeypatch.setenv("S3_INGEST_MAX_BYTES", "2048")  # read when the handler builds, on first use
    get_settings.cache_clear()
    sync.put("big.txt", HANDBOOK.encode() * 20, "text/plain")
    sync.put("small.txt", HANDBOOK.encode(), "text/plain")
    sync.sync()
    (error,) = [r for r in ingest_log if r.levelno == logging.ERROR]
    assert getattr(error, "key", None) == f"{sync.store}/big.txt"
    assert getattr(error, "code", None) == "object_too_large"
    assert sync.document_ids() == {"small.txt"}
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0


def test_a_first_segment_that_is_no_store_name_is_refused_and_logged(
    sync: Sync, ingest_log: list[logging.LogRecord]
) -> None:
    for store in ("resolve", "no spaces allowed"):
        sync.s3.put_object(Bucket=sync.bucket, Key=f"{store}/guide.txt", Body=HANDBOOK.encode())
    sync.sync()
    errors = [r for r in ingest_log if r.levelno == logging.ERROR]
    assert {getattr(r, "key", None) for r in errors} == {"resolve/guide.txt", "no spaces allowed/guide.txt"}
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0
    names = {s.name for s in runtime_documents().every_store()}
    assert not {"resolve", "no spaces allowed"} & names


def runtime_documents() -> Any:
    from retrieval_core import container

    return container.get_document_service()


def test_keys_outside_the_store_layout_are_acknowledged_without_work(
    sync: Sync, ingest_log: list[logging.LogRecord]
) -> None:
    sync.s3.put_object(Bucket=sync.bucket, Key="README.txt", Body=b"top-level file")
    sync.s3.put_object(Bucket=sync.bucket, Key=f"{sync.store}/.metadata.json", Body=b"{}")
    sync.s3.put_object(
        Bucket=sync.bucket, Key=f"{sync.store}/reports/", Body=b""
    )  # console's "Create folder"
    sync.sync()
    assert sync.document_ids() == set()
    assert not [r for r in ingest_log if r.levelno >= logging.ERROR]
    unroutable = [r for r in ingest_log if r.levelno == logging.WARNING and "names no" in r.getMessage()]
    assert {getattr(r, "key", None) for r in unroutable} == {"README.txt", f"{sync.store}/.metadata.json"}


def test_an_existing_bucket_through_eventbridge(sync: Sync) -> None:
    """The template's rule for an existing bucket: S3 -> EventBridge -> rule -> the same queue."""
    events = sync.moto.client("events")
    sync.s3.put_bucket_notification_configuration(
        Bucket=sync.bucket, NotificationConfiguration={"EventBridgeConfiguration": {}}
    )
    rule = f"documents-{uuid.uuid4().hex[:8]}"
    events.put_rule(
        Name=rule,
        EventPattern=json.dumps(
            {
                "source": ["aws.s3"],
                "detail-type": ["Object Created", "Object Deleted"],
                "detail": {"bucket": {"name": [sync.bucket]}},
            }
        ),
    )
    queue_arn = sync.sqs.get_queue_attributes(QueueUrl=sync.queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_targets(Rule=rule, Targets=[{"Id": "ingest", "Arn": queue_arn}])
    sync.sync()
    try:
        sync.put("policies/travel expenses+été.txt", HANDBOOK.encode(), "text/plain")
        records = sync.receive()
        assert [json.loads(r["body"])["detail-type"] for r in records] == ["Object Created"]
        assert sync.run(records) == {"batchItemFailures": []}
        assert sync.document_ids() == {"policies/travel expenses+été.txt"}
    finally:
        events.remove_targets(Rule=rule, Ids=["ingest"])
        events.delete_rule(Name=rule)


def test_time_from_put_to_searchable(sync: Sync) -> None:
    """What docs/s3-sync.md reports: from an S3 put until a search finds the document, through moto's
    event, the queue and the handler (`pytest -s` prints it). Warm: the handler's clients and the local
    model are loaded by a first file, timed apart."""
    sync.sync()
    started = time.perf_counter()
    sync.put("timing/warm-up.txt", HANDBOOK.encode(), "text/plain")
    sync.sync(sequenced=True)
    assert sync.search("expense reports", docIds=["timing/warm-up.txt"])
    print(f"\nfirst file (cold handler and model): {(time.perf_counter() - started) * 1000:.0f} ms")
    pages = [f"Page {p} of the travel handbook. " + HANDBOOK_V2 * 6 for p in range(1, 21)]
    files = {
        "text": lambda n: (f"Revision {n}: {HANDBOOK_V2}".encode(), "text/plain"),
        "pdf-20-pages": lambda n: (pdf_bytes([f"Revision {n}. {page}" for page in pages]), "application/pdf"),
    }
    for kind, make in files.items():
        timings = []
        for n in range(5):
            data, content_type = make(n)
            key = f"timing/{kind}-{n}"
            started = time.perf_counter()
            sync.put(key, data, content_type)
            sync.sync(sequenced=True)
            found = sync.search(f"Revision {n} parking at the airport", docIds=[key])
            timings.append(time.perf_counter() - started)
            assert found
        timings.sort()
        print(
            f"\n{kind}: put -> searchable median {timings[2] * 1000:.0f} ms, max {timings[-1] * 1000:.0f} ms"
        )


def test_an_object_whose_key_climbs_out_of_its_store_is_acknowledged_and_written_nowhere(
    sync: Sync, ingest_log: list[logging.LogRecord]
) -> None:
    # S3 keeps `..` in a key as it is; as a document id it would address another store in a URL.
    sync.put("../sample/notes.txt", b"Written under another store's name.", "text/plain")
    sync.put("notes/./today.txt", b"A step that goes nowhere.", "text/plain")
    sync.sync()
    codes = {
        getattr(r, "key", None): getattr(r, "code", None) for r in ingest_log if r.levelno >= logging.WARNING
    }
    assert codes.get(f"{sync.store}/../sample/notes.txt") == "validation_error", codes
    assert codes.get(f"{sync.store}/notes/./today.txt") == "validation_error", codes
    assert sync.document_ids() == set()
    assert sync.depth(sync.queue) == 0 and sync.depth(sync.dead_letters) == 0
