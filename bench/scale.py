"""Filtered ANN at scale. Run with `make bench-scale`.

A synthetic store of 200,000 chunks x 384 dims on its own embedded PostgreSQL (data under
`.data/bench-scale`, kept for `--reuse`), searched through `RetrievalService.similarity_search`
(uncached) and through the bare SQL the service issues, for unfiltered queries and filters of
1%, 10% and 50% selectivity. Then the same data in a halfvec store, and an ef_search sweep.

The data: 200 clusters ("topics"); each chunk is its cluster's centre plus a displacement in a
16-dimensional subspace of its own cluster, plus a little isotropic noise in all 384 dimensions.
Text embeddings behave like this: their variance concentrates in few directions, so near
neighbours are meaningfully nearer than the rest. Isotropic noise in 384 dimensions makes every
chunk of a cluster almost equally far from a query, a case where no ANN index is accurate and
which does not resemble real embeddings. The parameters below were fixed before any
measurement and are not tuned to reach a target. Tenants are assigned at random, independently
of the clusters (exactly 2,000 / 20,000 / 100,000 chunks).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bench.common import REPO, machine, median, percentile

DIM = 384
CLUSTERS = 200
SUBSPACE = 16
SUBSPACE_SCALE = 0.5  # norm of the within-cluster displacement, relative to the unit centre
NOISE_SCALE = 0.15  # norm of the isotropic noise
CHUNKS_PER_DOCUMENT = 10
K = 10
TENANTS = {"t01": 0.01, "t10": 0.10, "t50": 0.50}  # the rest is "rest"
Metadata = dict[str, Any] | None
SELECTIVITIES: list[tuple[str, Metadata]] = [
    ("none", None),
    ("1%", {"tenant": "t01"}),
    ("10%", {"tenant": "t10"}),
    ("50%", {"tenant": "t50"}),
]
# The selectivity sweep (percent of the store): each point is a random subset of its own, drawn
# independently of the tenants and of the other points, marked by a metadata key of its own.
SWEEP = (0.5, 1, 2, 2.4, 2.5, 2.6, 3, 4, 6, 8, 10, 20, 50)


def sweep_key(percent: float) -> str:
    """The metadata key marking the chunks of one sweep point (value 1): "s2_5" for 2.5%."""
    return "s" + f"{percent:g}".replace(".", "_")


DEFAULT_ROWS = 200_000


def docs_markers(rows: int) -> tuple[str, str]:
    """The comments around this size's results block in docs/benchmarks.md."""
    name = "bench-scale" if rows == DEFAULT_ROWS else f"bench-scale-{rows}"
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


@dataclass
class Data:
    vectors: np.ndarray  # float32, unit rows
    tenants: np.ndarray  # str
    queries: np.ndarray  # float32, unit rows
    sweep: np.ndarray  # bool, (len(SWEEP), rows): whether a chunk belongs to each sweep point


def generate(rows: int, queries: int, seed: int = 20261122) -> Data:
    """Clusters, each with its own low-dimensional subspace, plus isotropic noise; see the docstring."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLUSTERS, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    bases = [np.linalg.qr(rng.normal(size=(DIM, SUBSPACE)))[0].astype(np.float32) for _ in range(CLUSTERS)]

    def sample(n: int) -> np.ndarray:
        cluster = rng.integers(0, CLUSTERS, n)
        out = np.empty((n, DIM), np.float32)
        for c in tqdm(range(CLUSTERS), desc="generating", leave=False):
            members = np.flatnonzero(cluster == c)
            z = rng.normal(scale=SUBSPACE_SCALE / np.sqrt(SUBSPACE), size=(len(members), SUBSPACE))
            noise = rng.normal(scale=NOISE_SCALE / np.sqrt(DIM), size=(len(members), DIM))
            out[members] = centres[c] + (z @ bases[c].T) + noise
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    vectors = sample(rows)
    tenants = np.full(rows, "rest", dtype=object)
    order = rng.permutation(rows)
    start = 0
    for name, share in TENANTS.items():
        count = int(rows * share)
        tenants[order[start : start + count]] = name
        start += count
    queried = sample(queries)
    sweep = np.zeros((len(SWEEP), rows), dtype=bool)
    for i, percent in enumerate(SWEEP):
        sweep[i, rng.choice(rows, round(rows * percent / 100), replace=False)] = True
    return Data(vectors, tenants.astype(str), queried, sweep)


def row_metadata(data: Data, row: int) -> dict[str, Any]:
    """A chunk's metadata: its tenant, and a key for each sweep point it belongs to."""
    metadata: dict[str, Any] = {"tenant": str(data.tenants[row])}
    for i, percent in enumerate(SWEEP):
        if data.sweep[i, row]:
            metadata[sweep_key(percent)] = 1
    return metadata


def matching(data: Data, metadata: Metadata) -> np.ndarray:
    """Row numbers of the chunks a metadata filter matches."""
    if metadata is None:
        return np.arange(len(data.vectors))
    mask = np.ones(len(data.vectors), dtype=bool)
    for key, value in metadata.items():
        if key == "tenant":
            mask &= data.tenants == value
        else:
            mask &= data.sweep[[sweep_key(p) for p in SWEEP].index(key)] == bool(value)
    return np.flatnonzero(mask)


def exact_top_k(data: Data, metadata: Metadata) -> list[list[int]]:
    """Row numbers of the exact top-k (cosine) of each query, within the rows the filter matches."""
    rows = matching(data, metadata)
    sims = data.queries @ data.vectors[rows].T
    top = np.argpartition(-sims, K, axis=1)[:, :K]
    ordered = np.take_along_axis(top, np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1), axis=1)
    return [[int(rows[i]) for i in line] for line in ordered]


def chunk_id(row: int) -> str:
    return f"d{row // CHUNKS_PER_DOCUMENT:06d}#{row % CHUNKS_PER_DOCUMENT}"


def load_store(
    conninfo: str,
    name: str,
    storage: str,
    data: Data,
    metadata: Callable[[Data, int], dict[str, Any]] = row_metadata,
) -> dict[str, float]:
    """Create the store, COPY the rows in (binary), then build its HNSW index; seconds of each step.
    `metadata` gives each row's metadata."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from retrieval_core.db.stores import (
        create_index_statement,
        create_store,
        drop_store,
        find_store,
    )

    timings: dict[str, float] = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        existing = find_store(conn, name)
        if existing is not None:
            drop_store(conn, existing)
        store = create_store(conn, name, name, "synthetic", DIM, storage)  # type: ignore[arg-type]
        # Built after the load (as the store index maintenance does): much faster than inserting row by row.
        start = time.perf_counter()
        rows = len(data.vectors)
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy(
                "COPY documents (store_id, id, source, title, metadata, content_sha256, chunk_count)"
                " FROM STDIN"
            ) as copy:
                for d in range(0, rows, CHUNKS_PER_DOCUMENT):
                    doc = f"d{d // CHUNKS_PER_DOCUMENT:06d}"
                    copy.write_row((store.id, doc, doc, doc, "{}", "-", min(CHUNKS_PER_DOCUMENT, rows - d)))
            with cur.copy(
                "COPY chunks (store_id, document_id, chunk_index, content, metadata, embedding)"
                " FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["int4", "text", "int4", "text", "jsonb", "vector"])
                for row in tqdm(range(rows), desc=f"COPY {name}", unit="chunk", unit_scale=True):
                    doc, index = divmod(row, CHUNKS_PER_DOCUMENT)
                    copy.write_row(
                        (
                            store.id,
                            f"d{doc:06d}",
                            index,
                            f"synthetic chunk {row}",
                            Jsonb(metadata(data, row)),
                            data.vectors[row],
                        )
                    )
        timings["copy_s"] = time.perf_counter() - start
        # Its own settings: no statement timeout, enough memory to build the graph in memory, one
        # parallel worker (the machine has 2 cores).
        conn.execute("SET statement_timeout = 0")
        # About 3 KB a row keeps the graph of a million 384-dimension rows in memory while it is built.
        conn.execute(f"SET maintenance_work_mem = '{max(1024, rows * 3 // 1024)}MB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        start = time.perf_counter()
        print(f"building the HNSW index of {name} ({storage}) ...", flush=True)
        conn.execute(create_index_statement(store))
        timings["index_s"] = time.perf_counter() - start
        conn.execute("VACUUM ANALYZE chunks")
        conn.execute("VACUUM ANALYZE documents")
    return timings


def index_size_mb(conninfo: str, name: str) -> float:
    import psycopg

    from retrieval_core.db.stores import find_store, index_name

    with psycopg.connect(conninfo, autocommit=True) as conn:
        store = find_store(conn, name)
        assert store is not None
        row = conn.execute("SELECT pg_relation_size(%s::regclass)", (index_name(store.id),)).fetchone()
    assert row is not None
    return int(row[0]) / 2**20


@dataclass
class Result:
    label: str
    recall: float
    full_k: float
    service_ms: list[float]
    raw_ms: list[float]
    exact_share: float | None = None

    def overhead(self) -> float:
        """service / raw SQL at p50, each compared in the same position of its pair.

        The query that runs second finds its pages warmer (on this machine 1.6 against 2.2 ms, 50,000
        chunks), so the service (first on even queries) is compared with the raw SQL when each went
        first, then when each went second, and the two ratios are averaged (geometric mean). The p50
        columns are over all queries.
        """
        first = median(self.service_ms[0::2]) / median(self.raw_ms[1::2])
        second = median(self.service_ms[1::2]) / median(self.raw_ms[0::2])
        return float(np.sqrt(first * second))


class Bench:
    """Runs the queries of one configuration through the service and through the bare SQL."""

    def __init__(self, database: Any, data: Data, exact_search_max_rows: int, knobs: Any) -> None:
        from retrieval_core.backends.pgvector.service import RetrievalService
        from retrieval_core.search.plan import FilterSizes

        self.database = database
        self.data = data
        self.exact_search_max_rows = exact_search_max_rows
        self.knobs = knobs
        # Its own: the raw path counts a filter's chunks itself, as the service does, once a minute.
        self.raw_sizes = FilterSizes()
        self.service = RetrievalService(
            database,
            embedder=None,  # type: ignore[arg-type]  # similarity_search never embeds
            default_store="",
            ef_search=knobs.ef_search,
            cache=None,
            iterative_scan=knobs.iterative_scan,
            max_scan_tuples=knobs.max_scan_tuples,
            exact_search_max_rows=exact_search_max_rows,
        )

    def service_search(self, store: str, query: np.ndarray, metadata: Metadata, ef: int | None) -> list[str]:
        from retrieval_core.grants import OPEN_GRANT
        from retrieval_core.schemas.search_options import SearchKnobs
        from retrieval_core.schemas.similarity_search import SimilaritySearchRequest

        request = SimilaritySearchRequest(
            query_embedding=query.tolist(),
            top_k=K,
            store=store,
            metadata_filter=metadata,
            search=SearchKnobs(ef_search=ef) if ef else None,
        )
        response, _ = self.service.similarity_search(request, grant=OPEN_GRANT)
        return [r.id for r in response.results]

    def raw_search(self, store_name: str, query: np.ndarray, metadata: Metadata) -> tuple[list[str], bool]:
        """The statements the service issues, through psycopg: the store with the search options, the
        capped count of a filter's chunks (once per filter, as the service remembers it), top-k."""
        from retrieval_core.db import chunk_filters, search_sql
        from retrieval_core.filters.predicate import TRUE
        from retrieval_core.filters.sql import metadata_equals
        from retrieval_core.search.plan import exact_scan_limit

        where = metadata_equals(metadata) if metadata else TRUE
        with self.database.connection() as conn, conn.transaction():
            store = search_sql.find_store_for_search(conn, store_name, self.knobs)
            assert store is not None
            exact = False
            most = exact_scan_limit(store.chunk_count, K, self.exact_search_max_rows)
            if where.sql and most > 0:
                exact = store.chunk_count <= most or self.raw_sizes.at_most(
                    (store.id, where.sql, json.dumps(where.params, sort_keys=True)),
                    most,
                    lambda up_to: search_sql.count_matching(conn, store, where, up_to),
                )
            if exact:
                chunk_filters.allow_bitmap_scans(conn)
            rows = conn.execute(
                search_sql.nearest_chunks_query(store, where, exact),
                search_sql.search_params(store, query.tolist(), K, where),
            ).fetchall()
        return [f"{r[0]}#{r[1]}" for r in rows], exact

    def run(
        self, label: str, store_name: str, metadata: Metadata, raw: bool = True, ef: int | None = None
    ) -> Result:
        truth = exact_top_k(self.data, metadata)
        # Warm-up pass: the timed passes measure a store whose pages are in shared buffers.
        # Both count a filter's chunks on first sight and remember the answer: not timed here.
        for query in self.data.queries[:50]:
            self.service_search(store_name, query, metadata, ef)
        if raw:
            self.raw_search(store_name, self.data.queries[0], metadata)
        service_ms: list[float] = []
        raw_ms: list[float] = []
        recalls: list[float] = []
        full = 0
        exact_count = 0
        for i, query in enumerate(tqdm(self.data.queries, desc=label, leave=False)):
            calls: list[Callable[[], None]] = []
            found: list[str] = []

            def by_service(query: np.ndarray = query, found: list[str] = found) -> None:
                start = time.perf_counter()
                found.extend(self.service_search(store_name, query, metadata, ef))
                service_ms.append((time.perf_counter() - start) * 1000)

            def by_sql(query: np.ndarray = query) -> None:
                nonlocal exact_count
                start = time.perf_counter()
                _, exact = self.raw_search(store_name, query, metadata)
                raw_ms.append((time.perf_counter() - start) * 1000)
                exact_count += exact

            calls = [by_service, by_sql] if raw else [by_service]
            # Alternate which goes first: the second run of a query finds its pages warmer.
            for call in calls if i % 2 == 0 else reversed(calls):
                call()
            expected = {chunk_id(r) for r in truth[i]}
            recalls.append(len(expected & set(found)) / K)
            full += len(found) == K
        n = len(self.data.queries)
        return Result(
            label, float(np.mean(recalls)), full / n, service_ms, raw_ms, exact_count / n if raw else None
        )


def sweep_table(bench: Bench, store_name: str) -> list[str]:
    """The selectivity sweep: one row per point, with the ratio of each p50 to the previous point's."""
    lines = [
        "| selectivity | matching chunks | recall@10 | full k | exact path | service p50 (ms) "
        "| service p99 (ms) | p50 / previous point's | raw SQL p50 (ms) | service / raw (p50, same position) "
        "| first search: count (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    previous: float | None = None
    for percent in SWEEP:
        metadata = {sweep_key(percent): 1}
        result = bench.run(f"{percent:g}%", store_name, metadata)
        s50, r50 = median(result.service_ms), median(result.raw_ms)
        step = f"{s50 / previous:.2f}x" if previous else ""
        previous = s50
        lines.append(
            f"| {percent:g}% | {len(matching(bench.data, metadata)):,} | {result.recall:.3f} "
            f"| {result.full_k:.0%} | {result.exact_share:.0%} | {s50:.2f} "
            f"| {percentile(result.service_ms, 99):.2f} | {step} | {r50:.2f} | {result.overhead():.2f}x "
            f"| {count_ms(bench, store_name, metadata):.2f} |"
        )
        print(lines[-1], flush=True)
    return lines


def count_ms(bench: Bench, store_name: str, metadata: dict[str, Any], runs: int = 5) -> float:
    """Median milliseconds of the capped count a filter's first search on a store version makes."""
    from retrieval_core.db import search_sql
    from retrieval_core.filters.sql import metadata_equals
    from retrieval_core.search.plan import exact_scan_limit

    where = metadata_equals(metadata)
    samples = []
    for _ in range(runs):
        with bench.database.connection() as conn, conn.transaction():
            store = search_sql.find_store_for_search(conn, store_name, bench.knobs)
            assert store is not None
            most = exact_scan_limit(store.chunk_count, K, bench.exact_search_max_rows)
            start = time.perf_counter()
            search_sql.count_matching(conn, store, where, most + 1)
            samples.append((time.perf_counter() - start) * 1000)
    return median(samples)


def python_steps(query: np.ndarray) -> dict[str, float]:
    """Microseconds of each step the service takes in Python that the raw SQL path does not."""
    from retrieval_core.backends.pgvector.response_parts import chunk_result
    from retrieval_core.db.search_sql import _scored
    from retrieval_core.filters.sql import document_ids_in, metadata_predicate
    from retrieval_core.schemas.similarity_search import SimilaritySearchRequest, SimilaritySearchResponse
    from retrieval_core.search.ranking import unit_vector

    values = query.tolist()
    row = {
        "document_id": "d000001",
        "chunk_index": 3,
        "content": "synthetic chunk 13",
        "metadata": {"tenant": "t10"},
        "distance": 0.25,
    }
    chunks = [_scored(row) for _ in range(K)]
    results = [chunk_result(c) for c in chunks]
    steps: dict[str, Callable[[], object]] = {
        "request validation (384 floats, a filter)": lambda: SimilaritySearchRequest(
            query_embedding=values, top_k=K, store="s", metadata_filter={"tenant": "t10"}
        ),
        "filter to SQL": lambda: document_ids_in(None) & metadata_predicate({"tenant": "t10"}, None),
        "unit_vector": lambda: unit_vector(values),
        "10 rows to results": lambda: [chunk_result(_scored(row)) for _ in range(K)],
        "response model": lambda: SimilaritySearchResponse(results=results, total_results=K, store="s"),
    }
    timings = {}
    for name, step in steps.items():
        samples = []
        for _ in range(2_000):
            start = time.perf_counter_ns()
            step()
            samples.append((time.perf_counter_ns() - start) / 1000)
        timings[name] = median(samples)
    return timings


def fmt(result: Result) -> str:
    s50, s99 = median(result.service_ms), percentile(result.service_ms, 99)
    cells = [result.label, f"{result.recall:.3f}", f"{s50:.2f}", f"{s99:.2f}", f"{result.full_k:.0%}"]
    if result.raw_ms:
        r50, r99 = median(result.raw_ms), percentile(result.raw_ms, 99)
        exact = f"{result.exact_share:.0%}" if result.exact_share is not None else ""
        cells += [f"{r50:.2f}", f"{r99:.2f}", f"{result.overhead():.2f}x", exact]
    else:
        cells += ["", "", "", ""]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| filter | recall@10 | service p50 (ms) | service p99 (ms) | full k "
    "| raw SQL p50 (ms) | raw SQL p99 (ms) | service / raw (p50, same position) | exact path |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


@contextmanager
def embedded_server(data_dir: Path, shared_buffers_mb: int) -> Iterator[str]:
    from retrieval_core.db.embedded import start_embedded_postgres
    from retrieval_core.db.migrations.runner import migrate

    server = start_embedded_postgres(data_dir, shared_buffers_mb=shared_buffers_mb)
    conninfo = str(server.get_uri())
    migrate(conninfo)
    yield conninfo


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data-dir", type=Path, help="default: .data/bench-scale, or bench-scale-ROWS")
    parser.add_argument("--reuse", action="store_true", help="keep the stores of a previous run if complete")
    parser.add_argument("--shared-buffers-mb", type=int, help="default: 2048, or 8 KiB a row if more")
    parser.add_argument("--no-halfvec", action="store_true")
    parser.add_argument("--ef-sweep", default="40,64,100,200", help="comma-separated ef_search values")
    parser.add_argument(
        "--exact-search-max-rows", type=int, default=None, help="override the setting (for exploring)"
    )
    parser.add_argument("--sweep-only", action="store_true", help="print the selectivity sweep only")
    parser.add_argument(
        "--overhead-only",
        action="store_true",
        help="print service vs raw SQL without a filter and at 1/10/50%% only (no halfvec store)",
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="replace the results block of docs/benchmarks.md"
    )
    args = parser.parse_args()

    from retrieval_core.db.connection import PooledConnections
    from retrieval_core.db.index_knobs import IndexKnobs
    from retrieval_core.search.plan import exact_scan_limit
    from retrieval_core.settings import get_settings

    settings = get_settings()
    name = "bench-scale" if args.rows == DEFAULT_ROWS else f"bench-scale-{args.rows}"
    data_dir: Path = args.data_dir or REPO / ".data" / name
    shared_buffers_mb: int = args.shared_buffers_mb or max(2048, args.rows * 8 // 1024)
    docs_start, docs_end = docs_markers(args.rows)
    data_dir.mkdir(parents=True, exist_ok=True)
    stores = {"vector": f"scale-{args.rows}", "halfvec": f"scale-{args.rows}-halfvec"}
    if args.no_halfvec or args.overhead_only:
        del stores["halfvec"]
    cached = data_dir / f"data-v2-{args.rows}-{args.queries}.npz"
    lines: list[str] = []
    with embedded_server(data_dir, shared_buffers_mb) as conninfo:
        load_report: dict[str, dict[str, float]] = {}
        start = time.perf_counter()
        if args.reuse and cached.exists():
            npz = np.load(cached)
            data = Data(npz["vectors"], npz["tenants"], npz["queries"], npz["sweep"])
        else:
            data = generate(args.rows, args.queries)
            np.savez(
                cached, vectors=data.vectors, tenants=data.tenants, queries=data.queries, sweep=data.sweep
            )
        generate_s = time.perf_counter() - start
        state_file = data_dir / "stores.json"
        loaded = json.loads(state_file.read_text()) if args.reuse and state_file.exists() else {}
        for storage, name in stores.items():
            if loaded.get(name) == args.rows:
                continue
            load_report[name] = load_store(conninfo, name, storage, data)
            print(f"loaded {name}: " + ", ".join(f"{k} {v:.0f}" for k, v in load_report[name].items()))
            loaded[name] = args.rows
            state_file.write_text(json.dumps(loaded))
        database = PooledConnections(conninfo, 1, 2, 5, settings.db_statement_timeout_ms)
        with database.connection() as conn:
            shared_buffers = conn.execute("SHOW shared_buffers").fetchone()
            pgvector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        base = IndexKnobs(
            settings.hnsw_ef_search, settings.hnsw_iterative_scan, settings.hnsw_max_scan_tuples
        )
        exact_max = settings.exact_search_max_rows
        if args.exact_search_max_rows is not None:
            exact_max = args.exact_search_max_rows
        bench = Bench(database, data, exact_max, base)

        vector_store = stores["vector"]
        if args.overhead_only:
            print(f"{args.rows:,} chunks: service vs the raw SQL it issues, {len(data.queries)} queries each")
            print(HEADER)
            for label, metadata in SELECTIVITIES:
                print(fmt(bench.run(label, vector_store, metadata)), flush=True)
            print("\nWhat the service adds in Python, per request (median of 2,000 calls):")
            for step, micros in python_steps(data.queries[0]).items():
                print(f"- {step}: {micros:.1f} µs")
            database.close()
            return
        sweep_lines = sweep_table(bench, vector_store)
        if args.sweep_only:
            print("\n".join(sweep_lines))
            database.close()
            return
        results = [bench.run(label, vector_store, metadata) for label, metadata in SELECTIVITIES]
        index_only = Bench(database, data, 0, base).run(
            "1%, index only (exact path off)", vector_store, {"tenant": "t01"}
        )

        lines += [
            docs_start,
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}; PostgreSQL 18 (embedded),",
            f"pgvector {pgvector[0] if pgvector else '?'}, "
            f"shared_buffers {shared_buffers[0] if shared_buffers else '?'}.",
            f"Command: `make bench-scale{'' if args.rows == DEFAULT_ROWS else f' ROWS={args.rows}'}`"
            f" (`python -m bench.scale --reuse --write-docs --rows {args.rows}`). "
            f"{args.rows:,} chunks x {DIM} dims, {len(data.queries)} queries per row, top-{K};"
            f" ef_search {base.ef_search},"
            f" iterative scan {base.iterative_scan}, max_scan_tuples {base.max_scan_tuples:,},"
            f" exact path at <= {exact_scan_limit(args.rows, K, exact_max):,} matching chunks"
            f" (sqrt(4·k·N), capped at {exact_max:,}).",
            "",
            "### Selectivity sweep (vector store)",
            "",
            "Each point is a random subset of the store of its own. A filter's first search also counts"
            " its chunks, up to the limit, and the count is kept for a minute: the last column is what"
            " that count costs.",
            "",
            *sweep_lines,
            "",
            "### vector (4-byte floats)",
            "",
            HEADER,
            *[fmt(r) for r in results],
            fmt(index_only),
            "",
        ]
        if "halfvec" in stores:
            half = [
                bench.run(label, stores["halfvec"], metadata, raw=False) for label, metadata in SELECTIVITIES
            ]
            lines += [
                "### halfvec (2-byte floats), same data and queries (recall against float32 exact search)",
                "",
                HEADER,
                *[fmt(r) for r in half],
                "",
            ]
        sizes = {name: index_size_mb(conninfo, name) for name in stores.values()}
        lines += ["| store | HNSW index size (MB) |", "|---|---|"]
        lines += [f"| {name} | {size:.0f} |" for name, size in sizes.items()]
        lines.append("")
        sweep = [int(v) for v in args.ef_sweep.split(",") if v]
        if sweep:
            lines += [
                "### ef_search sweep (per-request override `search.efSearch`), service only, vector store",
                "",
                "| ef_search | "
                + " | ".join(f"{label} recall / p50 ms" for label, _ in SELECTIVITIES)
                + " |",
                "|---" * (len(SELECTIVITIES) + 1) + "|",
            ]
            for ef in sweep:
                cells = []
                for label, metadata in SELECTIVITIES:
                    r = bench.run(f"ef {ef} {label}", vector_store, metadata, raw=False, ef=ef)
                    cells.append(f"{r.recall:.3f} / {median(r.service_ms):.2f}")
                lines.append(f"| {ef} | " + " | ".join(cells) + " |")
            lines.append("")
        if load_report:
            lines.append(
                f"Load (this run): generation {generate_s:.0f} s; "
                + "; ".join(
                    f"{name}: COPY {t['copy_s']:.0f} s, HNSW build {t['index_s']:.0f} s"
                    for name, t in load_report.items()
                )
                + "."
            )
            lines.append("")
        lines.append(docs_end)
        database.close()
    report = "\n".join(lines)
    print(report)
    if args.write_docs:
        write_docs(report, docs_start, docs_end)


def write_docs(block: str, start: str, end: str) -> None:
    """Replace the marked block of docs/benchmarks.md (appended if absent)."""
    path = REPO / "docs" / "benchmarks.md"
    text = path.read_text()
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = before + block + after
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


if __name__ == "__main__":
    os.chdir(REPO)
    main()
