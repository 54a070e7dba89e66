"""Queue-triggered retrieval (functions/retrieve_queue) against real SQS and DynamoDB APIs.

SQS and DynamoDB are the session's moto_server reached by real boto3; searches run on the embedded
PostgreSQL with the local model. Events are built from `receive_message` the way Lambda's event
source mapping builds them, and acknowledged messages are deleted the way Lambda deletes them, so
redelivery, receive counts and the redrive to the dead-letter queue are SQS's own.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from tests.integration.wide_store import wide_store  # noqa: F401 (a fixture)
from tests.servers import MotoServer, create_idempotency_table

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
QUESTION = "How does the Kubernetes scheduler decide which node a pod runs on?"


class LambdaContext:
    function_name = "RetrieveQueueFunction"
    function_version = "1"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:RetrieveQueueFunction:live"
    aws_request_id = "2a0b3c4d-5e6f-4a1b-8c9d-0e1f2a3b4c5d"
    log_group_name = "/aws/lambda/RetrieveQueueFunction"
    log_stream_name = "2026/11/22/[1]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass(frozen=True)
class Queues:
    """The template's queues (plus one extra allowed reply queue and one that is not allowed)."""

    sqs: Any
    requests: str
    dead_letters: str
    results: str
    extra_reply: str
    not_allowed: str

    def arn(self, url: str) -> str:
        arn: str = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        return arn


def create_queues(moto: MotoServer) -> Queues:
    sqs = moto.client("sqs")
    suffix = uuid.uuid4().hex[:8]

    def create(name: str, **attributes: str) -> str:
        url: str = sqs.create_queue(QueueName=f"{name}-{suffix}", Attributes=attributes)["QueueUrl"]
        return url

    dead_letters = create("requests-dlq")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dead_letters, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    # Visibility 0: a message Lambda did not delete is visible again at once, so retries are quick.
    requests = create(
        "requests",
        VisibilityTimeout="0",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}),
    )
    return Queues(
        sqs, requests, dead_letters, create("results"), create("extra-replies"), create("elsewhere")
    )


@pytest.fixture()
def queues(moto: MotoServer) -> Queues:
    return create_queues(moto)


@pytest.fixture()
def queue_handler(
    sample_store: Any, moto: MotoServer, queues: Queues, aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Handler]:
    """functions/retrieve_queue's handler, configured as the template configures it."""
    from retrieval_core.lambdas.retrieve_queue import build_queue_handler
    from retrieval_core.settings import get_settings

    table = f"idempotency-{uuid.uuid4().hex[:8]}"
    create_idempotency_table(moto.client("dynamodb"), table)
    for key, value in {
        "RESULTS_QUEUE_URL": queues.results,
        "REPLY_QUEUE_URLS": queues.extra_reply,
        "IDEMPOTENCY_TABLE_NAME": table,
        "SQS_ENDPOINT_URL": moto.endpoint_url,
        "DYNAMODB_ENDPOINT_URL": moto.endpoint_url,
        "POWERTOOLS_METRICS_NAMESPACE": "Test",
        "AWS_LAMBDA_FUNCTION_NAME": "RetrieveQueueFunction",
    }.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    yield build_queue_handler()
    monkeypatch.undo()
    get_settings.cache_clear()


def job(request_id: str, query: str = QUESTION, **fields: Any) -> str:
    return json.dumps({"requestId": request_id, "query": query, "grade": 0.2, "store": "sample", **fields})


def send(queues: Queues, bodies: Sequence[str], attributes: dict[str, str] | None = None) -> None:
    extra = {}
    if attributes:
        extra["MessageAttributes"] = {
            k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()
        }
    for body in bodies:
        queues.sqs.send_message(QueueUrl=queues.requests, MessageBody=body, **extra)


def receive_event(queues: Queues, limit: int = 10) -> dict[str, Any]:
    """What Lambda's SQS event source hands the function: up to `limit` records, as they were received."""
    received = queues.sqs.receive_message(
        QueueUrl=queues.requests,
        MaxNumberOfMessages=limit,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
        WaitTimeSeconds=0,
    )
    arn = queues.arn(queues.requests)
    records = [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {
                name: {
                    "stringValue": a.get("StringValue"),
                    "stringListValues": [],
                    "binaryListValues": [],
                    "dataType": a["DataType"],
                }
                for name, a in m.get("MessageAttributes", {}).items()
            },
            "md5OfBody": m["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": arn,
            "awsRegion": "us-east-1",
        }
        for m in received.get("Messages", [])
    ]
    return {"Records": records}


def acknowledge(queues: Queues, event: dict[str, Any], response: dict[str, Any]) -> None:
    """Lambda deletes every record of the batch except those reported in batchItemFailures."""
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    for record in event["Records"]:
        if record["messageId"] not in failed:
            queues.sqs.delete_message(QueueUrl=queues.requests, ReceiptHandle=record["receiptHandle"])


def invoke(handler: Handler, event: dict[str, Any]) -> dict[str, Any]:
    return handler(event, LambdaContext())


@dataclass(frozen=True)
class Reply:
    body: dict[str, Any]
    attributes: dict[str, str]


def drain(queues: Queues, url: str) -> list[Reply]:
    """Every message on `url`, deleted as read."""
    replies: list[Reply] = []
    while True:
        got = queues.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        if not got:
            return replies
        for m in got:
            attributes = {k: v["StringValue"] for k, v in m.get("MessageAttributes", {}).items()}
            replies.append(Reply(json.loads(m["Body"]), attributes))
            queues.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def queue_depth(queues: Queues, url: str) -> int:
    attributes = queues.sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


class FlakyDatabase:
    """The real database, except that any statement about store `poison` loses its connection.

    Stands in for a database that fails for some requests of a batch and not others.
    """

    def __init__(self, inner: Any, poison: str) -> None:
        self.inner = inner
        self.poison = poison

    @contextmanager
    def connection(self) -> Iterator[Any]:
        with self.inner.connection() as conn:
            yield _FlakyConnection(conn, self.poison)

    def close(self) -> None:
        self.inner.close()


class _FlakyConnection:
    def __init__(self, conn: Any, poison: str) -> None:
        self._conn = conn
        self._poison = poison

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(params, dict) and self._poison in params.values():
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return self._conn.execute(query, params, **kwargs)


class CountingEmbedder:
    """The real embedder, recording the texts of every provider call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model = inner.model
        self.dimension = inner.dimension
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], kind: Any) -> list[list[float]]:
        self.calls.append(list(texts))
        vectors: list[list[float]] = self.inner.embed(texts, kind)
        return vectors


@contextmanager
def installed_service(postgres_dsn: str, embedder: Any, poison: str | None = None) -> Iterator[Any]:
    """A RetrievalService of the test's own as the process-wide one; the previous one restored after."""
    from retrieval_core import container
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.db.connection import PooledConnections
    from retrieval_core.settings import get_settings

    database: Any = PooledConnections(postgres_dsn, 0, 2, 5, 15_000)
    if poison is not None:
        database = FlakyDatabase(database, poison)
    service = RetrievalService(database, embedder, "sample", 100, cache=container.build_cache(get_settings()))
    previous = container.replace_service(service)
    try:
        yield service
    finally:
        container.replace_service(previous)
        database.close()


def test_batch_of_ten_with_two_transient_failures_replies_eight_and_retries_only_those_two(
    queue_handler: Handler, queues: Queues, postgres_dsn: str, service: Any
) -> None:
    ids = [f"job-{i}" for i in range(10)]
    # Jobs 3 and 7 name the sample store by its display name, which the flaky database fails on.
    flaky = {"job-3", "job-7"}
    send(queues, [job(i, store="Sample corpus" if i in flaky else "sample") for i in ids])
    event = receive_event(queues)
    assert len(event["Records"]) == 10
    by_message = {r["messageId"]: json.loads(r["body"])["requestId"] for r in event["Records"]}

    with installed_service(postgres_dsn, service.embedder, poison="Sample corpus"):
        response = invoke(queue_handler, event)
    acknowledge(queues, event, response)

    failed = {by_message[f["itemIdentifier"]] for f in response["batchItemFailures"]}
    assert failed == flaky
    replies = drain(queues, queues.results)
    assert sorted(r.body["requestId"] for r in replies) == sorted(set(ids) - flaky)
    for reply in replies:
        assert reply.body["status"] == "ok"
        assert reply.attributes["requestId"] == reply.body["requestId"]
        assert reply.body["response"]["results"][0]["metadata"]["documentId"] == "k8s-scheduling"

    # Only the two failed messages come back; with the database healthy they are answered once each.
    retry = receive_event(queues)
    assert sorted(json.loads(r["body"])["requestId"] for r in retry["Records"]) == sorted(flaky)
    retry_response = invoke(queue_handler, retry)
    assert retry_response["batchItemFailures"] == []
    acknowledge(queues, retry, retry_response)
    assert sorted(r.body["requestId"] for r in drain(queues, queues.results)) == sorted(flaky)
    assert queue_depth(queues, queues.requests) == 0


def test_a_redelivered_or_resent_job_gets_no_second_reply(queue_handler: Handler, queues: Queues) -> None:
    send(queues, [job("once-only")])
    first = receive_event(queues)
    assert invoke(queue_handler, first)["batchItemFailures"] == []
    # Lambda's delete did not happen (timeout, crash): SQS delivers the message again.
    second = receive_event(queues)
    assert [r["messageId"] for r in second["Records"]] == [r["messageId"] for r in first["Records"]]
    assert second["Records"][0]["attributes"]["ApproximateReceiveCount"] == "2"
    assert invoke(queue_handler, second)["batchItemFailures"] == []
    acknowledge(queues, second, {"batchItemFailures": []})
    # The producer retried its SendMessage: a new message with the same requestId.
    send(queues, [job("once-only")])
    third = receive_event(queues)
    assert invoke(queue_handler, third)["batchItemFailures"] == []
    acknowledge(queues, third, {"batchItemFailures": []})

    replies = drain(queues, queues.results)
    assert [r.body["requestId"] for r in replies] == ["once-only"]
    assert replies[0].body["status"] == "ok"


def test_permanent_failures_get_an_error_reply_and_are_acknowledged(
    queue_handler: Handler, queues: Queues
) -> None:
    send(queues, ['{"requestId": "broken-json", "query": '], attributes={"requestId": "broken-json"})
    send(queues, [json.dumps({"requestId": "no-grade", "query": QUESTION})])
    send(queues, [job("unknown-store", store="does-not-exist")])
    send(queues, [job("typo", similarityTopk=3)])
    send(queues, [job("bad-reply-to", replyTo=queues.not_allowed)])
    send(queues, [job("to-extra", replyTo=queues.extra_reply)])
    send(
        queues, [json.dumps({"requestId": 42, "query": QUESTION, "grade": 0.2})], {"requestId": "numeric-id"}
    )
    # No requestId anywhere: nobody can be answered, so nothing is sent, and the message is not retried.
    send(queues, [json.dumps({"query": QUESTION, "grade": 0.2}), "not json at all"])
    event = receive_event(queues)
    assert len(event["Records"]) == 9

    response = invoke(queue_handler, event)
    assert response["batchItemFailures"] == []
    acknowledge(queues, event, response)
    assert queue_depth(queues, queues.requests) == 0

    errors = {r.body["requestId"]: r.body for r in drain(queues, queues.results)}
    assert set(errors) == {"broken-json", "no-grade", "unknown-store", "typo", "bad-reply-to", "numeric-id"}
    assert all(
        e["status"] == "error" and set(e["error"]) == {"code", "message", "details"} for e in errors.values()
    )
    assert errors["broken-json"]["error"]["code"] == "validation_error"
    assert errors["broken-json"]["error"]["message"].startswith("body: not valid JSON")
    assert errors["no-grade"]["error"]["details"]["errors"][0]["field"] == "grade"
    assert errors["no-grade"]["error"]["message"].startswith("grade:")
    assert errors["unknown-store"]["error"]["code"] == "store_not_found"
    assert "does-not-exist" in errors["unknown-store"]["error"]["message"]
    assert errors["typo"]["error"]["details"]["errors"][0]["field"] == "similarityTopk"
    assert errors["bad-reply-to"]["error"]["code"] == "reply_to_not_allowed"
    assert errors["numeric-id"]["error"]["message"].startswith("requestId:")
    assert drain(queues, queues.not_allowed) == []
    extra = drain(queues, queues.extra_reply)
    assert [(r.body["requestId"], r.body["status"], r.attributes["requestId"]) for r in extra] == [
        ("to-extra", "ok", "to-extra")
    ]


def test_an_option_that_would_do_nothing_gets_an_error_reply_naming_what_it_needs(
    queue_handler: Handler, queues: Queues
) -> None:
    send(
        queues, [job("mmr-lambda-alone", mmrLambda=0.2), job("min-fused", useHybrid=True, minFusedScore=0.3)]
    )
    event = receive_event(queues)
    response = invoke(queue_handler, event)
    assert response["batchItemFailures"] == []  # permanent: answered with an error, not retried
    acknowledge(queues, event, response)
    replies = {r.body["requestId"]: r.body for r in drain(queues, queues.results)}
    refused = replies["mmr-lambda-alone"]
    assert refused["status"] == "error" and refused["error"]["code"] == "validation_error"
    assert refused["error"]["message"].startswith('mmrLambda: applies only with rerank.strategy "mmr"')
    assert refused["error"]["details"]["errors"][0]["field"] == "mmrLambda"
    assert replies["min-fused"]["status"] == "ok"


def test_a_job_for_a_file_search_store_gets_an_error_reply_naming_why(
    queue_handler: Handler, queues: Queues
) -> None:
    send(queues, [job("gemini-job", store="fileSearchStores/hvac-kb-7f3a"), job("pgvector-job")])
    event = receive_event(queues)
    response = invoke(queue_handler, event)
    assert response["batchItemFailures"] == []  # permanent: answered with an error, not retried
    acknowledge(queues, event, response)
    replies = {r.body["requestId"]: r.body for r in drain(queues, queues.results)}
    refused = replies["gemini-job"]
    assert refused["status"] == "error" and refused["error"]["code"] == "validation_error"
    assert refused["error"]["details"]["errors"][0]["field"] == "backend"
    assert refused["error"]["message"] == (
        "backend: Gemini File Search stores are not served by the retrieve queue; use /rag/retrieve"
    )
    assert replies["pgvector-job"]["status"] == "ok"


def test_a_job_may_ask_for_a_grounded_answer_instead_of_chunks(
    queue_handler: Handler, queues: Queues
) -> None:
    send(
        queues,
        [
            job("answer-job", answer=True, maxOutputTokens=200),
            job("nothing-job", answer=True, grade=0.99),
            job("chunks-job"),
            job("bad-flag-job", answer="yes"),
        ],
    )
    event = receive_event(queues)
    response = invoke(queue_handler, event)
    assert response["batchItemFailures"] == []
    acknowledge(queues, event, response)
    replies = {r.body["requestId"]: r.body for r in drain(queues, queues.results)}

    answered = replies["answer-job"]
    assert answered["status"] == "ok" and "response" not in answered
    answer = answered["answer"]
    assert answer["grounded"] is True and answer["sources"][0]["metadata"]["documentId"] == "k8s-scheduling"
    assert all(answer["text"][c["start"] : c["end"]] == c["text"] for c in answer["citations"])
    # Nothing above the threshold: an empty answer, and no model called.
    nothing = replies["nothing-job"]["answer"]
    assert nothing["grounded"] is False and nothing["pipeline"]["modelCalled"] is False
    assert "results" in replies["chunks-job"]["response"]
    refused = replies["bad-flag-job"]
    assert refused["status"] == "error" and refused["error"]["details"]["errors"][0]["field"] == "answer"


def test_without_its_idempotency_table_a_job_is_retried_rather_than_answered_unguarded(
    queue_handler: Handler, queues: Queues, moto: MotoServer
) -> None:
    send(queues, [job("guarded-1"), job("guarded-2")])
    event = receive_event(queues)
    # The table the function is configured with (see the queue_handler fixture) is gone.
    moto.client("dynamodb").delete_table(TableName=os.environ["IDEMPOTENCY_TABLE_NAME"])
    response = invoke(queue_handler, event)
    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {
        r["messageId"] for r in event["Records"]
    }
    assert drain(queues, queues.results) == []


def test_database_down_fails_every_record_until_the_messages_reach_the_dead_letter_queue(
    queue_handler: Handler, queues: Queues, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_core import container
    from retrieval_core.settings import get_settings

    ids = ["down-1", "down-2", "down-3"]
    send(queues, [job(i) for i in ids])
    previous = container.replace_service(None)
    invocations = 0
    try:
        with monkeypatch.context() as mp:
            mp.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
            get_settings.cache_clear()
            while (event := receive_event(queues))["Records"]:
                invocations += 1
                assert invocations <= 3, "a message was received more often than maxReceiveCount"
                response = invoke(queue_handler, event)
                assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {
                    r["messageId"] for r in event["Records"]
                }
                acknowledge(queues, event, response)
    finally:
        get_settings.cache_clear()
        container.replace_service(previous)

    assert invocations == 3
    dead = drain(queues, queues.dead_letters)
    assert sorted(r.body["requestId"] for r in dead) == ids
    assert drain(queues, queues.results) == []
    # Redriven once the database is back, each job is answered.
    send(queues, [json.dumps(r.body) for r in dead])
    event = receive_event(queues)
    response = invoke(queue_handler, event)
    assert response["batchItemFailures"] == []
    assert sorted(r.body["requestId"] for r in drain(queues, queues.results)) == ids


def test_a_job_before_the_schema_is_migrated_is_retried_then_answered_once_it_is(
    queue_handler: Handler,
    queues: Queues,
    own_runtime: Any,
    private_postgres: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from retrieval_core.container import get_service
    from retrieval_core.db.migrations.runner import migrate
    from retrieval_core.documents.sample import load_sample_corpus

    dsn = private_postgres.get_uri()
    # The handler detached the core's logger from the root logger, as in Lambda. pytest captures from
    # such loggers only from 9.1, so caplog's handler goes on it here (once: 9.1 puts it there too).
    core_logger = logging.getLogger("retrieval_core")
    if caplog.handler not in core_logger.handlers:
        core_logger.addHandler(caplog.handler)
    # The deploy updated the functions; its MigrateFunction has not run yet.
    own_runtime(DATABASE_URL=dsn, AUTO_MIGRATE="false")
    send(queues, [job("too-early")])
    event = receive_event(queues)
    response = invoke(queue_handler, event)
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [event["Records"][0]["messageId"]]
    acknowledge(queues, event, response)
    assert drain(queues, queues.results) == []  # no error reply: schema_not_ready is transient
    transient = [r for r in caplog.records if r.getMessage().startswith("job failed transiently")]
    assert [getattr(r, "code", None) for r in transient] == ["schema_not_ready"]

    migrate(dsn)
    load_sample_corpus(get_service())
    retry = receive_event(queues)
    assert invoke(queue_handler, retry)["batchItemFailures"] == []
    replies = drain(queues, queues.results)
    assert [(r.body["requestId"], r.body["status"]) for r in replies] == [("too-early", "ok")]


def test_end_to_end_every_job_gets_exactly_one_reply(queue_handler: Handler, queues: Queues) -> None:
    questions = [
        "How does Kubernetes decide which node runs a pod?",
        "Why is the office cold in the morning?",
        "How do readiness probes work?",
        "What makes pods scale automatically?",
    ]
    n = 23
    ids = [f"e2e-{i}" for i in range(n)]
    bodies = [
        job(rid, questions[i % len(questions)], **({"replyTo": queues.extra_reply} if i % 5 == 0 else {}))
        for i, rid in enumerate(ids)
    ]
    send(queues, bodies)
    send(queues, bodies[:4])  # the producer sent these twice
    batches = 0
    while (event := receive_event(queues))["Records"]:
        batches += 1
        assert batches < 20
        response = invoke(queue_handler, event)
        assert response["batchItemFailures"] == []
        acknowledge(queues, event, response)

    replies = drain(queues, queues.results) + drain(queues, queues.extra_reply)
    counts = Counter(r.body["requestId"] for r in replies)
    assert sorted(counts) == sorted(ids)
    assert max(counts.values()) == 1
    assert all(r.body["status"] == "ok" and r.attributes["requestId"] == r.body["requestId"] for r in replies)
    assert queue_depth(queues, queues.requests) == 0
    assert queue_depth(queues, queues.dead_letters) == 0


def test_a_batch_embeds_all_its_queries_in_one_provider_call(
    queue_handler: Handler, queues: Queues, postgres_dsn: str, service: Any
) -> None:
    queries = [f"{QUESTION} (variant {i})" for i in range(10)]
    send(queues, [job(f"embed-{i}", q) for i, q in enumerate(queries)])
    event = receive_event(queues)
    counting = CountingEmbedder(service.embedder)
    with installed_service(postgres_dsn, counting):
        response = invoke(queue_handler, event)
    assert response["batchItemFailures"] == []
    assert len(counting.calls) == 1
    assert sorted(counting.calls[0]) == sorted(queries)
    replies = drain(queues, queues.results)
    assert len(replies) == 10 and all(r.body["status"] == "ok" for r in replies)


def test_a_precomputed_query_vector_gives_the_same_answer_without_embedding(
    service: Any, sample_store: Any, postgres_dsn: str
) -> None:
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest

    request = RetrieveRequest.model_validate({"query": QUESTION, "grade": 0.2, "cacheTTLms": 0})
    vector = service.embedder.embed([QUESTION], "query")[0]
    counting = CountingEmbedder(service.embedder)
    with installed_service(postgres_dsn, counting) as own:
        plain, _ = own.retrieve(request, grant=OPEN_GRANT)
        precomputed, _ = own.retrieve(request, lambda _query: vector, grant=OPEN_GRANT)
    assert len(counting.calls) == 1  # only the plain call embedded
    assert [r.id for r in precomputed.results] == [r.id for r in plain.results]
    assert precomputed.results[0].metadata["documentId"] == "k8s-scheduling"


# These two run in this order (pytest keeps a file's order): the first builds a queue handler, which in
# Lambda detaches the core's logger from the root logger; the second shows tests/conftest.py put it back.


def test_a_queue_handler_sends_the_core_logs_through_powertools(queue_handler: Handler) -> None:
    assert logging.getLogger("retrieval_core").propagate is False


def test_after_a_queue_handler_the_core_logs_reach_the_root_logger_again() -> None:
    # A handler of our own on the root logger, as `logging.basicConfig` gives one: caplog's handler would
    # not do, because Powertools copied it onto the detached logger as well.
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(level=logging.WARNING)
    logging.getLogger().addHandler(keep)
    try:
        logging.getLogger("retrieval_core.lambdas.retrieve_queue").warning("seen after the queue tests")
    finally:
        logging.getLogger().removeHandler(keep)
    assert [r.getMessage() for r in records] == ["seen after the queue tests"]


def test_a_reply_carries_the_prompt_context_and_one_too_large_for_sqs_is_a_clear_error(
    queue_handler: Handler,
    queues: Queues,
    wide_store: str,  # noqa: F811
) -> None:
    deep = {"store": wide_store, "engineName": "naive", "grade": 0.0}
    send(
        queues,
        [
            job("formatted", returnFormatted=True, maxContextTokens=200),
            job("fifty", "lakes and rivers", **deep, similarityTopK=50),  # about 0.2 MB
            job("hundred", "lakes and rivers", **deep, similarityTopK=100),  # about 0.4 MB
        ],
    )
    event = receive_event(queues)
    response = invoke(queue_handler, event)
    assert response["batchItemFailures"] == []  # too large is permanent: answered, not retried
    acknowledge(queues, event, response)
    replies = {r.body["requestId"]: r.body for r in drain(queues, queues.results)}
    formatted = replies["formatted"]["response"]
    assert formatted["context"].startswith("[1] Source: Kubernetes pod scheduling (k8s-docs.pdf), page 12\n")
    assert formatted["contextTokens"] <= 200 and formatted["contextTokenizer"] == "all-MiniLM-L6-v2"
    assert replies["fifty"]["status"] == "ok" and replies["fifty"]["response"]["totalResults"] == 50
    refused = replies["hundred"]
    assert refused["status"] == "error" and refused["error"]["code"] == "response_too_large"
    assert refused["error"]["message"].endswith("or send the request alone to POST /api/v1/rag/retrieve")
    assert (
        refused["error"]["details"]["maxBytes"] == 262_144 - 1_024 < refused["error"]["details"]["sizeBytes"]
    )
    assert queue_depth(queues, queues.dead_letters) == 0
