"""Custom::DatabaseSchema: the schema migrates when a deploy creates or updates this resource.

- Create and Update run every missing migration (db.migrations) in one transaction, within the
  function's remaining time: connecting is retried while a new RDS Proxy still refuses, and a run
  that would outlast the time fails and rolls back, asking for `retrieval migrate` from a host that
  reaches the database.
- Delete does nothing and does not connect: deleting the stack never drops the schema or its data.
- An Update that lowers SchemaVersion does nothing either: schemas only move forward, and older code
  runs on a newer schema. This is how CloudFormation rolls back a failed Update (the old properties
  sent to the new function), so the rollback cannot fail in turn.
- The PhysicalResourceId is always `retrieval-schema` (or the one CloudFormation sent): an Update
  answered with another id would be a replacement, followed by a Delete of the old one.
- Data: SchemaVersion, Applied (the versions applied now, comma-separated, "" when none) and
  PgvectorVersion; all three "" after an Update that did nothing, none after a Delete.

The same function runs the store index maintenance on a schedule (events/schedule-index-stores.json):
the HNSW indexes of the largest stores, and on an upgraded database the shared indexes, each built
concurrently within the function's time; what is left goes on at the next run. The same run then
deletes the audit rows older than AUDIT_RETENTION_DAYS.

See docs/migrations.md.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from aws_lambda_powertools.metrics import MetricUnit

from retrieval_core.clients.retry import Deadline
from retrieval_core.container import database_conninfo
from retrieval_core.db.migrations.roles import RoleSetup
from retrieval_core.db.migrations.runner import run_keyword_backfill, run_migrations
from retrieval_core.db.migrations.steps import SCHEMA_VERSION
from retrieval_core.db.store_indexes import IndexPolicy, maintain_database
from retrieval_core.exceptions import DatabaseUnavailableError
from retrieval_core.lambdas.custom_resource import Outcome, Request, answer
from retrieval_core.lambdas.setup import instrumented, powertools
from retrieval_core.lambdas.tracing import LambdaHandler
from retrieval_core.settings import get_settings

logger = logging.getLogger(__name__)

PHYSICAL_RESOURCE_ID = "retrieval-schema"
# Time kept back from the keyword backfill for answering CloudFormation.
_BACKFILL_MARGIN_S = 10.0
ON_TIMEOUT = (
    "the migration, one transaction, is rolled back when cut off: run `retrieval migrate` with "
    "DATABASE_URL set from a host that reaches the database (docs/migrations.md), then deploy again"
)


def migrate_schema(request: Request, time_budget_s: float) -> Outcome:
    """Create, Update: migrate within `time_budget_s`. Delete: nothing (the data stays)."""
    if request.request_type == "Delete":
        logger.info("Delete of %s: the database keeps its schema and data", request.logical_resource_id)
        return Outcome.success()
    if request.request_type == "Update" and is_downgrade(request):
        logger.info(
            "Update from SchemaVersion %s to %s: schemas only move forward; nothing to do",
            request.old_properties.get("SchemaVersion"),
            request.properties.get("SchemaVersion"),
        )
        return Outcome.success(dict.fromkeys(("SchemaVersion", "Applied", "PgvectorVersion"), ""))
    deadline = Deadline(time_budget_s)
    wanted = request.properties.get("SchemaVersion")
    if wanted is not None and str(wanted) != str(SCHEMA_VERSION):
        # Not an error: the code decides what to apply; the property only makes CloudFormation send Updates.
        logger.warning("SchemaVersion %s requested; this code migrates to %s", wanted, SCHEMA_VERSION)
    settings = get_settings()
    conninfo = database_conninfo(settings)  # may read a secret: counted in the budget
    result = run_migrations(
        conninfo,
        connect_timeout_s=settings.db_connect_timeout_s,
        time_budget_s=deadline.remaining_s(),
        roles=RoleSetup.from_settings(settings),
    )
    # Chunks written before migration 7 get their keyword rows in committed batches, as far as the time
    # left allows; stores not reached are searched with ts_rank_cd until the next deploy or
    # `retrieval migrate` finishes them (docs/migrations.md).
    # The schema is migrated either way: a backfill that cannot go on now fails nothing.
    try:
        run_keyword_backfill(
            conninfo,
            settings.db_connect_timeout_s,
            time_budget_s=(deadline.remaining_s() or 0.0) - _BACKFILL_MARGIN_S,
        )
    except (psycopg.Error, DatabaseUnavailableError) as exc:
        logger.warning(
            "keyword backfill stopped (%s); the next deploy or `retrieval migrate` goes on",
            type(exc).__name__,
        )
    return Outcome.success(
        {
            "SchemaVersion": str(result.schema_version),
            "Applied": ",".join(map(str, result.applied)),
            "PgvectorVersion": result.pgvector_version,
        }
    )


def is_downgrade(request: Request) -> bool:
    """True when an Update asks for a lower SchemaVersion than before (both integers)."""
    try:
        return int(request.properties["SchemaVersion"]) < int(request.old_properties["SchemaVersion"])
    except (KeyError, TypeError, ValueError):
        return False


# The scheduled event's input (template.yaml, MigrateFunction's IndexStores schedule).
INDEX_STORES_TASK = {"task": "index-stores"}
# Time kept back from index maintenance for logging its outcome.
_INDEX_MARGIN_S = 5.0


def index_stores(time_budget_s: float) -> dict[str, Any]:
    """The store index maintenance (db/store_indexes.py), then the audit trail's retention (db/audit.py),
    within `time_budget_s`; what they did, as a dict."""
    settings = get_settings()
    run = maintain_database(
        database_conninfo(settings),
        IndexPolicy.from_settings(settings),
        settings.db_connect_timeout_s,
        time_budget_s=time_budget_s,
        audit_retention_days=settings.audit_retention_days,
    )
    if run.left:
        logger.info("store index maintenance: %d steps left for the next run", len(run.left))
    if run.audit_rows_deleted:
        logger.info(
            "audit trail: %d rows older than %d days deleted",
            run.audit_rows_deleted,
            settings.audit_retention_days,
        )
    return {
        "busy": run.busy,
        "done": run.done,
        "failed": run.failed,
        "left": run.left,
        "auditRowsDeleted": run.audit_rows_deleted,
    }


def build_schema_handler() -> LambdaHandler:
    """The Lambda handler of Custom::DatabaseSchema, with Powertools logs (correlation id: RequestId), and of
    the schedule that runs the store index maintenance (INDEX_STORES_TASK)."""
    tools = powertools()

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event == INDEX_STORES_TASK:
            outcome = index_stores(context.get_remaining_time_in_millis() / 1000 - _INDEX_MARGIN_S)
            tools.metrics.add_metric(
                name="StoreIndexStepsFailed", unit=MetricUnit.Count, value=len(outcome["failed"])
            )
            return outcome
        summary = answer(
            event, context, migrate_schema, default_physical_id=PHYSICAL_RESOURCE_ID, on_timeout=ON_TIMEOUT
        )
        failed = summary["Status"] == "FAILED"
        tools.metrics.add_metric(name="SchemaMigrationFailed", unit=MetricUnit.Count, value=int(failed))
        return summary

    # It never embeds: only the database's credentials (boto3) are traced, when it reads any.
    return instrumented(invoke, tools, correlation_id_path="RequestId", embeds=False)
