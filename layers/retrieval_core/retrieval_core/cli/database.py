"""`retrieval migrate`, `index-stores` and `reweigh-keywords`: bring the schema, the stores' indexes and a
store's keyword weights up to date."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `migrate`, `index-stores` and `reweigh-keywords`."""
    p_migrate = sub.add_parser("migrate", help="apply pending schema migrations, then index-stores")
    p_migrate.set_defaults(run=_migrate)
    p_index = sub.add_parser(
        "index-stores",
        help="build the HNSW indexes of the largest stores and drop the others' (STORE_INDEXES_MAX), "
        "concurrently; on an upgraded database, build the shared indexes first; then delete the audit "
        "rows older than AUDIT_RETENTION_DAYS",
    )
    p_index.set_defaults(run=_index_stores)
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
    from retrieval_core.db.migrations.roles import RoleSetup
    from retrieval_core.db.migrations.runner import run_keyword_backfill, run_migrations
    from retrieval_core.settings import get_settings

    settings = get_settings()
    conninfo = database_conninfo(settings)
    with database_errors("migrating the schema"):
        result = run_migrations(
            conninfo, connect_timeout_s=settings.db_connect_timeout_s, roles=RoleSetup.from_settings(settings)
        )
    state = f"schema version {result.schema_version}, pgvector {result.pgvector_version}"
    if result.applied:
        print(f"applied migrations {', '.join(map(str, result.applied))}: {state}")
    else:
        print(f"schema is up to date: {state}")
    if result.unsafe_ids.count:
        print(
            f"{result.unsafe_ids.count} document ids hold a '.' or '..' segment, which no write accepts any "
            "more (a URL reads it as a step up the path); delete each with "
            "`retrieval delete --store STORE ID` or DELETE /api/v1/stores/{store}/documents?documentId=ID:"
        )
        for store, document_id in result.unsafe_ids.listed:
            print(f"  {store}: {document_id!r}")
    with database_errors("indexing older chunks for keyword search"):
        backfill = run_keyword_backfill(conninfo, settings.db_connect_timeout_s, time_budget_s=None)
    if backfill.chunks:
        print(f"keyword index: {backfill.chunks} older chunks indexed ({', '.join(backfill.stores_done)})")
    return _index_stores(args)


def _index_stores(args: argparse.Namespace) -> int:
    """Every index step the catalog asks for, with no time limit, each printed as it starts; then the
    audit trail's retention."""
    from retrieval_core.container import database_conninfo
    from retrieval_core.db.errors import database_errors
    from retrieval_core.db.store_indexes import IndexPolicy, maintain_database
    from retrieval_core.settings import get_settings

    settings = get_settings()
    with database_errors("maintaining the stores' indexes"):
        run = maintain_database(
            database_conninfo(settings),
            IndexPolicy.from_settings(settings),
            settings.db_connect_timeout_s,
            progress=lambda action: print(f"  {action} ...", flush=True),
            audit_retention_days=settings.audit_retention_days,
        )
    if run.audit_rows_deleted:
        days = settings.audit_retention_days
        print(f"audit trail: {run.audit_rows_deleted} rows older than {days} days deleted")
    if run.busy:
        print("store indexes: another run is under way; nothing done")
        return 0
    for failure in run.failed:
        print(f"store indexes: failed: {failure}")
    if run.done or run.failed:
        print(f"store indexes: {len(run.done)} steps done, {len(run.failed)} failed")
    return 1 if run.failed else 0


def _reweigh_keywords(args: argparse.Namespace) -> int:
    from retrieval_core.container import get_service
    from retrieval_core.db.keywords import reweigh_keywords

    service = get_service()  # starts the embedded database when DATABASE_URL is unset, and migrates
    store = service.get_store(args.store)
    with service.database.connection() as conn:
        done = reweigh_keywords(conn, store.id)
    print(f"reweighed {done.chunks} chunks of store {store.name}")
    return 0
