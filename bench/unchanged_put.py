"""What a PUT of an unchanged 1 MB PDF costs over HTTP. Run with `python -m bench.unchanged_put`.

Makes a PDF of msmarco-5k passages (one page each, until it holds at least `--megabytes` MB), PUTs it once
into a fresh store of a uvicorn server on 127.0.0.1 (parsed, embedded by the local MiniLM, written), then
PUTs the same body `--repeats` times and prints each answer's status and time, and their median. Everything
runs on an embedded PostgreSQL of its own in a temporary folder, deleted afterwards.

`--package DIR` runs the server on another checkout's `layers/retrieval_core` (the figure of another
version, on the same machine and file).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import EVAL_DIR, REPO, machine, median
from bench.ingest import _latin, _start_postgres


def report_pdf(megabytes: float) -> bytes:
    """A PDF of msmarco-5k passages, one a page, of at least `megabytes` MB."""
    from tests.files import pdf_bytes

    pages: list[str] = []
    wanted = int(megabytes * 1_000_000)
    with (EVAL_DIR / "corpus.jsonl").open() as lines:
        for line in lines:
            pages.append(_latin(textwrap.fill(json.loads(line)["text"], 90)))
            if len(pages) % 50 == 0 and len(pdf_bytes(pages, title="Report")) >= wanted:
                break
    return pdf_bytes(pages, title="Report")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--package", type=Path, help="another checkout's layers/retrieval_core")
    args = parser.parse_args()

    import httpx

    from bench.load import start_server, wait_ready
    from tests.servers import free_port

    document = report_pdf(args.megabytes)
    body = {"content": base64.b64encode(document).decode(), "contentType": "application/pdf"}
    scratch = Path(tempfile.mkdtemp(prefix="bench-unchanged-"))
    os.environ.update({"DATA_DIR": str(scratch), "EMBEDDING_PROVIDER": "local"})
    if args.package is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(args.package.resolve()), str(REPO)])
    postgres = _start_postgres(scratch / "data")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(str(postgres.get_uri()), port)
    times: list[float] = []
    try:
        asyncio.run(wait_ready(base, server))
        with httpx.Client(base_url=base, timeout=600.0) as client:
            client.put("/api/v1/stores/bench-unchanged", json={}).raise_for_status()
            url = "/api/v1/stores/bench-unchanged/documents/report.pdf"
            started = time.perf_counter()
            first = client.put(url, json=body).raise_for_status().json()
            seconds = time.perf_counter() - started
            print(f"first PUT: {first['status']}, {first['chunkCount']} chunks, {seconds:.1f} s")
            for _ in range(args.repeats):
                started = time.perf_counter()
                again = client.put(url, json=body).raise_for_status()
                times.append(time.perf_counter() - started)
                print(f"again: {again.status_code} {again.json()['status']} in {times[-1] * 1000:.0f} ms")
    finally:
        server.terminate()
        server.wait(timeout=30)
        postgres.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(f"package: {args.package or 'this checkout'}")
    print(
        f"file: {len(document):,} bytes, PDF; command: python -m bench.unchanged_put {' '.join(sys.argv[1:])}"
    )
    print(
        f"unchanged PUT: median {median(times) * 1000:.0f} ms of {len(times)}, max {max(times) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    os.chdir(REPO)
    main()
