"""The measurements of bench/tenants.py at one store count: alternating rounds of writes and retrieves on
the measured stores (in process, through the writer and the one retrieve entry point), store creation over
HTTP through `retrieval serve`, recall against exact search, and what the database holds. Each round takes
every figure on the alone database and on the main one, back to back.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np

from bench.tenants_build import attempt
from bench.tenants_data import (
    BUCKET,
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    FILTERS,
    Queries,
    Record,
    TableEmbedder,
)
from tests.writing import TextDocument, document_service, write_documents

K = 10
GRADE = 0.0  # the lowest threshold a request may ask: chunks of negative similarity are never returned
RETRIEVES = ("dense", "hybrid", "filtered 1%", "filtered 10%")
FIGURES = ("write", *RETRIEVES)
HTTP_PUT = ("HTTP", "PUT /api/v1/stores/{name}")
SIDES = ("alone", "main")  # the databases each round measures, in the order of its even rounds
Task = TypeVar("Task")


@dataclass
class Target:
    """A measured store, its queries, and the exact answers to them (by filter)."""

    key: str
    name: str
    queries: Queries
    # The exact answer of each query, by figure: its top 10 among the chunks at or above the grade.
    truth: dict[str, list[list[str]]] = field(default_factory=dict)
    matching: dict[str, int] = field(default_factory=dict)  # chunks each filter matches


@dataclass
class Context:
    """What the rounds use on one database: the service, its retrieve entry point, the writer's embedder,
    the targets (the same stores, and exact answers, in both databases)."""

    service: Any
    backends: Any
    embedder: TableEmbedder
    probes: Sequence[Record]  # small documents the write figure writes
    targets: list[Target]
    conninfo: str = ""
    put: Callable[[str], Any] | None = None  # PUT a store over HTTP (None: not measured)
    delete: Callable[[str], Any] | None = None


@dataclass
class Figure:
    """One figure's samples by round, its errors, and how many answers held min(k, matching) rows."""

    rounds: list[list[float]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    complete: int = 0
    answered: int = 0
    answers: list[list[str]] = field(default_factory=list)  # the first round's, for recall


def retrieve_request(store: str, text: str, figure: str) -> Any:
    """The body of POST /api/v1/rag/retrieve for `figure`: top 10, naive engine, no cache, no threshold."""
    from retrieval_core.schemas.retrieve import RetrieveRequest

    body: dict[str, Any] = {
        "query": text,
        "store": store,
        "similarityTopK": K,
        "engineName": "naive",
        "grade": GRADE,
        "cacheTTLms": 0,
    }
    if figure == "hybrid":
        body["useHybrid"] = True
    if FILTERS.get(figure):
        body["metadataFilter"] = FILTERS[figure]
    return RetrieveRequest.model_validate(body)


def retrieve_ids(ctx: Context, store: str, text: str, vector: np.ndarray, figure: str) -> list[str]:
    """One retrieve through `Backends.retrieve` (the HTTP route's entry point) with a precomputed vector."""
    from retrieval_core.grants import OPEN_GRANT

    values = vector.tolist()
    request = retrieve_request(store, text, figure)
    response, _ = ctx.backends.retrieve(request, OPEN_GRANT, caller="http", embed_query=lambda _q: values)
    return [r.id for r in response.results]


def run_retrieves(ctx: Context, target: Target, figure: str, out: Figure, limit: int | None = None) -> None:
    """Each query of `target` once; milliseconds of the successful ones appended as a new round."""
    samples: list[float] = []
    first = not out.rounds
    # The exact answer's length: min(k, chunks the filter matches at or above the grade). Hybrid adds
    # keyword hits to the vector hits, so it is complete with at least as many.
    truth = target.truth["dense" if figure == "hybrid" else figure]
    queries = target.queries
    for n, (text, vector) in enumerate(list(zip(queries.texts, queries.vectors, strict=True))[:limit]):
        started = time.perf_counter()
        ok, ids = attempt(partial(retrieve_ids, ctx, target.name, text, vector, figure), out.errors)
        if ok and ids is not None:
            samples.append((time.perf_counter() - started) * 1000)
            out.answered += 1
            expected = len(truth[n])
            out.complete += len(ids) >= expected if figure == "hybrid" else len(ids) == expected
        if first and limit is None:
            out.answers.append(ids or [])
    if limit is None:
        out.rounds.append(samples)


def write_one(ctx: Context, store: str, document: TextDocument) -> None:
    """Write one document through the writer (tests/writing.py), embedded by the table embedder."""
    write_documents(ctx.service, store, [document], CHUNK_SIZE, CHUNK_OVERLAP, embedder=ctx.embedder)


def probe_document(ctx: Context, label: str, n: int) -> TextDocument:
    """A small document (one msmarco passage, its vector cached) with an id of its own."""
    record = ctx.probes[n % len(ctx.probes)]
    return TextDocument(f"probe-{label}-{n}", record.text, record.title, {BUCKET: "rest"})


def run_writes(ctx: Context, target: Target, count: int, label: str, out: Figure | None) -> None:
    """`count` writes of one small new document each through the writer; then the documents are deleted
    again (not timed), so the store holds the same documents for every figure and round."""
    written = []
    samples: list[float] = []
    for n in range(count):
        document = probe_document(ctx, label, n)
        errors = out.errors if out is not None else None
        started = time.perf_counter()
        ok, _ = attempt(partial(write_one, ctx, target.name, document), errors)
        if ok:
            samples.append((time.perf_counter() - started) * 1000)
            written.append(document.id)
    writer = document_service(ctx.service, ctx.embedder)
    for document_id in written:
        attempt(partial(writer.delete_source, target.name, document_id), errors, "deleting: ")
    if out is not None:
        out.rounds.append(samples)


def run_puts(ctx: Context, count: int, label: str, out: Figure) -> None:
    """`count` PUT /api/v1/stores/{name} of new stores over HTTP, each deleted afterwards (not timed)."""
    assert ctx.put is not None and ctx.delete is not None
    samples: list[float] = []
    made = []
    for n in range(count):
        name = f"put-probe-{label}-{n}"
        started = time.perf_counter()
        ok, response = attempt(lambda: ctx.put(name) if ctx.put else None, out.errors)  # noqa: B023
        if not ok or response is None:
            continue
        if response.status_code in (200, 201):
            samples.append((time.perf_counter() - started) * 1000)
            made.append(name)
        else:
            out.errors[f"HTTP {response.status_code} {http_error_code(response)}"] += 1
    for name in made:
        ok, response = attempt(lambda: ctx.delete(name) if ctx.delete else None, out.errors, "DELETE: ")  # noqa: B023
        if ok and response is not None and response.status_code != 204:
            out.errors[f"DELETE: HTTP {response.status_code} {http_error_code(response)}"] += 1
    out.rounds.append(samples)


def http_error_code(response: Any) -> str:
    """The `error.code` of an error body, or ''."""
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""


def round_order(tasks: Sequence[Task], sides: Sequence[str], done: int) -> list[tuple[Task, str]]:
    """Round `done`'s sequence: each task on every side back to back; even rounds take the tasks and the
    sides in their order, odd rounds the reverse of both (so an odd round is an even one backwards)."""
    if done % 2:
        tasks, sides = tasks[::-1], sides[::-1]
    return [(task, side) for task in tasks for side in sides]


def measure_rounds(
    sides: dict[str, Context], rounds: int, writes: int, puts: int
) -> dict[tuple[str, str], dict[str, Figure]]:
    """`rounds` rounds of every figure on every side (`round_order`); the figures by task, then side."""
    first = next(iter(sides.values()))
    tasks = [(t.key, f) for t in first.targets for f in FIGURES]
    if puts and all(ctx.put is not None for ctx in sides.values()):
        tasks.append(HTTP_PUT)
    figures = {task: {side: Figure() for side in sides} for task in tasks}
    for ctx in sides.values():
        warm_up(ctx)
    for done in range(rounds):
        for task, side in round_order(tasks, list(sides), done):
            out = figures[task][side]
            started = time.perf_counter()
            run_task(sides[side], task, out, writes, puts, f"r{done}")
            took = time.perf_counter() - started
            print(
                f"  round {done + 1}/{rounds} {task[0]} {task[1]} {side}: p50 "
                f"{median_or_nan(out.rounds[-1]):.2f} ms ({len(out.rounds[-1])} requests, {took:.0f} s)"
                + round_ratio_text(figures[task], done),
                flush=True,
            )
    return figures


def run_task(ctx: Context, task: tuple[str, str], out: Figure, writes: int, puts: int, label: str) -> None:
    """One round of one figure on one database."""
    key, figure = task
    if task == HTTP_PUT:
        run_puts(ctx, puts, label, out)
    elif figure == "write":
        run_writes(ctx, next(t for t in ctx.targets if t.key == key), writes, label, out)
    else:
        run_retrieves(ctx, next(t for t in ctx.targets if t.key == key), figure, out)


def median_or_nan(samples: Sequence[float]) -> float:
    return float(np.median(samples)) if samples else float("nan")


def round_ratio_text(by_side: dict[str, Figure], done: int) -> str:
    """The ratio of round `done` for its progress line, once both databases have taken it."""
    if any(len(f.rounds) <= done for f in by_side.values()):
        return ""
    main, alone = (median_or_nan(by_side[side].rounds[done]) for side in ("main", "alone"))
    return f"; main / alone {main / alone:.2f}x"


def warm_up(ctx: Context) -> None:
    """Twenty queries of each retrieve and five writes per store, not counted."""
    for target in ctx.targets:
        for figure in RETRIEVES:
            run_retrieves(ctx, target, figure, Figure(), limit=20)
        run_writes(ctx, target, 5, "warm-up", None)


def exact_answers(conninfo: str, target: Target) -> None:
    """The exact top 10 of each query and filter, from every vector of the store (numpy, no index)."""
    import psycopg
    from pgvector.psycopg import register_vector

    queries = target.queries.vectors / np.linalg.norm(target.queries.vectors, axis=1, keepdims=True)
    best = {f: (np.full((len(queries), 0), -2.0), np.empty((len(queries), 0), dtype=object)) for f in FILTERS}
    matching: Counter[str] = Counter()
    with psycopg.connect(conninfo) as conn:
        register_vector(conn)
        with conn.cursor(name="exact", binary=True) as cursor:
            cursor.execute(
                "SELECT c.document_id || '#' || c.chunk_index, c.embedding, c.metadata->>%s FROM chunks c"
                " JOIN stores s ON s.id = c.store_id WHERE s.name = %s",
                (BUCKET, target.name),
            )
            while rows := cursor.fetchmany(20_000):
                ids = np.array([r[0] for r in rows], dtype=object)
                vectors = np.array(
                    [np.asarray(r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1]) for r in rows]
                )
                vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
                buckets = np.array([r[2] for r in rows], dtype=object)
                sims = queries @ vectors.T.astype(np.float64)
                for figure, where in FILTERS.items():
                    mask = np.ones(len(rows), bool) if where is None else buckets == where[BUCKET]
                    matching[figure] += int(mask.sum())
                    best[figure] = keep_top(best[figure], sims[:, mask], ids[mask])
    target.truth = {
        figure: [
            [i for i, s in zip(line_ids, line_scores, strict=True) if s >= GRADE]
            for line_ids, line_scores in zip(ids, scores, strict=True)
        ]
        for figure, (scores, ids) in best.items()
    }
    target.matching = dict(matching)
    target.matching["hybrid"] = matching["dense"]
    target.matching["write"] = matching["dense"]


def keep_top(
    current: tuple[np.ndarray, np.ndarray], sims: np.ndarray, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The K highest of the current best and a new batch, per query, highest first."""
    scores = np.concatenate([current[0], sims], axis=1)
    names = np.concatenate([current[1], np.broadcast_to(ids, sims.shape)], axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :K]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(names, order, axis=1)


def recall(answers: Sequence[Sequence[str]], truth: Sequence[Sequence[str]]) -> float | None:
    """Mean recall@10 of `answers` against the exact `truth` (of at most 10 each); None without truth."""
    values = [len(set(a) & set(t)) / len(t) for a, t in zip(answers, truth, strict=False) if t]
    return float(np.mean(values)) if values else None


def database_figures(conninfo: str) -> dict[str, Any]:
    """What the database holds: relations, size, stores, HNSW indexes; and the settings the run ran with."""
    import psycopg

    from retrieval_core.db.stores import HNSW_INDEX_PREFIX

    with psycopg.connect(conninfo, autocommit=True) as conn:

        def one(query: str, *params: Any) -> Any:
            row = conn.execute(query, params or None).fetchone()
            return row[0] if row else None

        return {
            "relations": one("SELECT count(*) FROM pg_class"),
            "database_bytes": one("SELECT pg_database_size(current_database())"),
            "stores": one("SELECT count(*) FROM stores"),
            "hnsw_indexes": one(
                "SELECT count(*) FROM pg_indexes WHERE starts_with(indexname, %s)", HNSW_INDEX_PREFIX
            ),
            "server_version": one("SHOW server_version"),
            "pgvector": one("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
            "max_locks_per_transaction": one("SHOW max_locks_per_transaction"),
            "max_connections": one("SHOW max_connections"),
            "shared_buffers": one("SHOW shared_buffers"),
        }


def filler_names(conninfo: str) -> list[str]:
    """The filler stores the database holds."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        return [
            r[0] for r in conn.execute("SELECT name FROM stores WHERE name LIKE 'tenant-%' ORDER BY name")
        ]
