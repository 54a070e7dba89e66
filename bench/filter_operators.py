"""Filter operators at 1% selectivity. Run with `python -m bench.filter_operators`.

bench/scale.py's synthetic chunks (384 dimensions, clustered) in a store of their own on an embedded
PostgreSQL of their own (data under `.data/bench-filter-operators`, remade each run). Tenant `t01`
holds 1% of the chunks; every filter below selects exactly its chunks, each with another operator.
Each is searched through `RetrievalService.similarity_search` (uncached): as configured (the exact
path for 1% when an index finds the filter's chunks, else the HNSW index), and with the exact path
off (the HNSW index with iterative scans, or whatever plan PostgreSQL prefers). Prints one markdown
table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from bench.common import REPO, machine, median, percentile
from bench.scale import Data, K, chunk_id, embedded_server, exact_top_k, generate, load_store

STORE = "filter-operators"
# (operator, filter): each selects exactly tenant t01.
FILTERS: list[tuple[str, str | dict[str, Any]]] = [
    ("equalities object", {"tenant": "t01"}),
    ("in", "tenant IN ('t01')"),
    ("listContains", "tags HAS 't01'"),
    ("notIn", "tenant NOT IN ('rest', 't10', 't50')"),
    ("startsWith", "title STARTS WITH 'T01 '"),
    ("stringContains", "title CONTAINS 'T01'"),
    ("equalsIgnoreCase", "lower(tenant) = 'T01'"),
    ("exists", "EXISTS(marker)"),
    ("andAll: equals + startsWith", "tenant = 't01' AND title STARTS WITH 'T01 '"),
]


def operator_metadata(data: Data, row: int) -> dict[str, Any]:
    """A chunk's tenant, as a value, in a list and in a title of its own; `marker` on tenant t01 only."""
    tenant = str(data.tenants[row])
    marker = {"marker": 1} if tenant == "t01" else {}
    return {"tenant": tenant, "tags": [tenant, "all"], "title": f"{tenant.upper()} chunk {row}", **marker}


def service(database: Any, exact_search_max_rows: int) -> Any:
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.settings import get_settings

    settings = get_settings()
    return RetrievalService(
        database,
        embedder=None,  # type: ignore[arg-type]  # similarity_search never embeds
        default_store=STORE,
        ef_search=settings.hnsw_ef_search,
        cache=None,
        iterative_scan=settings.hnsw_iterative_scan,
        max_scan_tuples=settings.hnsw_max_scan_tuples,
        exact_search_max_rows=exact_search_max_rows,
    )


def run(
    searcher: Any, data: Data, metadata_filter: str | dict[str, Any]
) -> tuple[float, float, float, float]:
    """recall@10, share of answers with the full k, p50 and p95 ms over the queries (after a warm-up)."""
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.similarity_search import SimilaritySearchRequest

    def search(query: np.ndarray) -> list[str]:
        request = SimilaritySearchRequest(
            query_embedding=query.tolist(), top_k=K, store=STORE, metadata_filter=metadata_filter
        )
        response, _ = searcher.similarity_search(request, grant=OPEN_GRANT)
        return [r.id for r in response.results]

    for query in data.queries[:10]:  # warm-up: pages in memory, the filter's size counted
        search(query)
    truth = exact_top_k(data, {"tenant": "t01"})
    samples, recalls, full = [], [], 0
    for query, expected in zip(data.queries, truth, strict=True):
        start = time.perf_counter()
        found = search(query)
        samples.append((time.perf_counter() - start) * 1000)
        recalls.append(len({chunk_id(r) for r in expected} & set(found)) / K)
        full += len(found) == K
    return float(np.mean(recalls)), full / len(samples), median(samples), percentile(samples, 95)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    from retrieval_core.db.connection import PooledConnections
    from retrieval_core.settings import get_settings

    data_dir = REPO / ".data" / "bench-filter-operators"
    data_dir.mkdir(parents=True, exist_ok=True)
    data = generate(args.rows, args.queries)
    with embedded_server(data_dir, shared_buffers_mb=max(512, args.rows * 8 // 1024)) as conninfo:
        load_store(conninfo, STORE, "vector", data, operator_metadata)
        database = PooledConnections(conninfo, 1, 2, 5, get_settings().db_statement_timeout_ms)
        configured = service(database, get_settings().exact_search_max_rows)
        hnsw = service(database, 0)
        lines = [
            f"{args.rows:,} chunks, 1% selected ({args.rows // 100:,}), top-{K}, {args.queries} queries. "
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}; "
            f"load: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}; "
            f"command: `python -m bench.filter_operators --rows {args.rows} --queries {args.queries}`.",
            "",
            "| filter | expression | as configured: p50 / p95 ms, full k, recall@10 "
            "| exact path off: p50 / p95 ms, full k, recall@10 |",
            "|---|---|---|---|",
        ]
        for name, metadata_filter in FILTERS:
            shown = metadata_filter if isinstance(metadata_filter, str) else json.dumps(metadata_filter)
            cells = [name, f"`{shown}`"]
            for searcher in (configured, hnsw):
                recall, full, p50, p95 = run(searcher, data, metadata_filter)
                cells.append(f"{p50:.1f} / {p95:.1f}, {full:.0%}, {recall:.3f}")
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
        database.close()
    print("\n".join(lines))
    print(f"cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
