"""`retrieval eval`: score retrieval methods on judged queries against a loaded store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from retrieval_core.exceptions import InvalidRequestError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `eval`."""
    p_eval = sub.add_parser(
        "eval",
        help="score every retrieval method (nDCG@10, recall@100, p50 latency, paired difference against "
        "dense search) on judged queries against a loaded store",
    )
    p_eval.add_argument("--store", required=True, help="a store loaded with the documents the qrels name")
    p_eval.add_argument("--queries", required=True, type=Path, help="BEIR queries.jsonl (_id, text)")
    p_eval.add_argument(
        "--qrels",
        required=True,
        type=Path,
        help="BEIR qrels .tsv: query-id, corpus-id, score (a header line is skipped)",
    )
    p_eval.add_argument(
        "--method",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="also run a retrieve request's options (camelCase, as over HTTP), e.g. "
        '\'w6={"useHybrid": true, "fusion": "weighted", "vectorWeight": 0.6, "keywordWeight": 0.4}\'',
    )
    p_eval.add_argument(
        "--no-exact", action="store_true", help="skip exact search (it loads every embedding into memory)"
    )
    p_eval.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p_eval.set_defaults(run=_eval)


def _eval(args: argparse.Namespace) -> int:
    from retrieval_core.container import get_service
    from retrieval_core.evaluation import beir
    from retrieval_core.evaluation.runner import DEFAULT_METHODS, MethodSpec, evaluate_store

    service = get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    specs = list(DEFAULT_METHODS)
    for text in args.method:
        name, equals, options = text.partition("=")
        usage = f"--method {text!r}: give NAME={{retrieve request options as a JSON object}}"
        if not name or not equals:
            raise InvalidRequestError(usage)
        try:
            parsed = json.loads(options)
        except json.JSONDecodeError as exc:
            raise InvalidRequestError(f"{usage}; not JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise InvalidRequestError(usage)
        specs.append(MethodSpec(name, parsed))
    report = evaluate_store(
        service,
        args.store,
        beir.read_queries(args.queries),
        beir.read_qrels(args.qrels),
        specs=specs,
        exact=not args.no_exact,
        progress=not args.no_progress,
    )
    print(report.markdown())
    return 0
