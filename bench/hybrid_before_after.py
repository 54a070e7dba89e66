"""Hybrid against dense latency with the keyword search of migration 9 (before) and of migration 11 (after).

    python -m bench.hybrid_before_after [--rounds 3] [--queries 100] [--top-k 20] [--stores ...]

On the stores `make eval-all` loads (or those named), each round installs migration 9's keyword search
function of the store, times `bench.hybrid_latency.time_store` (dense and each hybrid fusion
interleaved query by query, a warm-up pass, then one timed pass), then does the same with migration
11's function. Rounds alternate, so both meet the same load; the table gives each method's median
over the rounds of its p50 and its ratio to dense's. The store is left with the current function.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bench.common import machine, median
from bench.eval import VECTORS
from bench.hybrid_latency import EVAL, METHODS, time_store

BEFORE = "create_keyword_search_migration_9"


def install_migration_9(conn: Any) -> None:
    """Define BEFORE: migration 9's generator of a store's search function, under its own name."""
    from retrieval_core.db.migrations.steps import MIGRATIONS

    ddl = dict((version, text) for version, _, text in MIGRATIONS)[9]
    ddl = ddl.replace("CREATE FUNCTION create_keyword_search(", f"CREATE OR REPLACE FUNCTION {BEFORE}(")
    ddl = ddl.replace("SELECT create_keyword_search(id) FROM stores;", "")
    conn.execute(ddl.encode())


def timed_rounds(
    service: Any, store: Any, texts: Sequence[str], vectors: Any, top_k: int, rounds: int
) -> dict[str, Any]:
    """p50 per variant and method, per round."""
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for _ in range(rounds):
        for variant, generator in (("before", BEFORE), ("after", "create_keyword_search")):
            with service.database.connection() as conn:
                conn.execute(f"SELECT {generator}(%s)", (store.id,))
            for method, p50 in time_store(service, store.name, texts, vectors, top_k, passes=2).items():
                results[variant].setdefault(method, []).append(p50)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100, help="queries per store (default 100)")
    parser.add_argument("--top-k", type=int, default=20, help="similarityTopK (default 20)")
    parser.add_argument(
        "--stores", help="stores and their query sets, store=set,... (default: the eval stores)"
    )
    args = parser.parse_args()

    from bench.vector_cache import CachedEmbedder
    from retrieval_core.container import get_service
    from retrieval_core.evaluation import beir

    service = get_service()
    embedder = CachedEmbedder(service.embedder, VECTORS)
    sets = sorted(p.name for p in EVAL.iterdir() if (p / "queries.jsonl").exists())
    pairs = (
        [pair.split("=") for pair in args.stores.split(",")]
        if args.stores
        else [[f"eval-{s}", s] for s in sets]
    )
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}; load {os.getloadavg()}")
    with service.database.connection() as conn:
        install_migration_9(conn)
    try:
        for store_name, set_name in pairs:
            texts = list(beir.read_queries(EVAL / set_name / "queries.jsonl").values())[: args.queries]
            vectors = embedder.embed(texts, "query")
            store = service.get_store(store_name)
            results = timed_rounds(service, store, texts, vectors, args.top_k, args.rounds)
            print(f"\n{store_name}: similarityTopK {args.top_k}, {len(texts)} queries, {args.rounds} rounds")
            print("| method | before (migration 9) | after (migration 11) |\n|---|---|---|")
            for method in METHODS:
                cells = []
                for variant in ("before", "after"):
                    p50 = median(results[variant][method])
                    ratios = [
                        m / d
                        for m, d in zip(results[variant][method], results[variant]["dense"], strict=True)
                    ]
                    cells.append(f"{p50:.2f} ms ({min(ratios):.2f}-{max(ratios):.2f}x)")
                print(f"| {method} | " + " | ".join(cells) + " |")
    finally:
        with service.database.connection() as conn:
            conn.execute(f"DROP FUNCTION IF EXISTS {BEFORE}(integer)")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
