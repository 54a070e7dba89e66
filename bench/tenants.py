"""One store per customer: write and retrieve latency, recall and database size at 1, 1,000, 10,000 and
100,000 stores. Run with `make bench-tenants` (`python -m bench.tenants --reuse`).

An embedded PostgreSQL with default settings under `.data/bench-tenants` (kept; `--reuse` goes on from
what it holds) is filled through the production writer with a constant-time embedder (the dev sets'
cached vectors, bench/tenants_data.py): three measured stores, T (3 documents), S (scifact, about 5,000
chunks, its 300 test queries) and L (200,000 chunks made from the three dev sets as bench/keyword_scale.py
makes them), then filler stores of 1 to 5 dev-set documents each, grown 1 → 1,000 → 10,000 → 100,000 and
measured at each count before growing. Every document holds `bucket`: "b01" for 1% of a store's documents,
"b10" for 10%, which the filtered retrieves select.

The baseline is a second database on the same server, the alone database: T, S, L and the first filler
store, their rows copied from the main database once (binary COPY, table by table, row counts checked),
then the store index maintenance and VACUUM ANALYZE on it; kept with `--reuse` and recorded in
state.json.

At each count, both databases are VACUUM (ANALYZE)d (fresh statistics on both: they choose between a
store's HNSW index and an exact scan), then `--rounds` rounds alternate the order of the figures and of
the two databases: each figure on the alone database and on the main one back to back. The figures: for
T, S and L, the write of one small document through the writer and dense, hybrid and filtered (1%, 10%)
retrieves through the one retrieve entry point (`Backends.retrieve`, as POST /api/v1/rag/retrieve takes
it), and the HTTP store creation `PUT /api/v1/stores/{name}` through a `retrieval serve` on each
database. A ratio is main over alone: of the p50s over all rounds, and of each round's p50s. Recall@10 is
against exact search (numpy over the store's vectors in the main database; the alone database holds the
same chunks). Then relations, database size, and at the largest count a concurrency run of 4 writing and
4 searching clients on the main database. Results: printed, and `results-<count>.md` / `.json` in the
data directory. Failed requests are counted and reported, never fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import REPO, machine
from bench.tenants_build import (
    MEASURED,
    State,
    build_measured,
    ensure_alone,
    grow_fillers,
    maintain_indexes,
    settle,
)
from bench.tenants_data import (
    SETS,
    Queries,
    TableEmbedder,
    VectorTable,
    base_chunks,
    build_vectors,
    mixed_queries,
    read_query_texts,
    read_records,
)
from bench.tenants_load import concurrency_run
from bench.tenants_measure import (
    HTTP_PUT,
    SIDES,
    Context,
    Figure,
    K,
    Target,
    database_figures,
    exact_answers,
    filler_names,
    measure_rounds,
)
from bench.tenants_report import eta_json, figure_json, markdown, ratio_json

COUNTS = (1, 1_000, 10_000, 100_000)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", default=",".join(map(str, COUNTS)), help="filler store counts, ascending")
    parser.add_argument("--reuse", action="store_true", help="go on from the data a previous run left")
    parser.add_argument("--data-dir", type=Path, default=REPO / ".data" / "bench-tenants")
    parser.add_argument(
        "--vectors", type=Path, default=REPO / ".data" / "vectors", help="bench/eval.py's cache"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=200, help="small-document writes per store and round")
    parser.add_argument("--put-requests", type=int, default=200, help="HTTP store PUTs per round (0: none)")
    parser.add_argument("--queries", type=int, default=200, help="queries of T and L (S: scifact's 300)")
    parser.add_argument("--concurrency-seconds", type=float, default=120.0, help="0: no concurrency run")
    parser.add_argument("--s-chunks", type=int, default=5_000, help="chunks of S (0: all of scifact)")
    parser.add_argument("--l-chunks", type=int, default=200_000, help="chunks of L")
    parser.add_argument("--writers", type=int, default=1, help="threads writing filler stores")
    return parser.parse_args()


@contextmanager
def database(data_dir: Path, reuse: bool) -> Iterator[str]:
    """The embedded PostgreSQL under `data_dir` with initdb's default settings; stopped on leaving."""
    from retrieval_core.db.embedded import start_embedded_postgres

    if not reuse and (data_dir / "pg").exists():
        print(f"no --reuse: deleting {data_dir}", flush=True)
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    server = start_embedded_postgres(data_dir)
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()


@contextmanager
def http_server(conninfo: str, data_dir: Path, log_name: str) -> Iterator[Any]:
    """`retrieval serve --no-sample` on a free port against the database (its log: `log_name` in the data
    directory); an httpx client to it."""
    import httpx

    from tests.servers import free_port

    port = free_port()
    # Its own store index runs off: the bench runs them between counts, not while it measures.
    env = {
        **os.environ,
        "DATABASE_URL": conninfo,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "STORE_INDEX_INTERVAL_S": "0",
    }
    command = [str(Path(sys.executable).parent / "retrieval"), "serve", "--no-sample", "--port", str(port)]
    with (data_dir / log_name).open("ab") as log:
        server = subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            wait_ready(client, server)
            yield client
    finally:
        server.terminate()
        server.wait(timeout=60)


def wait_ready(client: Any, server: subprocess.Popen[bytes]) -> None:
    import httpx

    for _ in range(1800):
        if server.poll() is not None:
            raise SystemExit("retrieval serve exited before it was ready (see serve.log)")
        try:
            if client.get("/api/v1/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit("retrieval serve was not ready within 180 s")


def load_vectors(args: argparse.Namespace, records: Any, queries: Any) -> VectorTable:
    """The vectors of every chunk and query, from `vectors.npz` when a previous run saved it."""
    saved = args.data_dir / "vectors.npz"
    if saved.exists():
        return VectorTable.load(saved)
    table = build_vectors(records, queries, args.vectors)
    table.save(saved)
    return table


def targets_of(args: argparse.Namespace, queries: dict[str, list[str]], table: VectorTable) -> list[Target]:
    mixed = Queries.of(mixed_queries(queries, args.queries), table)
    scifact = Queries.of(queries["scifact"], table)
    chosen = {"T": mixed, "S": scifact, "L": mixed}
    return [Target(key, name, chosen[key]) for key, name in MEASURED.items()]


def main() -> None:
    args = parse_args()
    # Stopped by a signal, the run still stops its PostgreSQL and `retrieval serve` (the `finally`s).
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    counts = sorted(int(c) for c in args.stores.split(",") if c)
    with database(args.data_dir, args.reuse) as conninfo, ExitStack() as closing:
        os.environ["DATABASE_URL"] = conninfo
        from retrieval_core.container import get_backends, get_service

        service = get_service()  # migrates the schema on first use
        records, queries = read_records(), read_query_texts()
        table = load_vectors(args, records, queries)
        embedder = TableEmbedder(service.embedder.model, table)
        state = State(args.data_dir / "state.json")
        sizes = {"S": args.s_chunks, "L": args.l_chunks}
        build_measured(service, embedder, records, base_chunks(records, table), sizes, state)
        index_stores(conninfo, state)
        targets = targets_of(args, queries, table)
        for target in targets:
            exact_answers(conninfo, target)
        pool = [r for name in SETS for r in records[name]]
        main_ctx = Context(service, get_backends(), embedder, records["msmarco-5k"], targets, conninfo)
        alone_ctx: Context | None = None
        for count in counts:
            if state.data["fillers"] > count:
                print(f"{count:,} fillers: the database already holds {state.data['fillers']:,}; skipped")
                continue
            if state.data["fillers"] < count:
                print(f"growing to {count:,} filler stores ...", flush=True)
                grow_fillers(service, embedder, pool, count, state, args.writers)
                index_stores(conninfo, state)
            if alone_ctx is None:  # after the first growth: it holds the first filler store too
                alone_ctx = closing.enter_context(alone_context(ensure_alone(conninfo, state), main_ctx))
            sides = {"alone": alone_ctx, "main": main_ctx}
            result = measure_count(args, sides, state, count, last=count == counts[-1])
            write_results(args.data_dir, count, result)


@contextmanager
def alone_context(conninfo: str, main: Context) -> Iterator[Context]:
    """What the rounds use on the alone database: a service of its own on it, the main's targets."""
    from retrieval_core.backends.router import Backends
    from retrieval_core.container import get_knowledge_service

    service = service_on(conninfo, main.service.embedder)
    try:
        backends = Backends(lambda: service, get_knowledge_service)
        yield Context(service, backends, main.embedder, main.probes, main.targets, conninfo)
    finally:
        service.database.close()


def service_on(conninfo: str, embedder: Any) -> Any:
    """A RetrievalService on `conninfo`, built from the settings as the container builds its own."""
    from retrieval_core.container import build_database, build_service
    from retrieval_core.settings import get_settings

    settings = get_settings()
    return build_service(settings, build_database(settings, conninfo), embedder)


def index_stores(conninfo: str, state: State) -> None:
    """The store index maintenance on the main database; its steps and time go in the state."""
    done = maintain_indexes(conninfo)
    state.data.setdefault("index_runs", []).append({"fillers": state.data["fillers"], **done})
    state.save()


def measure_count(
    args: argparse.Namespace, sides: dict[str, Context], state: State, count: int, last: bool
) -> dict[str, Any]:
    """Every figure at this count on both databases, as the JSON of results-<count>.json."""
    main = sides["main"]
    settled = {side: round(settle(ctx.conninfo), 1) for side, ctx in sides.items()}
    print(f"VACUUM (ANALYZE): {settled} s", flush=True)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with ExitStack() as servers:
        for side, ctx in sides.items():
            client = servers.enter_context(http_server(ctx.conninfo, args.data_dir, f"serve-{side}.log"))
            attach_http(ctx, client)
        figures = measure_rounds(sides, args.rounds, args.writes, args.put_requests)
    fillers = filler_names(main.conninfo)
    concurrency = None
    if last and args.concurrency_seconds > 0:
        print(f"concurrency run, {args.concurrency_seconds:.0f} s ...", flush=True)
        concurrency = concurrency_run(main, fillers, args.concurrency_seconds)
    db = database_figures(main.conninfo)
    previous = previous_result(args.data_dir, count)
    if previous is not None and len(fillers) > previous["fillers"]:
        grown = db["database_bytes"] - previous["database"]["database_bytes"]
        db["marginal_bytes_per_filler"] = grown / (len(fillers) - previous["fillers"])
    result = {
        "count": count,
        "fillers": len(fillers),
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": machine(),
        "load": [load_before, os.getloadavg()[0]],
        "command": "python -m bench.tenants " + " ".join(sys.argv[1:]),
        "rounds": args.rounds,
        "k": K,
        "seconds": round(time.perf_counter() - started, 1),
        "vacuum_analyze_seconds": settled,
        "database": db,
        "alone": {"database": database_figures(sides["alone"].conninfo), "build": state.data["alone"]},
        "build": {
            "measured": state.data["measured"],
            "growth": state.data["growth"],
            "index_runs": state.data.get("index_runs", []),
            "eta": eta_json(state.data["growth"], state.data["fillers"], [c for c in COUNTS if c > count]),
        },
        "measured": {t.key: measured_json(t) for t in main.targets},
        "figures": figures_json(main, figures),
        "concurrency": concurrency,
    }
    result["errors_total"] = errors_total(result)
    return result


def attach_http(ctx: Context, client: Any) -> None:
    """The PUT and DELETE of a store through `client` (a `retrieval serve` on the context's database)."""
    ctx.put = lambda name: client.put(f"/api/v1/stores/{name}", json={})
    ctx.delete = lambda name: client.delete(f"/api/v1/stores/{name}")


def measured_json(target: Target) -> dict[str, Any]:
    return {
        "name": target.name,
        "chunks": target.matching["dense"],
        "queries": len(target.queries.texts),
        "matching": target.matching,
    }


def figures_json(
    ctx: Context, figures: dict[tuple[str, str], dict[str, Figure]]
) -> dict[str, dict[str, Any]]:
    """Each figure on each database, and its ratios main over alone."""
    targets = {t.key: t for t in ctx.targets}
    out: dict[str, dict[str, Any]] = {}
    for (key, name), by_side in figures.items():
        target = targets.get(key) if (key, name) != HTTP_PUT else None
        entry = {side: figure_json(figure, target, name) for side, figure in by_side.items()}
        entry["ratio"] = ratio_json(by_side["main"], by_side["alone"])
        out.setdefault(key, {})[name] = entry
    return out


def errors_total(result: dict[str, Any]) -> int:
    total = sum(
        sum(entry[side]["errors"].values())
        for figures in result["figures"].values()
        for entry in figures.values()
        for side in SIDES
    )
    run = result["concurrency"] or {}
    total += sum(sum(run[kind]["errors"].values()) for kind in ("write", "search") if kind in run)
    total += sum(run.get("cleanup_errors", {}).values())
    return int(total)


def previous_result(data_dir: Path, count: int) -> dict[str, Any] | None:
    """The results of the largest count below `count` measured in this data directory."""
    found = sorted(
        (int(p.stem.split("-")[1]), p)
        for p in data_dir.glob("results-*.json")
        if p.stem.split("-")[1].isdigit()
    )
    below = [p for c, p in found if c < count]
    return json.loads(below[-1].read_text()) if below else None


def write_results(data_dir: Path, count: int, result: dict[str, Any]) -> None:
    (data_dir / f"results-{count}.json").write_text(json.dumps(result, indent=1, default=str))
    block = markdown(result)
    (data_dir / f"results-{count}.md").write_text(block + "\n")
    print(block, flush=True)


if __name__ == "__main__":
    os.chdir(REPO)
    main()
