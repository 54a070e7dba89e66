"""The results of bench/tenants.py at one store count: JSON, and the Markdown table for docs/benchmarks.md.

Ratios are of the main database to the alone database, measured in the same rounds: the ratio of the p50s
over all rounds, and the range of each round's ratio (its main p50 over the same round's alone p50).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.tenants_build import eta_seconds
from bench.tenants_measure import Figure, Target, recall


def pooled_ratio(main: Sequence[Sequence[float]], alone: Sequence[Sequence[float]]) -> float:
    """The p50 of every main sample over the p50 of every alone sample (NaN when either has none)."""
    main_samples = [ms for r in main for ms in r]
    alone_samples = [ms for r in alone for ms in r]
    if not main_samples or not alone_samples:
        return math.nan
    return float(np.median(main_samples) / np.median(alone_samples))


def round_ratios(main: Sequence[Sequence[float]], alone: Sequence[Sequence[float]]) -> list[float]:
    """Each round's main p50 over the same round's alone p50; a round either side has no sample of is
    left out."""
    return [float(np.median(m) / np.median(a)) for m, a in zip(main, alone, strict=True) if len(m) and len(a)]


def ratio_json(main: Figure, alone: Figure) -> dict[str, Any]:
    """The pooled ratio and the rounds' ratios of one figure, main over alone."""
    pooled = pooled_ratio(main.rounds, alone.rounds)
    return {
        "p50": None if math.isnan(pooled) else round(pooled, 4),
        "rounds": [round(r, 4) for r in round_ratios(main.rounds, alone.rounds)],
    }


def figure_json(figure: Figure, target: Target | None, name: str) -> dict[str, Any]:
    """One figure's numbers: p50 and p99 over every round, each round's p50, errors, full k, recall."""
    samples = [ms for r in figure.rounds for ms in r]
    out: dict[str, Any] = {
        "requests": len(samples) + sum(figure.errors.values()),
        "p50_ms": round(float(np.median(samples)), 3) if samples else None,
        "p99_ms": round(float(np.percentile(samples, 99)), 3) if samples else None,
        "round_p50_ms": [round(float(np.median(r)), 3) for r in figure.rounds if r],
        "errors": dict(figure.errors),
    }
    if figure.answered:
        out["full_k"] = round(figure.complete / figure.answered, 4)
    if target is not None and name in target.truth:
        out["recall_at_10"] = recall(figure.answers, target.truth[name])
        out["matching_chunks"] = target.matching[name]
    return out


def eta_json(growth: Sequence[dict[str, Any]], fillers: int, targets: Sequence[int]) -> dict[str, Any]:
    """Minutes to grow from `fillers` to each target: at the last rate, and with per-store time growing."""
    blocks = [(int(n), float(s)) for step in growth for n, s in step["blocks"]]
    out = {}
    for target in targets:
        if target > fillers and blocks:
            steady, growing = eta_seconds(blocks, fillers, target)
            out[str(target)] = {"steady_min": round(steady / 60, 1), "growing_min": round(growing / 60, 1)}
    return out


def fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else pattern.format(value)


def figure_row(store: str, name: str, entry: dict[str, Any]) -> str:
    """One figure's row: the main database's numbers, the alone database's p50, and the ratios."""
    f, alone, ratio = entry["main"], entry["alone"], entry["ratio"]
    rounds, ratios = f["round_p50_ms"], ratio["rounds"]
    cells = [
        store,
        name,
        f"{f['requests']:,}",
        fmt(f["p50_ms"]),
        fmt(f["p99_ms"]),
        f"{min(rounds):.2f}–{max(rounds):.2f}" if rounds else "",
        fmt(alone["p50_ms"]),
        fmt(ratio["p50"], "{:.2f}x"),
        f"{min(ratios):.2f}–{max(ratios):.2f}x" if ratios else "",
        both(alone.get("recall_at_10"), f.get("recall_at_10"), "{:.3f}"),
        both(alone.get("full_k"), f.get("full_k"), "{:.0%}"),
        str(sum(alone["errors"].values()) + sum(f["errors"].values())),
    ]
    return "| " + " | ".join(cells) + " |"


def both(alone: float | None, main: float | None, pattern: str) -> str:
    """One value when both databases give it, else "alone / main"."""
    first, second = fmt(alone, pattern), fmt(main, pattern)
    return first if first == second else f"{first} / {second}"


def markdown(result: dict[str, Any]) -> str:
    """The Markdown block of one count."""
    db, build, alone = result["database"], result["build"], result["alone"]
    settled = ", ".join(f"{side} {s:,.0f} s" for side, s in result["vacuum_analyze_seconds"].items())
    lines = [
        f"### {result['fillers']:,} filler stores (+{len(result['measured'])} measured)",
        "",
        f"Measured {result['date']} on {result['machine']}; load average {result['load'][0]:.2f} before, "
        f"{result['load'][1]:.2f} after. PostgreSQL {db['server_version']} (embedded, default settings: "
        f"max_locks_per_transaction {db['max_locks_per_transaction']}, max_connections "
        f"{db['max_connections']}, shared_buffers {db['shared_buffers']}), pgvector {db['pgvector']}. "
        f"Command: `{result['command']}`. Both databases VACUUM (ANALYZE)d first ({settled}). "
        f"{result['rounds']} rounds, each taking every figure on the alone database and on this one back to "
        f"back; retrieves top {result['k']}, naive engine, no cache, query vectors precomputed.",
        "",
        *build_lines(result, build),
        "",
        f"Database: {db['stores']:,} stores (HNSW indexes: {db['hnsw_indexes']}), {db['relations']:,} "
        "relations in pg_class, "
        f"{db['database_bytes'] / 2**20:,.0f} MB "
        f"({db['database_bytes'] / db['stores'] / 2**10:,.0f} KB a store"
        + (
            f"; {db['marginal_bytes_per_filler'] / 2**10:,.1f} KB a filler store added since the last count)."
            if db.get("marginal_bytes_per_filler") is not None
            else ")."
        ),
        alone_line(alone),
        "",
        "| store | figure | requests | p50 (ms) | p99 (ms) | rounds' p50 (ms) | alone p50 (ms) "
        "| p50 vs alone | rounds vs alone | recall@10 | full k | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for store, figures in result["figures"].items():
        for name, entry in figures.items():
            lines.append(figure_row(store, name, entry))
    lines += ["", *measured_lines(result["measured"]), *concurrency_lines(result.get("concurrency"))]
    lines.append(f"Errors in all: {result['errors_total']}.")
    return "\n".join(lines)


def alone_line(alone: dict[str, Any]) -> str:
    """What the alone database holds and how it was built."""
    build, db = alone["build"], alone["database"]
    rows = ", ".join(f"{n:,} {table}" for table, n in build["rows"].items())
    return (
        f"Alone database `{build['database']}` on the same server: {', '.join(build['stores'])} "
        f"({rows}; copied from this database, row counts checked; HNSW indexes by the store index "
        f"maintenance: {db['hnsw_indexes']}), {db['relations']:,} relations, "
        f"{db['database_bytes'] / 2**20:,.0f} MB; built in {build['seconds']:,.0f} s. Recall, full k: one "
        "value when both databases give it, else alone / main; errors: both databases'."
    )


def build_lines(result: dict[str, Any], build: dict[str, Any]) -> list[str]:
    measured = "; ".join(
        f"{key} {m.get('chunks', 0):,} chunks written in {m['seconds']:,.0f} s"
        for key, m in build["measured"].items()
    )
    steps = "; ".join(growth_text(s) for s in build["growth"])
    eta = "; ".join(
        f"to {int(t):,}: {e['steady_min']:,.0f} min at the last rate, {e['growing_min']:,.0f} min with the "
        "per-store time growing as measured"
        for t, e in build["eta"].items()
    )
    return [
        f"Build (through the writer): {measured}. Filler stores: {steps or 'none written by this run'}."
        + (f" ETA {eta}." if eta else "")
    ]


def growth_text(step: dict[str, Any]) -> str:
    """One growth step: stores, seconds, per store, failures."""
    per_store = 1000 * step["seconds"] / max(1, step["to"] - step["from"])
    failed = sum(step["errors"].values())
    notes = [f"{per_store:,.0f} ms a store"]
    if failed:
        notes.append(f"{failed} failed: " + ", ".join(f"{n} {kind}" for kind, n in step["errors"].items()))
    if step["stopped"]:
        notes.append(f"stopped: {step['stopped']}")
    return f"{step['from']:,} → {step['to']:,}: {step['seconds']:,.0f} s ({'; '.join(notes)})"


def measured_lines(measured: dict[str, dict[str, Any]]) -> list[str]:
    parts = [
        f"{key} `{m['name']}` ({m['chunks']:,} chunks, {m['queries']} queries; filters match "
        f"{m['matching']['filtered 1%']:,} and {m['matching']['filtered 10%']:,} chunks)"
        for key, m in measured.items()
    ]
    return ["Measured stores: " + "; ".join(parts) + ".", ""]


def concurrency_lines(run: dict[str, Any] | None) -> list[str]:
    if not run:
        return []
    parts = []
    for kind in ("write", "search"):
        s = run[kind]
        errors = ", ".join(f"{n} {name}" for name, n in s["errors"].items()) or "none"
        parts.append(
            f"{kind}: {s['succeeded']:,} done ({s['per_second']}/s), p50 {fmt(s['p50_ms'])} ms, "
            f"p99 {fmt(s['p99_ms'])} ms, errors: {errors}"
        )
    return [
        f"Concurrency ({run['writers']} writing and {run['searchers']} searching clients, "
        f"{run['seconds']} s): " + "; ".join(parts) + ".",
        "",
    ]
