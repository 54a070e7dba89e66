"""Lambda: the Custom::DatabaseSchema resource, which migrates the schema on deploy (docs/migrations.md)."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.lambdas.schema_resource import build_schema_handler

    handler = build_schema_handler()
