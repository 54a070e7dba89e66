"""`retrieval`: ingest, delete, migrate, list stores, make or hash an API key, and serve locally."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .exceptions import RetrievalError


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `retrieval` command."""
    parser = argparse.ArgumentParser(prog="retrieval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p_ingest = sub.add_parser("ingest", help="chunk, embed and store .jsonl (BEIR), .md and .txt files")
    p_ingest.add_argument("path", type=Path, help="a file or a folder")
    p_ingest.add_argument("--store", required=True, help="store name (created if missing)")
    p_ingest.add_argument("--display-name", help="display name of a new store")
    p_ingest.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p_ingest.add_argument(
        "--storage",
        choices=("vector", "halfvec"),
        default="vector",
        help="index of a new store: 4-byte floats (vector) or 2-byte floats (halfvec, half the size)",
    )

    p_delete = sub.add_parser("delete", help="delete documents and their chunks")
    p_delete.add_argument("--store", required=True)
    p_delete.add_argument("doc_ids", nargs="+", metavar="DOC_ID")

    p_drop = sub.add_parser("drop-store", help="delete a store with all its documents and chunks")
    p_drop.add_argument("--store", required=True)

    sub.add_parser("migrate", help="apply pending schema migrations")
    sub.add_parser("stores", help="list stores")

    p_serve = sub.add_parser("serve", help="run the HTTP API locally")
    p_serve.add_argument("--host", default="127.0.0.1")
    p_serve.add_argument("--port", type=int, default=8000)
    p_serve.add_argument("--no-sample", action="store_true", help="do not load the sample corpus")

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

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _run(args)
    except RetrievalError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from . import ingest
    from .runtime import get_service
    from .settings import get_settings

    settings = get_settings()
    if args.command == "hash-api-key":
        return _hash_api_key()
    if args.command == "make-api-key":
        return _make_api_key(args.name, args.stores, args.scopes)
    if args.command == "serve":
        return _serve(args.host, args.port, load_sample=not args.no_sample)
    service = get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    if args.command == "migrate":
        print("schema is up to date")
    elif args.command == "stores":
        from .db import repository

        with service.database.connection() as conn:
            for store in repository.list_stores(conn):
                chunks = repository.count_chunks(conn, store)
                columns = (store.name, store.display_name, store.embedding_model, store.dimension)
                print("\t".join(map(str, columns)) + f"\t{chunks} chunks")
    elif args.command == "ingest":
        store = ingest.ensure_store(
            service.database, service.embedder, args.store, args.display_name, args.storage
        )
        report = ingest.ingest_documents(
            service.database,
            service.embedder,
            store,
            ingest.read_documents(args.path),
            settings.chunk_size,
            settings.chunk_overlap,
            progress=not args.no_progress,
            on_version=service.publish_store_version,
        )
        print(
            f"{report.documents_written} documents written ({report.chunks_written} chunks), "
            f"{report.documents_unchanged} unchanged, {report.documents_empty} empty"
        )
    elif args.command == "drop-store":
        from .db import repository
        from .service import BACKEND

        store = service.get_store(args.store)
        with service.database.connection() as conn:
            repository.drop_store(conn, store)
        if service.cache is not None:
            # A store created later under this name gets a new version; until then nothing may
            # trust the cached version of the dropped one.
            service.cache.forget_version(BACKEND, store.name)
        print(f"dropped store {store.name}")
    elif args.command == "delete":
        store = service.get_store(args.store)
        deleted = ingest.delete_documents(
            service.database, store, args.doc_ids, on_version=service.publish_store_version
        )
        missing = sorted(set(args.doc_ids) - set(deleted))
        print(f"deleted {len(deleted)} documents" + (f"; not found: {', '.join(missing)}" if missing else ""))
    return 0


def _hash_api_key() -> int:
    # Read, never taken as an argument: arguments end up in shell history and `ps`.
    import getpass

    from .api.keys import hash_api_key

    key = getpass.getpass("API key: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\r\n")
    if not key:
        print("error: no API key given on standard input", file=sys.stderr)
        return 2
    print(hash_api_key(key))
    return 0


def _make_api_key(name: str, stores: str, scopes: str) -> int:
    import json
    import secrets

    from .api.keys import hash_api_key, parse_api_keys

    key = "rk_" + secrets.token_urlsafe(32)
    entry = {
        "name": name,
        "sha256": hash_api_key(key),
        "stores": [s.strip() for s in stores.split(",") if s.strip()],
        "scopes": [s.strip() for s in scopes.split(",") if s.strip()],
    }
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

    from .api.app import create_app
    from .runtime import get_service
    from .sample import load_sample_corpus

    service = get_service()
    if load_sample:
        load_sample_corpus(service)
    uvicorn.run(create_app(), host=host, port=port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
