"""Load test (issue 6, item 7). Run with `make bench-load`.

Starts the real local server (`retrieval serve`, uvicorn) on 127.0.0.1 against the embedded PostgreSQL
holding the msmarco-5k store (5,001 chunks; ingested first through the normal CLI if missing), then
runs 32 concurrent clients for 60 s on each endpoint: similarity search (the 50 queries' vectors,
computed beforehand) and retrieve (the 50 query texts, embedded by the server). Caching is off
(`cacheTTLms: 0`), so every request reaches PostgreSQL. Prints throughput, p50, p99 and the error count
as a markdown table. Any error makes the exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bench.common import REPO, load_queries, machine, median, percentile
from bench.core import STORE
from bench.core import ingest as ensure_corpus
from tests.servers import free_port

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"


@dataclass
class Run:
    """What one endpoint's run measured."""

    label: str
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def start_server(dsn: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": dsn, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # Access logs off: 32 clients would spend the server's CPU on printing.
    code = (
        "import uvicorn; from retrieval_core.api.app import create_app; "
        "from retrieval_core.runtime import get_service; get_service(); "
        f"uvicorn.run(create_app(), host='127.0.0.1', port={port}, access_log=False, log_level='warning')"
    )
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=REPO)


async def wait_ready(base: str, server: subprocess.Popen[bytes]) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base) as client:
        for _ in range(1200):
            if server.poll() is not None:
                raise SystemExit("the server exited before it was ready")
            try:
                if (await client.get("/api/v1/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the server did not become ready within 120 s")


async def drive(
    base: str, label: str, path: str, bodies: list[dict[str, Any]], clients: int, seconds: float
) -> Run:
    """`clients` concurrent loops posting `bodies` in turn for `seconds`."""
    import httpx
    from tqdm import tqdm

    run = Run(label, seconds)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30.0) as client:
        for body in bodies[:clients]:  # warm-up, not counted
            await client.post(path, json=body)
        bar = tqdm(total=int(seconds), desc=label, unit="s", leave=False)
        deadline = time.perf_counter() + seconds

        async def loop(worker: int) -> None:
            index = worker
            while time.perf_counter() < deadline:
                body = bodies[index % len(bodies)]
                index += clients
                started = time.perf_counter()
                try:
                    response = await client.post(path, json=body)
                except httpx.HTTPError as exc:
                    run.errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                elapsed_ms = (time.perf_counter() - started) * 1000
                if response.status_code == 200 and response.json().get("results"):
                    run.latencies_ms.append(elapsed_ms)
                else:
                    run.errors.append(f"{response.status_code}: {response.text[:200]}")

        async def tick() -> None:
            while time.perf_counter() < deadline:
                await asyncio.sleep(1)
                bar.update(1)

        started = time.perf_counter()
        await asyncio.gather(tick(), *(loop(w) for w in range(clients)))
        run.seconds = time.perf_counter() - started
        bar.close()
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()

    from retrieval_core.runtime import database_conninfo, get_service
    from retrieval_core.settings import get_settings

    ensure_corpus(fresh=False)  # ingests msmarco-5k through `retrieval ingest` when it is missing
    service = get_service()
    dsn = database_conninfo(get_settings())  # the embedded server this process started
    queries = list(load_queries().values())
    vectors = service.embedder.embed(queries, "query")
    retrieve_bodies = [
        {"query": q, "grade": 0.0, "similarityTopK": 10, "store": STORE, "cacheTTLms": 0} for q in queries
    ]
    search_bodies = [{"queryEmbedding": v, "topK": 10, "store": STORE, "cacheTTLms": 0} for v in vectors]

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(dsn, port)
    try:
        asyncio.run(wait_ready(base, server))
        runs = [
            asyncio.run(drive(base, "similarity search", SEARCH, search_bodies, args.clients, args.seconds)),
            asyncio.run(drive(base, "retrieve", RETRIEVE, retrieve_bodies, args.clients, args.seconds)),
        ]
    finally:
        server.terminate()
        server.wait(timeout=30)

    with service.database.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM chunks c JOIN stores s ON s.id = c.store_id WHERE s.name = %s", (STORE,)
        ).fetchone()
    chunks = int(row[0]) if row else 0
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(
        f"command: make bench-load ({args.clients} clients x {args.seconds:.0f} s per endpoint, "
        f"store {STORE} with {chunks} chunks, top-10, cacheTTLms 0, one uvicorn process)"
    )
    print()
    print("| endpoint | requests/s | p50 (ms) | p99 (ms) | requests | errors |")
    print("|---|---|---|---|---|---|")
    for run in runs:
        ok = run.latencies_ms
        rate = len(ok) / run.seconds
        p50 = median(ok) if ok else float("nan")
        p99 = percentile(ok, 99) if ok else float("nan")
        print(f"| {run.label} | {rate:.1f} | {p50:.1f} | {p99:.1f} | {len(ok)} | {len(run.errors)} |")
    errors = [e for run in runs for e in run.errors]
    if errors:
        print("\nfirst errors:", *errors[:5], sep="\n  ")
        sys.exit(1)


if __name__ == "__main__":
    os.chdir(REPO)
    main()
