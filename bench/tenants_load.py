"""The concurrency run of bench/tenants.py: clients writing and searching at once, for a while, in threads
of this process sharing one service (its connection pool), as the threads of `retrieval serve` do.

Writers write one small new document at a time into a random filler store (or a measured one when there
are no fillers); searchers send a random retrieve (dense, hybrid, filtered 1% or 10%) to a random store,
measured or filler. Every failure is counted by its kind. The documents written are deleted afterwards.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from bench.tenants_build import attempt
from bench.tenants_measure import RETRIEVES, Context, probe_document, retrieve_ids, write_one
from tests.writing import document_service


@dataclass
class Client:
    """What one client did: milliseconds of its successful requests and its failures by kind."""

    kind: str
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    written: list[tuple[str, str]] = field(default_factory=list)


def writer_loop(ctx: Context, client: Client, stores: list[str], number: int, stop: float) -> None:
    rng = random.Random(number)
    n = 0
    while time.perf_counter() < stop:
        store = rng.choice(stores)
        document = probe_document(ctx, f"load{number}", n)
        n += 1
        started = time.perf_counter()
        ok, _ = attempt(partial(write_one, ctx, store, document), client.errors)
        if ok:
            client.latencies.append((time.perf_counter() - started) * 1000)
            client.written.append((store, document.id))


def searcher_loop(ctx: Context, client: Client, stores: list[str], number: int, stop: float) -> None:
    rng = random.Random(1000 + number)
    queries = [
        (text, vector)
        for target in ctx.targets
        for text, vector in zip(target.queries.texts, target.queries.vectors, strict=True)
    ]
    while time.perf_counter() < stop:
        text, vector = rng.choice(queries)
        store, figure = rng.choice(stores), rng.choice(RETRIEVES)
        started = time.perf_counter()
        ok, _ = attempt(partial(retrieve_ids, ctx, store, text, vector, figure), client.errors)
        if ok:
            client.latencies.append((time.perf_counter() - started) * 1000)


def concurrency_run(
    ctx: Context, fillers: list[str], seconds: float, writers: int = 4, searchers: int = 4
) -> dict[str, Any]:
    """`writers` + `searchers` clients for `seconds`; per kind: requests, p50, p99, errors by kind."""
    measured = [t.name for t in ctx.targets]
    write_to = fillers or measured
    search_in = measured + fillers
    stop = time.perf_counter() + seconds
    clients = [Client("write") for _ in range(writers)] + [Client("search") for _ in range(searchers)]
    threads = [
        threading.Thread(
            target=writer_loop if c.kind == "write" else searcher_loop,
            args=(ctx, c, write_to if c.kind == "write" else search_in, n, stop),
        )
        for n, c in enumerate(clients)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - started
    result: dict[str, Any] = {"seconds": round(took, 1), "writers": writers, "searchers": searchers}
    for kind in ("write", "search"):
        result[kind] = summary([c for c in clients if c.kind == kind], took)
    result["cleanup_errors"] = clean_up(ctx, [w for c in clients for w in c.written])
    return result


def summary(clients: list[Client], seconds: float) -> dict[str, Any]:
    latencies = [ms for c in clients for ms in c.latencies]
    errors: Counter[str] = Counter()
    for c in clients:
        errors.update(c.errors)
    return {
        "requests": len(latencies) + sum(errors.values()),
        "succeeded": len(latencies),
        "per_second": round(len(latencies) / seconds, 1) if seconds else 0.0,
        "p50_ms": round(float(np.median(latencies)), 2) if latencies else None,
        "p99_ms": round(float(np.percentile(latencies, 99)), 2) if latencies else None,
        "errors": dict(errors),
    }


def clean_up(ctx: Context, written: list[tuple[str, str]]) -> dict[str, int]:
    """Delete the documents the writers wrote; failures by kind."""
    writer = document_service(ctx.service, ctx.embedder)
    errors: Counter[str] = Counter()
    for store, document_id in written:
        attempt(partial(writer.delete_source, store, document_id), errors)
    return dict(errors)
