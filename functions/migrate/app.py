"""Lambda: the Custom::DatabaseSchema resource, which migrates the schema on deploy (docs/migrations.md)."""

from retrieval_core.schema_resource import build_schema_handler

handler = build_schema_handler()
