"""Lambda: S3 events of the documents bucket from the ingest queue, written as documents (docs/s3-sync.md)."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.lambdas.s3_ingest import build_ingest_handler

    handler = build_ingest_handler()
