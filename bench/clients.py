"""What the Python client adds to a call, and to an import: `make bench-clients`; writes its block of
docs/benchmarks.md.

Run by `make bench-clients` in .venv-clients (the client installed, not the service) against a fresh
`retrieval serve` (tests/client_server.py). Each call is made the same number of times through a plain
httpx client (the same request: path, JSON body, `x-api-key`) and through RetrievalClient or
AsyncRetrievalClient, in alternating rounds so that a drift of the machine touches both alike; the
figures are medians. What the client adds is the difference: building the request, the retry loop, the
error check and the JSON decoding that the plain call also does. Import: a fresh interpreter importing
`retrieval_client` against one importing `httpx`, its one heavy dependency.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.common import REPO, machine

OUT = REPO / "docs" / "benchmarks.md"
START, END = "<!-- bench-clients:start -->", "<!-- bench-clients:end -->"
ROUNDS = 20
CALLS = 25  # per round and per way: 500 calls each
IMPORTS = 15
QUESTION: dict[str, Any] = {
    "query": "How does Kubernetes decide which node runs a pod?",
    "grade": 0.3,
    "similarityTopK": 3,
}


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


async def timed_async(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def sync_pairs(url: str, key: str) -> dict[str, tuple[list[float], list[float]]]:
    from retrieval_client import RetrievalClient

    headers = {"x-api-key": key}
    out: dict[str, tuple[list[float], list[float]]] = {}
    with httpx.Client(base_url=url, headers=headers) as plain, RetrievalClient(url, key) as client:

        def plain_store() -> object:
            response = plain.get("/api/v1/stores/sample")
            response.raise_for_status()
            return response.json()

        def plain_retrieve() -> object:
            response = plain.post("/api/v1/rag/retrieve", json={**QUESTION, "cacheTTLms": 0})
            response.raise_for_status()
            return response.json()

        ways: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
            "GET /stores/{store}": (plain_store, lambda: client.get_store("sample")),
            "POST /rag/retrieve (uncached)": (
                plain_retrieve,
                lambda: client.retrieve(**QUESTION, cacheTTLms=0),
            ),
        }
        for name, (raw, typed) in ways.items():
            raw(), typed()  # connections open, model loaded
            plain_ms: list[float] = []
            client_ms: list[float] = []
            for round_number in range(ROUNDS):
                first, second = (raw, typed) if round_number % 2 == 0 else (typed, raw)
                for way in (first, second):
                    samples = [timed(way) for _ in range(CALLS)]
                    (plain_ms if way is raw else client_ms).extend(samples)
            out[name] = (plain_ms, client_ms)
    return out


async def async_pair(url: str, key: str) -> tuple[list[float], list[float]]:
    from retrieval_client import AsyncRetrievalClient

    async with (
        httpx.AsyncClient(base_url=url, headers={"x-api-key": key}) as plain,
        AsyncRetrievalClient(url, key) as client,
    ):

        async def raw() -> object:
            response = await plain.get("/api/v1/stores/sample")
            response.raise_for_status()
            return response.json()

        async def typed() -> object:
            return await client.get_store("sample")

        await raw(), await typed()
        plain_ms: list[float] = []
        client_ms: list[float] = []
        for round_number in range(ROUNDS):
            order = (raw, typed) if round_number % 2 == 0 else (typed, raw)
            for way in order:
                samples = [await timed_async(way) for _ in range(CALLS)]
                (plain_ms if way is raw else client_ms).extend(samples)
        return plain_ms, client_ms


def import_ms(module: str) -> float:
    """Median wall time of a fresh interpreter importing `module` (the interpreter's own start included)."""
    samples = []
    for _ in range(IMPORTS):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def row(name: str, plain_ms: list[float], client_ms: list[float]) -> str:
    plain, client = statistics.median(plain_ms), statistics.median(client_ms)
    cells = [name, str(len(plain_ms)), f"{plain:.2f}", f"{client:.2f}", f"{client - plain:+.2f}"]
    return "| " + " | ".join([*cells, f"{client / plain:.2f}"]) + " |"


def report(url: str, key: str) -> str:
    pairs = sync_pairs(url, key)
    plain_async, client_async = asyncio.run(async_pair(url, key))
    bare, with_client, with_httpx = import_ms("sys"), import_ms("retrieval_client"), import_ms("httpx")
    load, when = os.getloadavg()[0], datetime.now(UTC)
    lines = [
        START,
        f"Measured {when:%Y-%m-%d %H:%M} UTC on {machine()}, load average {load:.2f} at the end; "
        "`make bench-clients`.",
        "",
        "| call (against `retrieval serve` on 127.0.0.1) | calls | plain httpx p50 ms | client p50 ms | "
        "added ms | ratio |",
        "|---|---|---|---|---|---|",
        *(row(f"RetrievalClient: {name}", *samples) for name, samples in pairs.items()),
        row("AsyncRetrievalClient: GET /stores/{store}", plain_async, client_async),
        "",
        f"Import in a fresh interpreter (median of {IMPORTS}): `import retrieval_client` "
        f"{with_client:.0f} ms, `import httpx` {with_httpx:.0f} ms, the interpreter alone {bare:.0f} ms.",
        END,
    ]
    return "\n".join(lines)


def main() -> int:
    url, key = os.environ["RETRIEVAL_URL"], os.environ["RETRIEVAL_API_KEY"]
    block = report(url, key)
    print(block)
    text = OUT.read_text(encoding="utf-8")
    if START in text:
        before, rest = text.split(START, 1)
        text = before + block + rest.split(END, 1)[1]
        OUT.write_text(text, encoding="utf-8")
    else:
        print(f"{OUT} has no {START} block: not written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
