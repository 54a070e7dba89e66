"""How long POST /api/v1/stores/{store}/evaluate takes at its bounds: `python -m bench.evaluate_api
[BEIR folder]` (default ../shared/eval/scifact); writes its block of docs/benchmarks.md.

The set is loaded into store `eval-<folder>` through the production write path (bench/eval.py's loader,
with its vector cache), then the first MAX_QUERIES queries that have a relevant judgment are sent with
all their judgments, the default methods (dense, hybrid, keyword) and k = 10, through the app in
process (every middleware, the request deadline included): the wall time of the whole request, the
median of ROUNDS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import REPO, machine

OUT = REPO / "docs" / "benchmarks.md"
START, END = "<!-- bench-evaluate:start -->", "<!-- bench-evaluate:end -->"
DEFAULT_SET = REPO.parent / "shared" / "eval" / "scifact"
ROUNDS = 3


def request_body(folder: Path, limit: int) -> dict[str, Any]:
    """The first `limit` queries with a relevant judgment, and every judgment of those queries."""
    from bench.eval import qrels_file
    from retrieval_core.evaluation import beir

    queries = beir.read_queries(folder / "queries.jsonl")
    qrels = beir.read_qrels(qrels_file(folder))
    judged = [q for q in queries if any(g >= 1 for g in qrels.get(q, {}).values())][:limit]
    return {
        "queries": [{"id": q, "text": queries[q]} for q in judged],
        "judgments": [
            {"queryId": q, "documentId": d, "relevance": g} for q in judged for d, g in qrels[q].items()
        ],
        "k": 10,
    }


def measure(folder: Path) -> str:
    from fastapi.testclient import TestClient

    from bench.eval import load
    from retrieval_core.api.app import create_app
    from retrieval_core.container import get_service
    from retrieval_core.evaluation.runner import store_counts
    from retrieval_core.schemas.evaluate import MAX_QUERIES
    from retrieval_core.settings import get_settings

    store, _ = load(folder, fresh=False)
    documents, chunks = store_counts(get_service(), store)
    body = request_body(folder, MAX_QUERIES)
    load_before = os.getloadavg()[0]
    seconds: list[float] = []
    with TestClient(create_app()) as client:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            response = client.post(f"/api/v1/stores/{store}/evaluate", json=body)
            seconds.append(time.perf_counter() - started)
            response.raise_for_status()
            answer = response.json()
    load_after = os.getloadavg()[0]
    rows = [
        f"| {m['name']} | {m['ndcg']:.3f} | {m['recall']:.3f} | {m['medianLatencyMs']:.1f} |"
        for m in answer["methods"]
    ]
    command = f"python -m bench.evaluate_api {folder.name if folder != DEFAULT_SET else ''}".rstrip()
    return "\n".join(
        [
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}, with other work running "
            f"(load average {load_before:.2f} before, {load_after:.2f} after). Command: `{command}`. "
            f"Store `{store}`: {documents:,} documents in {chunks:,} chunks, written through the documents "
            f"service. Request: {len(body['queries'])} queries with {len(body['judgments'])} judgments, "
            f"the default methods (dense, hybrid, keyword), k = 10, through the whole app in process, "
            f"the local {get_service().embedder.model} embedding the queries; REQUEST_DEADLINE_S "
            f"{get_settings().request_deadline_s:g}.",
            "",
            f"Whole request: median {statistics.median(seconds):.1f} s of {ROUNDS} "
            f"({', '.join(f'{s:.1f}' for s in seconds)} s); the last answer: complete "
            f"{str(answer['complete']).lower()}, {answer['scoredQueries']} queries scored.",
            "",
            "| method | nDCG@10 | recall@10 | median ms per query |",
            "|---|---|---|---|",
            *rows,
        ]
    )


def write_block(block: str) -> None:
    """Replace the block between the markers of docs/benchmarks.md."""
    text = OUT.read_text()
    before, rest = text.split(START, 1)
    OUT.write_text(f"{before}{START}\n{block}\n{END}{rest.split(END, 1)[1]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", nargs="?", type=Path, default=DEFAULT_SET, help="a BEIR folder")
    parser.add_argument("--no-write", action="store_true", help="print the block, leave docs alone")
    args = parser.parse_args()
    block = measure(args.dataset.resolve())
    print(block)
    if not args.no_write:
        write_block(block)


if __name__ == "__main__":
    os.chdir(REPO)
    main()
