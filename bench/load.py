"""Load test. Run with `make bench-load`.

Starts the real local server (`retrieval serve`, uvicorn) on 127.0.0.1 against the embedded PostgreSQL
holding the msmarco-5k store (5,001 chunks; ingested first through the normal CLI if missing), then
runs 32 concurrent clients for 60 s on each endpoint: similarity search (the 50 queries' vectors,
computed beforehand) and retrieve (the 50 query texts, embedded by the server). Caching is off
(`cacheTTLms: 0`), so every request reaches PostgreSQL. Prints throughput, p50, p99 and the error count
as a markdown table. Any error makes the exit status 1.

`--noisy` (`make bench-noisy`): the noisy-neighbour scenario instead. 8 clients send ordinary
retrieves (the 50 query texts, top-10, dense) for `--seconds` alone, then again while 8 other clients
send the most expensive valid requests we could construct (tests/integration/test_bounded_cost.py:
1,600 negated words, 8,000 characters of hybrid 50 deep with MMR 50, a batch of 20 of those, and
the dearest request below the "expensive" line). Prints the ordinary clients' p99 under attack as a
ratio to their p99 alone, and what the attackers were answered. Run once with the service's defaults
and once with EXPENSIVE_SEARCH_CONCURRENCY=1000 (no slot limit), to show what the slots do. Any
error of an ordinary client makes the exit status 1.

`--noisy --uploads`: the same with hostile uploads as the attackers (`hostile_uploads`: a 6.9 KB PDF
of ten pages sharing one 2 MB content stream, sent whole and abandoned after 1 s, a 60 KB DOCX of 3
million empty paragraphs, a CSV with a 4 MB cell, HTML with 20,000 empty <main>), with the defaults and
with PARSE_CONCURRENCY=2 and =1000 (no parse slot limit).
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
UPLOAD_STORE = "bench-hostile-uploads"

# An attacker's request: method, path, JSON body, and how long it waits for the answer before it hangs up.
Attack = tuple[str, str, dict[str, Any], float]


@dataclass
class Run:
    """What one endpoint's run measured."""

    label: str
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def start_server(dsn: str, port: int, **extra_env: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": dsn, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra_env}
    # Access logs off: 32 clients would spend the server's CPU on printing.
    code = (
        "import uvicorn; from retrieval_core.api.app import create_app; "
        "from retrieval_core.container import get_service; get_service(); "
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


async def attack(base: str, bodies: list[Attack], clients: int, stop: asyncio.Event) -> dict[str, int]:
    """`clients` loops sending `bodies` until `stop`; how many answers of each status and code."""
    import httpx

    answers: dict[str, int] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60.0) as client:

        async def loop(worker: int) -> None:
            method, path, body, timeout_s = bodies[worker % len(bodies)]
            while not stop.is_set():
                try:
                    response = await client.request(method, path, json=body, timeout=timeout_s)
                except httpx.HTTPError as exc:
                    label = type(exc).__name__
                else:
                    ok = response.status_code < 300
                    label = f"{response.status_code} {'ok' if ok else response.json()['error']['code']}"
                answers[label] = answers.get(label, 0) + 1

        await asyncio.gather(*(loop(w) for w in range(clients)))
    return answers


async def under_attack(
    base: str,
    bodies: list[dict[str, Any]],
    attackers: list[Attack],
    clients: int,
    seconds: float,
) -> tuple[Run, dict[str, int]]:
    """The ordinary clients' run while `clients` attackers send `attackers`."""
    stop = asyncio.Event()
    attacking = asyncio.create_task(attack(base, attackers, clients, stop))
    await asyncio.sleep(1.0)  # the attack is under way before the clock starts
    run = await drive(base, "retrieve under attack", RETRIEVE, bodies, clients, seconds)
    stop.set()
    return run, await attacking


def hostile_uploads() -> list[Attack]:
    """Document PUTs that once cost tens of seconds of CPU or gigabytes each (tests/files.py builds them)."""
    import base64

    from tests.files import csv_bytes, html_bytes, paragraph_bomb_docx, shared_stream_pdf

    def put(name: str, data: bytes, timeout_s: float = 60.0) -> Attack:
        body = {"content": base64.b64encode(data).decode(), "fileName": name}
        return ("PUT", f"/api/v1/stores/{UPLOAD_STORE}/documents/{name}", body, timeout_s)

    pdf = shared_stream_pdf(pages=10, stream_bytes=2_000_000)
    return [
        put("shared-stream.pdf", pdf),
        put("abandoned.pdf", pdf, timeout_s=1.0),
        put("paragraphs.docx", paragraph_bomb_docx(3_000_000)),
        put("cell.csv", csv_bytes([{"id": "1", "text": "word " * 800_000}])),
        put("mains.html", html_bytes("<main></main>" * 20_000 + "<main><p>Hello.</p></main>")),
    ]


async def create_store(base: str, name: str) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base) as client:
        response = await client.put(f"/api/v1/stores/{name}", json={})
        if response.status_code not in (200, 201):
            raise SystemExit(f"could not create store {name}: {response.text}")


def noisy_neighbour(dsn: str, clients: int, seconds: float, uploads: bool = False) -> None:
    """The noisy-neighbour scenario (module docstring); prints its table."""
    from tests.integration.test_bounded_cost import expensive_bodies

    queries = list(load_queries().values())
    bodies = [
        {"query": q, "grade": 0.0, "similarityTopK": 10, "store": STORE, "cacheTTLms": 0} for q in queries
    ]
    if uploads:
        attackers = hostile_uploads()
        servers: tuple[tuple[str, dict[str, str]], ...] = (
            (f"defaults (PARSE_CONCURRENCY {os.environ.get('PARSE_CONCURRENCY', 1)})", {}),
            ("2 parse slots", {"PARSE_CONCURRENCY": "2"}),
            ("no parse slot limit", {"PARSE_CONCURRENCY": "1000"}),
        )
    else:
        attackers = [("POST", path, body, 60.0) for path, body in expensive_bodies(STORE)]
        servers = (
            ("defaults (2 expensive slots)", {}),
            ("no slot limit", {"EXPENSIVE_SEARCH_CONCURRENCY": "1000"}),
        )
    rows = []
    failed = False
    for label, env in servers:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = start_server(dsn, port, **env)
        try:
            asyncio.run(wait_ready(base, server))
            if uploads:
                asyncio.run(create_store(base, UPLOAD_STORE))
            alone = asyncio.run(drive(base, "retrieve alone", RETRIEVE, bodies, clients, seconds))
            attacked, answers = asyncio.run(under_attack(base, bodies, attackers, clients, seconds))
        finally:
            server.terminate()
            server.wait(timeout=30)
        failed = failed or bool(alone.errors or attacked.errors)
        rows.append((label, alone, attacked, answers))
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    kind = "hostile uploads" if uploads else "expensive searches"
    print(
        f"command: make bench-noisy ({clients} ordinary clients x {seconds:.0f} s alone, then with {clients} "
        f"attackers sending {kind}; store {STORE}, ordinary = retrieve top-10 dense, cacheTTLms 0, one "
        "uvicorn process)"
    )
    print()
    print(
        "| server | ordinary p50 alone / attacked (ms) | ordinary p99 alone / attacked (ms) | p99 ratio "
        "| ordinary requests (errors) alone / attacked | attackers' answers |"
    )
    print("|---|---|---|---|---|---|")
    for label, alone, attacked, answers in rows:
        p99_alone, p99_attacked = percentile(alone.latencies_ms, 99), percentile(attacked.latencies_ms, 99)
        answered = ", ".join(f"{k}: {v}" for k, v in sorted(answers.items()))
        print(
            f"| {label} | {median(alone.latencies_ms):.1f} / {median(attacked.latencies_ms):.1f} "
            f"| {p99_alone:.1f} / {p99_attacked:.1f} | {p99_attacked / p99_alone:.2f}x "
            f"| {len(alone.latencies_ms)} ({len(alone.errors)}) / {len(attacked.latencies_ms)} "
            f"({len(attacked.errors)}) | {answered} |"
        )
    if failed:
        errors = [e for _, alone, attacked, _ in rows for e in alone.errors + attacked.errors]
        print("\nfirst errors:", *errors[:5], sep="\n  ")
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--noisy", action="store_true", help="the noisy-neighbour scenario")
    parser.add_argument("--uploads", action="store_true", help="--noisy: hostile uploads as the attackers")
    args = parser.parse_args()

    from retrieval_core.container import database_conninfo, get_service
    from retrieval_core.settings import get_settings

    ensure_corpus(fresh=False)  # ingests msmarco-5k through `retrieval ingest` when it is missing
    service = get_service()
    dsn = database_conninfo(get_settings())  # the embedded server this process started
    if args.noisy:
        noisy_neighbour(dsn, args.clients, args.seconds, args.uploads)
        return
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
