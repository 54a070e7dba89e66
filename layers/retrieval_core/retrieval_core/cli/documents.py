"""`retrieval ingest`, `sync`, `documents`, `delete` and `drop-store`: write a store's documents, see how
their writes went, remove them."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from retrieval_core.cli.stores import add_store_arguments
from retrieval_core.exceptions import InvalidRequestError, RetrievalError

if TYPE_CHECKING:
    from retrieval_core.documents.sync_report import Report
    from retrieval_core.parsers.tables import TableOptions


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `ingest`, `sync`, `delete` and `drop-store`."""
    p_ingest = sub.add_parser(
        "ingest",
        help="add or update the files of a folder, an s3:// prefix or one file (PDF, HTML, DOCX, Markdown, "
        "text, CSV, JSONL); never deletes",
    )
    _add_load_arguments(p_ingest)
    p_ingest.add_argument(
        "--id",
        dest="source_id",
        help="id of a single file (default: its path relative to the current directory)",
    )
    p_ingest.set_defaults(run=_load)

    p_sync = sub.add_parser(
        "sync",
        help="make a store hold the files of a folder or an s3:// prefix: add, update, with --prune delete",
    )
    _add_load_arguments(p_sync)
    p_sync.add_argument(
        "--prune",
        action="store_true",
        help="also delete stored documents whose source is not in the tree, whatever wrote them "
        "(with --prefix: only ids starting with it)",
    )
    p_sync.set_defaults(run=_load)

    p_status = sub.add_parser(
        "documents",
        help="a store's ingestion counts, and the sources whose last write failed (or was skipped, or ok)",
    )
    p_status.add_argument("--store", required=True)
    p_status.add_argument(
        "--status", choices=("failed", "skipped", "ok"), default="failed", help="which sources to list"
    )
    p_status.add_argument("--prefix", default="", help="only ids starting with this")
    p_status.add_argument("--limit", type=int, default=100, help="list at most this many (1 to 1000)")
    p_status.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p_status.set_defaults(run=_statuses)

    p_delete = sub.add_parser("delete", help="delete documents, or every document of a source, by id")
    p_delete.add_argument("--store", required=True)
    p_delete.add_argument("doc_ids", nargs="+", metavar="ID", help="a document id or a source id")
    p_delete.set_defaults(run=_delete)

    p_drop = sub.add_parser("drop-store", help="delete a store with all its documents and chunks")
    p_drop.add_argument("--store", required=True)
    p_drop.set_defaults(run=_drop_store)


def _add_load_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("path", help="a folder, s3://bucket/prefix, or (ingest only) a file")
    command.add_argument("--store", required=True, help="store name (created by the first file written)")
    command.add_argument("--prefix", default="", help="put this before every id, e.g. 'handbook/'")
    command.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    command.add_argument("--json", action="store_true", help="print one JSON report instead of lines")
    command.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    tables = command.add_argument_group(
        "CSV and JSON Lines columns",
        "by default the column text, content or body is the text, else every column as 'column: value' "
        "lines; a sidecar's tableOptions win over these for its file (docs/formats.md, 'Tables')",
    )
    tables.add_argument(
        "--text-column", action="append", default=[], metavar="NAME", help="a column of the text (repeat)"
    )
    tables.add_argument("--id-column", metavar="NAME", help="the column of each record's id")
    tables.add_argument("--title-column", metavar="NAME", help="the column of each record's title")
    tables.add_argument(
        "--metadata-column",
        action="append",
        metavar="NAME",
        help="a column kept as metadata (repeat; default: every other column, within the metadata limits)",
    )
    add_store_arguments(command)


def table_options(args: argparse.Namespace) -> TableOptions:
    """The TableOptions of the --text-column, --id-column, --title-column and --metadata-column flags."""
    from retrieval_core.parsers.tables import TableOptions

    metadata = args.metadata_column
    return TableOptions(
        tuple(args.text_column), args.id_column, args.title_column, tuple(metadata) if metadata else None
    )


def _load(args: argparse.Namespace) -> int:
    """`ingest` and `sync`: 0 when every file was written or skipped, 1 when any failed."""
    from retrieval_core.cli.actor import cli_actor
    from retrieval_core.container import get_document_service, get_service
    from retrieval_core.documents import sync
    from retrieval_core.documents.file_sources import FolderTree, open_tree
    from retrieval_core.documents.models import StoreDefinition
    from retrieval_core.documents.sync_report import Report

    table = table_options(args)  # wrong options are refused before the database starts
    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    prune = args.command == "sync" and args.prune
    tree = open_tree(args.path, args.prefix, getattr(args, "source_id", None))
    if args.command == "sync" and not args.path.startswith("s3://") and not isinstance(tree, FolderTree):
        raise InvalidRequestError(
            f"sync mirrors a folder or an s3:// prefix; {args.path} is a file (use ingest)"
        )
    documents = get_document_service()
    progress = not args.no_progress
    plan = sync.plan_sync(documents, args.store, tree, prune, args.prefix, progress=progress, table=table)
    if args.dry_run:
        report = sync.planned_report(plan, tree, documents, args.store, tree.root, prune, progress, table)
    else:
        report = Report(args.store, tree.root, prune=prune)
        create = StoreDefinition(
            display_name=args.display_name, storage=args.storage, text_search=args.text_search
        )
        try:
            sync.apply_plan(
                plan, tree, documents, report, create, progress=progress, actor=cli_actor(), table=table
            )
        except RetrievalError:
            _print_report(report, args.json)  # what was written before the abort stays written
            raise
    if args.command == "sync" and not prune:
        report.not_in_tree = list(plan.gone)
    _print_report(report, args.json)
    return 1 if report.failed else 0


def _print_report(report: Report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        print("\n".join(report.lines()))


def _statuses(args: argparse.Namespace) -> int:
    """`documents`: the store's counts, then each listed source's outcome; 0 unless a listed one failed."""
    from dataclasses import asdict

    from retrieval_core.container import get_document_service, get_service
    from retrieval_core.db.document_status import COUNTED

    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    rows, more, counts = get_document_service().document_statuses(
        args.store, args.status, args.prefix, args.limit
    )
    if args.json:
        body = {
            "store": args.store,
            "statistics": asdict(counts),
            "documents": [asdict(r) for r in rows],
            "more": more is not None,
        }
        print(json.dumps(body, ensure_ascii=False, indent=2, default=str))
    else:
        for r in rows:
            detail = r.change if r.outcome == "ok" else f"[{r.code}] {r.message}"
            print(f"{r.outcome:<8} {r.document_id}: {detail} ({r.at:%Y-%m-%d %H:%M:%S %Z}, {r.written_by})")
        if more is not None:
            print(f"... more: --limit {args.limit * 2}, or --prefix")
        counted = ", ".join(f"{getattr(counts, name)} {name}" for name in COUNTED)
        now = f"{counts.now_ok} ok, {counts.now_failed} failed, {counts.now_skipped} skipped"
        print(f"store '{args.store}': {counted} since {counts.since or 'creation'}; last outcome now: {now}")
    return 1 if args.status == "failed" and rows else 0


def _delete(args: argparse.Namespace) -> int:
    """`delete`: 0 when something was deleted, 1 when none of the ids was found."""
    from retrieval_core.cli.actor import cli_actor
    from retrieval_core.container import get_document_service, get_service

    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    store: str = args.store
    documents = get_document_service()
    deleted: list[str] = []
    missing: list[str] = []
    for source_id in dict.fromkeys(args.doc_ids):
        removed = documents.delete_source(store, source_id, actor=cli_actor())
        deleted += removed
        if not removed:
            missing.append(source_id)
    line = f"deleted {len(deleted)} document{'' if len(deleted) == 1 else 's'} from store '{store}'"
    if deleted:
        line += f": {', '.join(deleted)}"
    print(line + (f"; not found: {', '.join(missing)}" if missing else ""))
    return 0 if deleted else 1


def _drop_store(args: argparse.Namespace) -> int:
    """`drop-store`: delete the store's row, documents and chunks."""
    from retrieval_core.cli.actor import cli_actor
    from retrieval_core.container import get_document_service, get_service

    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    get_document_service().delete_store(args.store, actor=cli_actor())
    print(f"dropped store {args.store}")
    return 0
