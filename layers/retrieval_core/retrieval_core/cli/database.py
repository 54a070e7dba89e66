"""`retrieval migrate` and `reweigh-keywords`: bring the schema and a store's keyword weights up to date."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `migrate` and `reweigh-keywords`."""
    p_migrate = sub.add_parser("migrate", help="apply pending schema migrations")
    p_migrate.set_defaults(run=_migrate)
    p_reweigh = sub.add_parser(
        "reweigh-keywords",
        help="recompute a store's BM25 term weights with its current average chunk length",
    )
    p_reweigh.add_argument("--store", required=True)
    p_reweigh.set_defaults(run=_reweigh_keywords)


def _migrate(args: argparse.Namespace) -> int:
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


def _reweigh_keywords(args: argparse.Namespace) -> int:
    from retrieval_core.container import get_service
    from retrieval_core.db.keywords import reweigh_keywords

    service = get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    store = service.get_store(args.store)
    with service.database.connection() as conn:
        done = reweigh_keywords(conn, store.id)
    if done.version is not None:
        service.publish_store_version(store, done.version)
    print(f"reweighed {done.chunks} chunks of store {store.name}")
    return 0
