"""`retrieval serve`: the HTTP API on this machine, with the sample corpus loaded."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval_core.settings import Settings


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `serve`."""
    p_serve = sub.add_parser("serve", help="run the HTTP API locally")
    p_serve.add_argument("--host", default="127.0.0.1")
    p_serve.add_argument("--port", type=int, default=8000)
    p_serve.add_argument("--no-sample", action="store_true", help="do not load the sample corpus")
    p_serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from retrieval_core.api.app import create_app
    from retrieval_core.container import get_service
    from retrieval_core.documents.sample import load_sample_corpus
    from retrieval_core.settings import get_settings

    _exit_on_sigterm()
    service = get_service()
    if get_settings().embedding_provider == "local":
        # Load the model now rather than on the first request (health reports it loaded).
        service.embedder.embed(["warm-up"], "query")
    if not args.no_sample:
        load_sample_corpus(service)
    _index_stores_in_background(get_settings())
    # log_config None: uvicorn's own lines (access log included) go through the root handler and its filter.
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="info", log_config=None)
    return 0


def _exit_on_sigterm() -> None:
    """SIGTERM (systemd, containers, CI time-outs) ends the process through Python's exit, as Ctrl-C does,
    so that the embedded PostgreSQL is stopped on the way out (atexit). uvicorn shuts down gracefully on
    SIGTERM, then raises it again for the handler it found: Python's default, which kills the process
    without running atexit, left the database running."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def _index_stores_in_background(settings: Settings) -> None:
    """Run the store index maintenance every STORE_INDEX_INTERVAL_S seconds (0: never) in a daemon thread, as
    the scheduled function does on AWS: large stores get their HNSW index without a request waiting for it,
    and audit rows older than AUDIT_RETENTION_DAYS are deleted."""
    interval_s = settings.store_index_interval_s
    if interval_s <= 0:
        return
    import logging
    import threading

    from retrieval_core.container import database_conninfo
    from retrieval_core.db.store_indexes import IndexPolicy, maintain_database

    conninfo = database_conninfo(settings)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval_s):
            try:
                maintain_database(
                    conninfo,
                    IndexPolicy.from_settings(settings),
                    settings.db_connect_timeout_s,
                    audit_retention_days=settings.audit_retention_days,
                )
            except Exception:
                logging.getLogger(__name__).exception("store index maintenance failed")

    threading.Thread(target=loop, name="store-indexes", daemon=True).start()
