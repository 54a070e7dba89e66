"""S3 sync: objects put in or removed from the documents bucket become document writes and deletes.

The bucket's events reach the ingest queue (S3 event notifications, or EventBridge for a bucket the
stack does not own); `handler.IngestProcessor` reads them and writes through `DocumentService`.
See docs/s3-sync.md for the key layout, sidecars, ordering and failure handling.
"""
