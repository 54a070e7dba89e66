"""Hybrid against dense latency at the API's depths, on the stores `make eval-all` loads.

Run `make eval-all` first: it loads every set under ../shared/eval into store `eval-<set>` of the
embedded PostgreSQL under .data, and caches the query vectors under .data/vectors. Then

    python -m bench.hybrid_latency [--top-k 20] [--queries 100] [--passes 3]

times `RetrievalService.retrieve` (naive engine, `similarityTopK` candidates, no cache, the query's
vector precomputed so that embedding is not timed) for dense search and each hybrid fusion, the
methods interleaved query by query so that each meets the same load. The first pass warms the pages
and is not counted; the table gives the median of the others and its ratio to dense.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from bench.common import REPO, machine, median
from bench.eval import VECTORS

EVAL = REPO.parent / "shared" / "eval"
HYBRID: dict[str, Any] = {"engineName": "naive", "useHybrid": True}
METHODS: dict[str, dict[str, Any]] = {
    "dense": {"engineName": "naive"},
    "hybrid RRF (k=60)": {**HYBRID, "fusion": "rrf"},
    "hybrid weighted, max-scaled 0.7 / 0.3 (the default)": {
        **HYBRID,
        "fusion": "weighted",
        "normalization": "max",
        "vectorWeight": 0.7,
        "keywordWeight": 0.3,
    },
}


def time_set(name: str, top_k: int, count: int, passes: int) -> dict[str, float]:
    """Median milliseconds per method over `count` queries of set `name`, after one warm-up pass."""
    from bench.vector_cache import CachedEmbedder
    from retrieval_core.container import get_service
    from retrieval_core.evaluation import beir

    service = get_service()
    embedder = CachedEmbedder(service.embedder, VECTORS)
    texts = list(beir.read_queries(EVAL / name / "queries.jsonl").values())[:count]
    return time_store(service, f"eval-{name}", texts, embedder.embed(texts, "query"), top_k, passes)


def time_store(
    service: Any,
    store: str,
    texts: Sequence[str],
    vectors: Sequence[Sequence[float]],
    top_k: int,
    passes: int,
) -> dict[str, float]:
    """Median milliseconds per method of `RetrievalService.retrieve` on `store`, the methods interleaved
    query by query; the first pass warms the pages and is not counted."""
    import time

    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest

    samples: dict[str, list[float]] = {method: [] for method in METHODS}
    for done in range(passes):
        for text, vector in zip(texts, vectors, strict=True):
            for method, options in METHODS.items():
                request = RetrieveRequest.model_validate(
                    {
                        **options,
                        "similarityTopK": top_k,
                        "query": text,
                        "grade": 0.0,
                        "store": store,
                        "cacheTTLms": 0,
                    }
                )
                start = time.perf_counter()
                service.retrieve(request, lambda _query, v=vector: v, grant=OPEN_GRANT)
                if done:
                    samples[method].append((time.perf_counter() - start) * 1000)
    return {method: median(values) for method, values in samples.items()}


def table(results: dict[str, dict[str, float]], sets: Sequence[str]) -> str:
    """One row per method, one column per set: p50 ms and the ratio to dense."""
    lines = ["| method | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    for method in METHODS:
        cells = []
        for name in sets:
            p50, dense = results[name][method], results[name]["dense"]
            cells.append(f"{p50:.2f} ms ({p50 / dense:.2f}x)")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top-k", type=int, default=20, help="similarityTopK (default 20)")
    parser.add_argument("--queries", type=int, default=100, help="queries per set (default 100)")
    parser.add_argument("--passes", type=int, default=3, help="passes, the first not counted (default 3)")
    args = parser.parse_args()
    sets = sorted(p.name for p in EVAL.iterdir() if (p / "queries.jsonl").exists())
    results = {name: time_set(name, args.top_k, args.queries, args.passes) for name in sets}
    print(
        f"{machine()}; similarityTopK {args.top_k}, {args.queries} queries per set, "
        f"median of {args.passes - 1} passes"
    )
    print(table(results, sets))


if __name__ == "__main__":
    main()
