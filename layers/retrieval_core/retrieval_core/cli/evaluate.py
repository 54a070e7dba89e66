"""`retrieval eval`: score retrieval methods on judged queries against a loaded store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_core.exceptions import InvalidRequestError

if TYPE_CHECKING:
    from retrieval_core.evaluation.runner import MethodSpec


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

    p_long = sub.add_parser(
        "eval-long",
        help="where the answer gets to in long documents: chunk hit@1/5/20, MRR@20, document hit@5 and the "
        "answer in the packed context at 500 to 4,000 tokens, per method, on questions judged by span or "
        "section against a store loaded with the documents (docs/quality.md, 'Long documents')",
    )
    p_long.add_argument(
        "--store", required=True, help="a store loaded with the folder's documents (retrieval sync)"
    )
    p_long.add_argument(
        "folder",
        type=Path,
        help="a folder with queries.jsonl (_id, text) and judgments.jsonl (span or section)",
    )
    p_long.add_argument(
        "--method",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="also run a retrieve request's options",
    )
    p_long.add_argument("--queries", type=int, help="only the first N judged questions")
    p_long.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p_long.set_defaults(run=_eval_long)


def _eval(args: argparse.Namespace) -> int:
    from retrieval_core.container import get_service
    from retrieval_core.evaluation import beir
    from retrieval_core.evaluation.runner import DEFAULT_METHODS, evaluate_store

    service = get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    specs = [*DEFAULT_METHODS, *map(method_spec, args.method)]
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


def _eval_long(args: argparse.Namespace) -> int:
    from retrieval_core.container import get_service
    from retrieval_core.evaluation.long_documents import LONG_METHODS, run_long_evaluation

    service = get_service()
    service.get_store(args.store)  # a 404 naming the store before any question is embedded
    specs = [*LONG_METHODS, *map(method_spec, args.method)]
    try:
        report = run_long_evaluation(
            service, args.store, args.folder, specs, limit=args.queries, progress=not args.no_progress
        )
    except (OSError, ValueError) as exc:
        raise InvalidRequestError(str(exc)) from None
    print(f"{report.questions} questions\n\n{report.table}")
    return 0


def method_spec(text: str) -> MethodSpec:
    """A `--method NAME=JSON` argument as a method: a 422-like error naming the argument otherwise."""
    from retrieval_core.evaluation.runner import MethodSpec

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
    return MethodSpec(name, parsed)
