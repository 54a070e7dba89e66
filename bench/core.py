"""Benchmarks of the retrieval core. Run with `make bench`.

1. Query-embedding latency of the local model, p50.
2. Retrieve time excluding embedding, against the bare SQL the service issues, in one run.
3. Ingest of msmarco-5k (5,000 passages) with the local model, end to end through the CLI.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from functools import partial

from bench.common import EVAL_DIR, REPO, load_queries, machine, median, percentile, timed_ms

STORE = "msmarco-5k"
CLI = [sys.executable, "-m", "retrieval_core.cli.main"]


class PrecomputedEmbedder:
    """Serves vectors computed beforehand, so retrieve can be timed without the model."""

    def __init__(self, model: str, dimension: int, vectors: dict[str, list[float]]) -> None:
        self.model = model
        self.dimension = dimension
        self._vectors = vectors

    def embed(self, texts, kind):  # type: ignore[no-untyped-def]
        return [self._vectors[t] for t in texts]


def ingest(fresh: bool) -> float | None:
    """Seconds to ingest the corpus through `retrieval ingest` (None when already present and not fresh)."""
    from retrieval_core.container import get_service
    from retrieval_core.exceptions import StoreNotFoundError

    service = get_service()
    try:
        service.get_store(STORE)
        exists = True
    except StoreNotFoundError:
        exists = False
    if exists and not fresh:
        return None
    if exists:
        subprocess.run(
            [sys.executable, "-m", "retrieval_core.cli.main", "drop-store", "--store", STORE], check=True
        )
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "retrieval_core.cli.main",
            "ingest",
            str(EVAL_DIR / "corpus.jsonl"),
            "--store",
            STORE,
        ],
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--fresh-ingest", action="store_true", help="drop and re-ingest the corpus, timing it"
    )
    parser.add_argument("--repeat", type=int, default=5, help="passes over the 50 queries")
    args = parser.parse_args()

    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.container import get_service
    from retrieval_core.db import search_sql
    from retrieval_core.filters.predicate import TRUE
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest

    ingest_s = ingest(args.fresh_ingest)
    service = get_service()
    queries = list(load_queries().values())

    # 1. query embedding latency (one query per call, as a request does)
    service.embedder.embed(["warm up"], "query")
    embed_ms = [t for q in queries for t in timed_ms(partial(service.embedder.embed, [q], "query"), 1)]

    # 2. retrieve without embedding vs the raw SQL, interleaved so both see the same machine state
    vectors = dict(zip(queries, service.embedder.embed(queries, "query"), strict=True))
    store = service.get_store(STORE)
    offline = RetrievalService(
        service.database,
        PrecomputedEmbedder(service.embedder.model, service.embedder.dimension, vectors),
        default_store=STORE,
        ef_search=service.ef_search,
    )
    requests = [RetrieveRequest(query=q, grade=0.0, similarity_top_k=10, store=STORE) for q in queries]
    query_sql = search_sql.nearest_chunks_query(store, TRUE)

    def raw(vector: list[float]) -> None:
        with service.database.connection() as conn, conn.transaction():
            search_sql.set_search_options(conn, service.index_knobs)
            conn.execute(query_sql, search_sql.search_params(store, vector, 10, TRUE)).fetchall()

    service_ms: list[float] = []
    raw_ms: list[float] = []
    for repeat in range(args.repeat):
        for index, request in enumerate(requests):
            # Alternate which goes first: the second run of a query finds its index pages warmer.
            pair = [
                (service_ms, lambda r=request: offline.retrieve(r, grant=OPEN_GRANT)),
                (raw_ms, lambda v=vectors[request.query]: raw(v)),
            ]
            for samples, call in pair if (repeat + index) % 2 == 0 else reversed(pair):
                samples += timed_ms(call, 1)

    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(f"command: make bench{' ARGS=--fresh-ingest' if args.fresh_ingest else ''}")
    print()
    print("| measure | p50 | p99 | n |")
    print("|---|---|---|---|")
    for label, samples, digits in (
        ("local query embedding (ms)", embed_ms, 2),
        ("retrieve without embedding, top-10 (ms)", service_ms, 3),
        ("raw SQL, same query (ms)", raw_ms, 3),
    ):
        p50, p99 = median(samples), percentile(samples, 99)
        print(f"| {label} | {p50:.{digits}f} | {p99:.{digits}f} | {len(samples)} |")
    print()
    print(f"service / raw SQL (median): {median(service_ms) / median(raw_ms):.2f}x")
    if ingest_s is not None:
        print(f"ingest of {STORE} (5,000 passages, end to end incl. model load): {ingest_s:.1f} s")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
