"""Queue benchmark: messages per second through the SQS handler, in batches of 10.

Run with `make bench-queue`. SQS and the idempotency table are on a local moto_server, the search
runs on the embedded PostgreSQL of .data (the msmarco-5k store that `make bench` ingests, else the
sample store), queries are embedded by the local model. Each batch is sent to a request queue,
received, turned into the event Lambda would pass, handled, and acknowledged. Answers are not cached
(`cacheTTLms: 0`), so every job embeds and searches. The time inside the handler is split into the
one embedding call per batch, the searches, and the rest (idempotency records in DynamoDB, replies
to SQS, parsing and validation), which here is mostly moto_server round trips: the table ends with
what one costs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from bench.common import (
    REPO,
    bench_store,
    load_queries,
    machine,
    median,
    moto_environment,
    percentile,
    timed_ms,
)
from tests.servers import MotoServer, create_idempotency_table

BATCH = 10
ROUNDS = 4


class Stopwatch:
    """Accumulated seconds of the calls it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed


def main() -> None:
    with MotoServer() as moto:
        run(moto)


def run(moto: MotoServer) -> None:
    sqs = moto.client("sqs")
    suffix = uuid.uuid4().hex[:8]
    requests = sqs.create_queue(QueueName=f"bench-requests-{suffix}")["QueueUrl"]
    results = sqs.create_queue(QueueName=f"bench-results-{suffix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=requests, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    table = f"bench-idempotency-{suffix}"
    create_idempotency_table(moto.client("dynamodb"), table)
    os.environ.update(
        RESULTS_QUEUE_URL=results,
        IDEMPOTENCY_TABLE_NAME=table,
        SQS_ENDPOINT_URL=moto.endpoint_url,
        DYNAMODB_ENDPOINT_URL=moto.endpoint_url,
        **moto_environment(),
    )
    from retrieval_core.container import get_service
    from retrieval_core.lambdas.retrieve_queue import build_queue_handler

    service = get_service()  # the embedded database of .data unless DATABASE_URL is set
    store = bench_store(service)

    embedding, searching = Stopwatch(), Stopwatch()
    inner_embed = service.embedder.embed
    embed_calls: list[int] = []

    def embed(texts: Sequence[str], kind: Any) -> list[list[float]]:
        embed_calls.append(len(texts))
        vectors: list[list[float]] = inner_embed(texts, kind)
        return vectors

    # Instance attributes shadow the methods: the handler's calls go through the stopwatches.
    service.embedder.embed = embedding.wrap(embed)  # type: ignore[method-assign]
    service.retrieve = searching.wrap(service.retrieve)  # type: ignore[method-assign]

    handler = build_queue_handler()
    context = SimpleNamespace(
        function_name="bench-queue",
        memory_limit_in_mb=1024,
        aws_request_id="bench",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:bench-queue",
        get_remaining_time_in_millis=lambda: 60_000,
    )

    def batch_event(queries: Sequence[str]) -> dict[str, Any]:
        for query in queries:
            body = {"requestId": uuid.uuid4().hex, "query": query, "grade": 0.0, "similarityTopK": 10}
            sqs.send_message(
                QueueUrl=requests, MessageBody=json.dumps(body | {"store": store, "cacheTTLms": 0})
            )
        messages: list[dict[str, Any]] = []
        while len(messages) < len(queries):
            got = sqs.receive_message(QueueUrl=requests, MaxNumberOfMessages=BATCH, WaitTimeSeconds=0)
            messages += got.get("Messages", [])
        records = [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
        return {"Records": records}

    def handle(event: dict[str, Any]) -> float:
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # Powertools prints its JSON logs and metrics
            response = handler(event, context)
        seconds = time.perf_counter() - started
        assert response == {"batchItemFailures": []}, response
        for record in event["Records"]:
            sqs.delete_message(QueueUrl=requests, ReceiptHandle=record["receiptHandle"])
        return seconds

    queries = list(load_queries().values())
    handle(batch_event(queries[:BATCH]))  # warm up: clients, connections, the model
    embedding.seconds = searching.seconds = 0.0
    embed_calls.clear()

    batch_ms: list[float] = []
    embed_ms: list[float] = []
    search_ms: list[float] = []
    for _ in range(ROUNDS):
        for start in range(0, len(queries) - BATCH + 1, BATCH):
            event = batch_event(queries[start : start + BATCH])
            before_embed, before_search = embedding.seconds, searching.seconds
            batch_ms.append(handle(event) * 1000)
            embed_ms.append((embedding.seconds - before_embed) * 1000)
            search_ms.append((searching.seconds - before_search) * 1000)
    replies = 0
    while got := sqs.receive_message(QueueUrl=results, MaxNumberOfMessages=10).get("Messages", []):
        replies += len(got)
        for m in got:
            sqs.delete_message(QueueUrl=results, ReceiptHandle=m["ReceiptHandle"])

    # What one call to moto_server costs here; the handler makes three per job (idempotency record
    # put and update, reply), which a real DynamoDB and SQS answer in a few ms each.
    round_trip_ms = [
        timed_ms(lambda: sqs.send_message(QueueUrl=results, MessageBody="{}"), 1)[0] for _ in range(30)
    ]
    messages = len(batch_ms) * BATCH
    assert replies == messages + BATCH, (replies, messages)  # one reply per job, the warm-up's included
    total_ms = sum(batch_ms)
    assert set(embed_calls) == {BATCH} and len(embed_calls) == len(batch_ms), embed_calls
    other_ms = total_ms - sum(embed_ms) - sum(search_ms)
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(
        f"command: make bench-queue (store {store}, top-10, uncached, local model, "
        "SQS and DynamoDB on moto_server, one process)"
    )
    print()
    print("| metric | value |")
    print("|---|---|")
    print(f"| messages handled (batches of {BATCH}) | {messages} |")
    print(f"| messages per second (inside the handler) | {messages / (total_ms / 1000):.1f} |")
    print(f"| batch latency p50 / p99 (ms) | {median(batch_ms):.1f} / {percentile(batch_ms, 99):.1f} |")
    embed_share, search_share = sum(embed_ms) / total_ms, sum(search_ms) / total_ms
    print(f"| embedding, one call per batch: p50 ms, share | {median(embed_ms):.1f}, {embed_share:.0%} |")
    print(f"| searching, 10 per batch: p50 ms, share | {median(search_ms):.1f}, {search_share:.0%} |")
    print(f"| idempotency + replies + parsing: share | {other_ms / total_ms:.0%} |")
    print(f"| one moto_server round trip (SendMessage), p50 ms | {median(round_trip_ms):.1f} |")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
