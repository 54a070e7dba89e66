"""The results of bench/tenants.py at one store count: JSON, and the Markdown table for docs/benchmarks.md.

Ratios are to the same figure at 1 filler store (results-1.json of the same data directory): the ratio of
the p50s over all rounds, and the range of each round's p50 divided by the 1-store p50.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.tenants_build import eta_seconds
from bench.tenants_measure import Figure, Target, recall


def ratio_and_range(
    p50: float, round_p50s: Sequence[float], base: float | None
) -> tuple[float, float, float]:
    """p50 / base, and the lowest and highest round p50 / base (NaN without a base)."""
    if not base or not round_p50s or math.isnan(p50):
        return math.nan, math.nan, math.nan
    return p50 / base, min(round_p50s) / base, max(round_p50s) / base


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


def figure_row(store: str, name: str, f: dict[str, Any], base: dict[str, Any] | None) -> str:
    base_p50 = base.get("p50_ms") if base else None
    p50 = f["p50_ms"] if f["p50_ms"] is not None else math.nan
    ratio, low, high = ratio_and_range(p50, f["round_p50_ms"], base_p50)
    rounds = f["round_p50_ms"]
    cells = [
        store,
        name,
        f"{f['requests']:,}",
        fmt(f["p50_ms"]),
        fmt(f["p99_ms"]),
        f"{min(rounds):.2f}–{max(rounds):.2f}" if rounds else "",
        fmt(ratio, "{:.2f}x"),
        f"{low:.2f}–{high:.2f}x" if not math.isnan(low) else "",
        fmt(f.get("recall_at_10"), "{:.3f}"),
        fmt(f.get("full_k"), "{:.0%}"),
        str(sum(f["errors"].values())),
    ]
    return "| " + " | ".join(cells) + " |"


def markdown(result: dict[str, Any], base: dict[str, Any] | None) -> str:
    """The Markdown block of one count."""
    db, build = result["database"], result["build"]
    lines = [
        f"### {result['fillers']:,} filler stores (+{len(result['measured'])} measured)",
        "",
        f"Measured {result['date']} on {result['machine']}; load average {result['load'][0]:.2f} before, "
        f"{result['load'][1]:.2f} after. PostgreSQL {db['server_version']} (embedded, default settings: "
        f"max_locks_per_transaction {db['max_locks_per_transaction']}, max_connections "
        f"{db['max_connections']}, shared_buffers {db['shared_buffers']}), pgvector {db['pgvector']}. "
        f"Command: `{result['command']}`. {result['rounds']} rounds; retrieves top {result['k']}, naive "
        "engine, no cache, query vectors precomputed.",
        "",
        *build_lines(result, build),
        "",
        f"Database: {db['stores']:,} stores, {db['relations']:,} relations in pg_class, "
        f"{db['database_bytes'] / 2**20:,.0f} MB "
        f"({db['database_bytes'] / db['stores'] / 2**10:,.0f} KB a store"
        + (
            f"; {db['marginal_bytes_per_filler'] / 2**10:,.1f} KB a filler store added since the last count)."
            if db.get("marginal_bytes_per_filler") is not None
            else ")."
        ),
        "",
        "| store | figure | requests | p50 (ms) | p99 (ms) | rounds' p50 (ms) | p50 vs 1 store "
        "| rounds vs 1 store | recall@10 | full k | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for store, figures in result["figures"].items():
        for name, f in figures.items():
            lines.append(figure_row(store, name, f, (base or {}).get(store, {}).get(name)))
    lines += ["", *measured_lines(result["measured"]), *concurrency_lines(result.get("concurrency"))]
    lines.append(f"Errors in all: {result['errors_total']}.")
    return "\n".join(lines)


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
