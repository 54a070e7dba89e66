"""Building the stores of bench/tenants.py through the production writer, and the ETA of growing them.

The three measured stores are written with tests/writing.py (`ensure_store`, `write_documents`); filler
stores with `DocumentService.write_sources`, one call per store that creates it in the transaction of its
first write (as S3 sync and the CLI create a store), all on the pooled connections of one service.
What was built, and how long it took, is kept in `state.json` beside the database, so a run with
`--reuse` goes on where the last one stopped.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.tenants_data import (
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    BaseChunk,
    Record,
    TableEmbedder,
    filler_documents,
    filler_offsets,
    large_documents,
    medium_documents,
    prepared_texts,
    record_document,
)
from tests.writing import TextDocument, document_service, ensure_store, write_documents

MEASURED = {"T": "tenants-t", "S": "tenants-s", "L": "tenants-l"}
BLOCK = 100  # filler stores timed together (progress, ETA)
T = TypeVar("T")
GIVE_UP_AFTER = 200  # consecutive failed filler stores: growing stops there


def filler_name(index: int) -> str:
    """The name of filler store `index` (from 1); zero-padded, so names sort by index."""
    return f"tenant-{index:06d}"


class State:
    """What has been built (state.json): measured stores, the fillers written, their build times."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        self.data.setdefault("measured", {})
        self.data.setdefault("fillers", 0)
        self.data.setdefault("growth", [])

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1))


def build_measured(
    service: Any,
    embedder: TableEmbedder,
    records: dict[str, list[Record]],
    chunks: list[BaseChunk],
    sizes: dict[str, int],
    state: State,
) -> None:
    """Write T (3 documents), S (scifact, `sizes["S"]` chunks) and L (`sizes["L"]` chunks) unless built."""
    sources: dict[str, Callable[[], Iterable[tuple[TextDocument, int | None]]]] = {
        "T": lambda: ((record_document(r, r.id, n), None) for n, r in enumerate(records["msmarco-5k"][:3])),
        "S": lambda: ((d, None) for d in medium_documents(records["scifact"], sizes["S"])),
        "L": lambda: large_documents(chunks, sizes["L"]),
    }
    for key, name in MEASURED.items():
        wanted = {"chunks": sizes.get(key)}
        done = state.data["measured"].get(key)
        if done is not None and done.get("asked") == wanted:
            continue
        print(f"building {key} ({name}) through the writer ...", flush=True)
        started = time.perf_counter()
        ensure_store(service, name, embedder)
        written = write_measured(service, embedder, name, sources[key]())
        seconds = time.perf_counter() - started
        state.data["measured"][key] = {"asked": wanted, "seconds": round(seconds, 1), **written}
        state.save()
        print(f"built {key}: {written} in {seconds:.0f} s", flush=True)


def write_measured(
    service: Any, embedder: TableEmbedder, name: str, documents: Iterable[tuple[TextDocument, int | None]]
) -> dict[str, int]:
    """Write `documents` in batches of 2,000; a document with a parent row is embedded as its variant."""
    counts: Counter[str] = Counter()
    batch: list[TextDocument] = []

    def flush() -> None:
        report = write_documents(
            service, name, batch, CHUNK_SIZE, CHUNK_OVERLAP, embedder=embedder, per_write=len(batch)
        )
        counts["documents"] += report.documents_written + report.documents_unchanged
        counts["chunks"] += report.chunks_written
        counts["unchanged"] += report.documents_unchanged
        embedder.forget()
        batch.clear()
        if counts["documents"] % 20_000 == 0:
            print(f"  {name}: {counts['documents']:,} documents", flush=True)

    for document, parent in documents:
        if parent is not None:
            for text in prepared_texts(document):
                embedder.derive(text, parent)
        batch.append(document)
        if len(batch) == 2000:
            flush()
    if batch:
        flush()
    return dict(counts)


@dataclass
class Growth:
    """One growth step of the fillers: stores asked and made, seconds, errors, and per-block rates."""

    start: int
    target: int
    made: int = 0
    seconds: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    blocks: list[tuple[int, float]] = field(default_factory=list)  # (fillers at block end, s per store)
    stopped: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "from": self.start,
            "to": self.target,
            "made": self.made,
            "seconds": round(self.seconds, 1),
            "errors": dict(self.errors),
            "blocks": [[n, round(s, 4)] for n, s in self.blocks],
            "stopped": self.stopped,
        }


def error_name(exc: BaseException) -> str:
    """A failure's kind: the class, and the error code of a RetrievalError."""
    code = getattr(exc, "code", None)
    return f"{type(exc).__name__} ({code})" if code else type(exc).__name__


def attempt(call: Callable[[], T], errors: Counter[str] | None, prefix: str = "") -> tuple[bool, T | None]:
    """(True, what `call` returned), or (False, None) with the failure counted in `errors` by kind."""
    try:
        return True, call()
    except Exception as exc:  # noqa: BLE001 - every failure is counted and reported; none ends the run
        if errors is not None:
            errors[prefix + error_name(exc)] += 1
        return False, None


def grow_fillers(
    service: Any, embedder: TableEmbedder, pool: Sequence[Record], target: int, state: State, writers: int
) -> Growth:
    """Write filler stores until the highest index is `target`, BLOCK at a time, printing the ETA."""
    from retrieval_core.documents.models import StoreDefinition

    writer = document_service(service, embedder, CHUNK_SIZE, CHUNK_OVERLAP)
    growth = Growth(state.data["fillers"], target)
    create = StoreDefinition()

    def write_one(item: tuple[int, int]) -> str | None:
        index, first = item
        sources = [d.source() for d in filler_documents(index, first, pool)]
        errors: Counter[str] = Counter()
        _, results = attempt(
            lambda: list(writer.write_sources(filler_name(index), sources, create=create)), errors
        )
        failed = [error_name(r) for r in results or [] if isinstance(r, Exception)]
        return next(iter(errors), None) or next(iter(failed), None)

    offsets = filler_offsets(growth.start + 1, target + 1)
    failed_in_a_row = 0
    with ThreadPoolExecutor(max_workers=writers) as pool_of_writers:
        while state.data["fillers"] < target and not growth.stopped:
            block = [next(offsets) for _ in range(min(BLOCK, target - state.data["fillers"]))]
            started = time.perf_counter()
            outcomes = list(pool_of_writers.map(write_one, block))
            took = time.perf_counter() - started
            failures = [o for o in outcomes if o is not None]
            growth.errors.update(failures)
            growth.made += len(block) - len(failures)
            failed_in_a_row = failed_in_a_row + len(failures) if len(failures) == len(block) else 0
            if failed_in_a_row >= GIVE_UP_AFTER:
                growth.stopped = f"{failed_in_a_row} stores in a row failed ({failures[-1]})"
            growth.seconds += took
            state.data["fillers"] = block[-1][0]
            growth.blocks.append((state.data["fillers"], took / len(block)))
            report_progress(growth, state.data["fillers"])
            save_growth(state, growth)
    return growth


def save_growth(state: State, growth: Growth) -> None:
    """Keep the step in state.json (replacing its own entry), so a stopped run keeps its timings."""
    steps = [s for s in state.data["growth"] if s["from"] != growth.start]
    state.data["growth"] = [*steps, growth.as_json()]
    state.save()


def report_progress(growth: Growth, fillers: int) -> None:
    if fillers % 1000 and fillers != growth.target:
        return
    per_store = growth.blocks[-1][1]
    steady, growing = eta_seconds(growth.blocks, fillers, growth.target)
    errors = sum(growth.errors.values())
    print(
        f"  fillers {fillers:,}/{growth.target:,}: {per_store * 1000:.0f} ms a store now, "
        f"{errors} failed; ETA of this step {steady / 60:.1f} min (steady) / {growing / 60:.1f} min "
        "(per-store time growing as measured)",
        flush=True,
    )


def eta_seconds(blocks: Sequence[tuple[int, float]], now: int, target: int) -> tuple[float, float]:
    """Seconds to grow from `now` to `target` fillers: at the last 1,000 stores' rate, and with the
    per-store time growing linearly in the store count as the blocks measured it (least squares)."""
    if not blocks or target <= now:
        return 0.0, 0.0
    recent = [s for n, s in blocks if n > now - 1000] or [blocks[-1][1]]
    steady = (target - now) * sum(recent) / len(recent)
    slope, intercept = linear_fit([float(n) for n, _ in blocks], [s for _, s in blocks])
    if slope <= 0:
        return steady, steady
    growing = intercept * (target - now) + slope * (target**2 - now**2) / 2
    return steady, max(steady, growing)


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Slope and intercept of the least-squares line through (xs, ys); slope 0 with fewer than 2 xs."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    if n < 2 or spread == 0:
        return 0.0, mean_y
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return slope, mean_y - slope * mean_x


# The second database on the same server: the measured stores alone (and the first filler store, which
# the first count measures beside them), their rows copied from the main database.
ALONE_DATABASE = "tenants_alone"
ALONE_FILLER = filler_name(1)


@dataclass(frozen=True)
class CopyStep:
    """One table of the copy: its name, the column holding the store id, and the columns copied (the
    generated ones are computed again on insert)."""

    table: str
    key: str
    columns: tuple[str, ...]


def dependency_order(tables: Iterable[str], references: Iterable[tuple[str, str]]) -> list[str]:
    """`tables` with each after the tables it references ((table, referenced) pairs), ties by name."""
    remaining = set(tables)
    pairs = list(references)
    needs = {t: {r for c, r in pairs if c == t and r != t and r in remaining} for t in remaining}
    order: list[str] = []
    while remaining:
        ready = sorted(t for t in remaining if not needs[t] & remaining)
        if not ready:
            raise RuntimeError(f"the foreign keys of {sorted(remaining)} form a cycle")
        order += ready
        remaining -= set(ready)
    return order


def copy_plan(conn: Any) -> list[CopyStep]:
    """The tables holding stores' rows (`stores`, and every table with a store_id), in dependency order."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " WHERE a.attname = 'store_id' AND NOT a.attisdropped AND c.relkind = 'r'"
        " AND c.relnamespace = current_schema()::regnamespace"
    ).fetchall()
    tables = ["stores", *(r[0] for r in rows)]
    references = conn.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint WHERE contype = 'f'"
    ).fetchall()
    return [
        CopyStep(table, "id" if table == "stores" else "store_id", copied_columns(conn, table))
        for table in dependency_order(tables, references)
    ]


def copied_columns(conn: Any, table: str) -> tuple[str, ...]:
    """The columns of `table` a COPY FROM takes: all but the dropped and the generated ones."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
        " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (table,),
    ).fetchall()
    return tuple(r[0] for r in rows)


def store_rows(conninfo: str, names: Sequence[str]) -> dict[str, list[int]]:
    """[id, chunk_count] of each of the stores `names` the database holds, by name."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, id, chunk_count FROM stores WHERE name = ANY(%s) ORDER BY id", (list(names),)
        ).fetchall()
    return {name: [int(id_), int(chunks)] for name, id_, chunks in rows}


def store_filter(step: CopyStep, ids: Sequence[int]) -> Any:
    """`key IN (ids)` of one table, as SQL."""
    from psycopg import sql

    return sql.SQL("{} IN ({})").format(sql.Identifier(step.key), sql.SQL(", ").join(map(sql.Literal, ids)))


def copy_table(source: Any, target: Any, step: CopyStep, ids: Sequence[int]) -> None:
    """The stores' rows of one table, from `source` to `target` through binary COPY."""
    from psycopg import sql

    columns = sql.SQL(", ").join(map(sql.Identifier, step.columns))
    out = sql.SQL("COPY (SELECT {} FROM {} WHERE {}) TO STDOUT (FORMAT BINARY)").format(
        columns, sql.Identifier(step.table), store_filter(step, ids)
    )
    into = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(sql.Identifier(step.table), columns)
    with source.cursor().copy(out) as reading, target.cursor().copy(into) as writing:
        for block in reading:
            writing.write(block)


def checked_count(source: Any, target: Any, step: CopyStep, ids: Sequence[int]) -> int:
    """The rows of the stores in `source`'s table; RuntimeError unless `target`'s table holds as many."""
    from psycopg import sql

    table = sql.Identifier(step.table)
    query = sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, store_filter(step, ids))
    expected = source.execute(query).fetchone()[0]
    copied = target.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0]
    if copied != expected:
        raise RuntimeError(f"copying {step.table}: {expected:,} rows in the source, {copied:,} copied")
    return int(copied)


def copy_stores(source: str, target: str, names: Sequence[str]) -> dict[str, int]:
    """Copy the stores `names` from `source` into the migrated, empty `target`, ids kept, table by table in
    dependency order, in one transaction; every table's row count checked. Rows copied, by table."""
    import psycopg

    with psycopg.connect(source) as src, psycopg.connect(target) as dst:
        src.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # every table of one snapshot
        plan = copy_plan(src)
        if [(s.table, s.columns) for s in copy_plan(dst)] != [(s.table, s.columns) for s in plan]:
            raise RuntimeError(f"the schema of {target} differs from the schema of {source}")
        ids = list(store_rows(source, names)[name][0] for name in names)
        # The rows go in as they are: the triggers on chunks would index them for keyword search and
        # count them again (both copied), so they are off in this transaction.
        dst.execute("SET LOCAL session_replication_role = replica")
        rows = {}
        for step in plan:
            copy_table(src, dst, step, ids)
            rows[step.table] = checked_count(src, dst, step, ids)
        # New stores (the PUT figure) take ids and versions after the copied ones.
        dst.execute("SELECT setval(pg_get_serial_sequence('stores', 'id'), (SELECT max(id) FROM stores))")
        dst.execute("SELECT setval('store_versions', (SELECT max(version) FROM stores))")
    return rows


def maintain_indexes(conninfo: str) -> dict[str, Any]:
    """The store index maintenance, as `retrieval serve` and the deployed schedule run it: the largest
    stores' HNSW indexes (S and L here) built outside requests. Its steps, failures and seconds."""
    from retrieval_core.db.store_indexes import IndexPolicy, maintain_database
    from retrieval_core.settings import get_settings

    started = time.perf_counter()
    run = maintain_database(conninfo, IndexPolicy.from_settings(get_settings()), 10)
    seconds = time.perf_counter() - started
    print(
        f"store index maintenance: {len(run.done)} steps, {seconds:.1f} s; failed: {run.failed}", flush=True
    )
    return {"steps": run.done, "failed": run.failed, "seconds": round(seconds, 1)}


def settle(conninfo: str) -> float:
    """VACUUM (ANALYZE) the whole database; the seconds it took. Run on both databases before measuring:
    the planner picks an HNSW or an exact scan from the statistics, so both must have fresh ones, and
    autovacuum does not then catch up with a growth during the rounds."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return time.perf_counter() - started


def alone_conninfo(conninfo: str) -> str:
    """The conninfo of the alone database on the server of `conninfo`."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(conninfo, dbname=ALONE_DATABASE)


def database_exists(conninfo: str, name: str) -> bool:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def ensure_alone(conninfo: str, state: State) -> str:
    """The alone database's conninfo; built now unless state.json records a build of the same stores (ids
    and chunk counts) that the alone database still holds."""
    alone = alone_conninfo(conninfo)
    wanted = store_rows(conninfo, [*MEASURED.values(), ALONE_FILLER])
    built = state.data.get("alone")
    if (
        built
        and built["stores"] == wanted
        and database_exists(conninfo, ALONE_DATABASE)
        and store_rows(alone, list(wanted)) == wanted
    ):
        return alone
    build_alone(conninfo, alone, wanted, state)
    return alone


def build_alone(conninfo: str, alone: str, wanted: dict[str, list[int]], state: State) -> None:
    """Create the alone database with the project's migrations, copy the stores `wanted` into it, run the
    store index maintenance on it, VACUUM ANALYZE it (`settle`); recorded in state.json."""
    import psycopg
    from psycopg import sql

    from retrieval_core.db.migrations.runner import run_migrations

    print(f"building the alone database ({', '.join(wanted)}) from the main one ...", flush=True)
    started = time.perf_counter()
    name = sql.Identifier(ALONE_DATABASE)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    run_migrations(alone)
    rows = copy_stores(conninfo, alone, list(wanted))
    copied = time.perf_counter() - started
    index = maintain_indexes(alone)
    settle(alone)
    seconds = time.perf_counter() - started
    state.data["alone"] = {
        "database": ALONE_DATABASE,
        "stores": wanted,
        "rows": rows,
        "copy_seconds": round(copied, 1),
        "index": index,
        "seconds": round(seconds, 1),
    }
    state.save()
    print(f"built the alone database in {seconds:.0f} s: {rows}", flush=True)
