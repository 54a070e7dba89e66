"""`retrieval stores`: list stores, create one, attach a table or view, refresh an attached store."""

from __future__ import annotations

import argparse
from itertools import islice
from typing import TYPE_CHECKING, Any

from retrieval_core.db.attached_source import DISTANCES, PRESETS

if TYPE_CHECKING:
    from retrieval_core.documents.models import StoreInfo


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `stores` with its `list`, `create`, `attach` and `refresh` subcommands (alone: `list`)."""
    p_stores = sub.add_parser(
        "stores", help="list stores (stores list), create one (stores create), attach a table (stores attach)"
    )
    _add_list_arguments(p_stores)
    p_stores.set_defaults(run=_list_stores)
    stores_sub = p_stores.add_subparsers(dest="stores_command")
    p_list = stores_sub.add_parser(
        "list", help="list stores with their chunk counts, in name order (the same as `stores` alone)"
    )
    # Unset here unless given, so that `stores --prefix a list` keeps the prefix given before `list`.
    _add_list_arguments(p_list, argparse.SUPPRESS)
    p_create = stores_sub.add_parser("create", help="create a store (or check that it has this definition)")
    p_create.add_argument("name", help="store name")
    add_store_arguments(p_create)
    p_create.set_defaults(run=_create_store)
    p_attach = stores_sub.add_parser(
        "attach",
        help="create a store that searches an existing table or view, read-only unless --writable "
        "(docs/existing-tables.md)",
    )
    _add_attach_arguments(p_attach)
    p_attach.set_defaults(run=_attach_store)
    p_refresh = stores_sub.add_parser(
        "refresh", help="inspect an attached store's table again (indexes, rows) and drop its cached answers"
    )
    p_refresh.add_argument("name", help="store name")
    p_refresh.set_defaults(run=_refresh_store)


def _add_list_arguments(command: argparse.ArgumentParser, unset: Any = None) -> None:
    command.add_argument(
        "--prefix", default="" if unset is None else unset, help="only stores whose name starts with this"
    )
    command.add_argument(
        "--limit",
        type=_positive,
        default=unset,
        help="print at most this many stores (default: every one, read page by page)",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_store_arguments(command: argparse.ArgumentParser) -> None:
    """The options that define a new store: display name, storage, text search configuration."""
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


def _add_attach_arguments(p_attach: argparse.ArgumentParser) -> None:
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


def _list_stores(args: argparse.Namespace) -> int:
    """`stores` and `stores list`: one line per store with what it holds, printed a page at a time."""
    from retrieval_core.container import get_document_service, get_service
    from retrieval_core.documents.cursors import MAX_PAGE

    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    page = min(args.limit, MAX_PAGE) if args.limit is not None else MAX_PAGE
    stores = get_document_service().every_store(args.prefix, page=page)
    for info in islice(stores, args.limit):
        columns = (info.name, info.display_name, info.embedding_model, info.dimension)
        if info.source is not None:  # rows as last inspected: counting a team's table may be slow
            held = f"{info.source['rows']} rows of {info.source['table']} (attached)"
        else:
            held = f"{info.chunk_count} chunks"
        print("\t".join(map(str, columns)) + f"\t{held}", flush=True)
    return 0


def _create_store(args: argparse.Namespace) -> int:
    """`stores create`: 0 when created or already so defined (a different definition is an error)."""
    from retrieval_core.cli.actor import cli_actor
    from retrieval_core.container import get_document_service, get_service
    from retrieval_core.documents.models import StoreDefinition

    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    definition = StoreDefinition(
        display_name=args.display_name, storage=args.storage, text_search=args.text_search
    )
    info, created = get_document_service().put_store(args.name, definition, actor=cli_actor())
    state = "created" if created else "exists"
    print(f"{state}: store '{info.name}' ({info.storage}, text search {info.text_search})")
    return 0


def _attach_store(args: argparse.Namespace) -> int:
    """`stores attach`: print the store's source and what it supports."""
    from retrieval_core.backends.attached.definition import source_request
    from retrieval_core.cli.actor import cli_actor
    from retrieval_core.container import get_document_service, get_service
    from retrieval_core.documents.models import StoreDefinition

    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
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
    info, created = get_document_service().put_store(args.name, definition, actor=cli_actor())
    _print_source(info, "attached" if created else "exists")
    return 0


def _refresh_store(args: argparse.Namespace) -> int:
    """`stores refresh`: print the store's source and what it supports, as inspected now."""
    from retrieval_core.cli.actor import cli_actor
    from retrieval_core.container import get_document_service, get_service

    get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    _print_source(get_document_service().refresh_store(args.name, actor=cli_actor()), "refreshed")
    return 0


def _print_source(info: StoreInfo, state: str) -> None:
    assert info.source is not None and info.features is not None
    print(f"{state}: store '{info.name}' reads {info.source['table']} ({info.source['rows']} rows)")
    for feature in info.features:
        print(f"  {'yes' if feature['supported'] else 'no '}  {feature['feature']}: {feature['detail']}")
