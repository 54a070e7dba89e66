"""Errors the retrieval core raises. `api.errors` maps each one to an HTTP response.

Messages are written for the caller: they never contain a connection string, a
password, an API key or a stack trace.
"""

from __future__ import annotations

from typing import Any


class RetrievalError(Exception):
    """Base class: every error the service reports on purpose."""

    status_code = 500
    code = "internal_error"
    # Seconds the caller should wait before retrying; api.errors sends it as a Retry-After header.
    retry_after_s: int | None = None

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidRequestError(RetrievalError):
    """The request is well-formed JSON but asks for something we refuse."""

    status_code = 422
    code = "validation_error"

    @classmethod
    def for_field(
        cls, field: str, message: str, kind: str, summary: str | None = None
    ) -> InvalidRequestError:
        """A 422 about one field, shaped like a validation error: `{field}: {summary or message}`."""
        errors = [{"field": field, "message": message, "type": kind}]
        return cls(f"{field}: {summary or message}", {"errors": errors})


class DimensionMismatchError(InvalidRequestError):
    """A vector's length differs from the store's declared dimension."""

    code = "dimension_mismatch"

    def __init__(self, store: str, expected: int, actual: int, where: str) -> None:
        super().__init__(
            f"{where}: vector has {actual} dimensions but store '{store}' declares {expected}",
            {"store": store, "expectedDimension": expected, "actualDimension": actual},
        )


class StoreNotFoundError(RetrievalError):
    """No store matches the given name."""

    status_code = 404
    code = "store_not_found"

    def __init__(self, store: str) -> None:
        super().__init__(f"store '{store}' not found", {"store": store})


class EmbeddingModelMismatchError(RetrievalError):
    """The store was embedded with another model than the one this service runs."""

    status_code = 409
    code = "embedding_model_mismatch"

    def __init__(self, store: str, store_model: str, service_model: str) -> None:
        super().__init__(
            f"store '{store}' was embedded with '{store_model}' but this service embeds "
            f"queries with '{service_model}'; set EMBEDDING_MODEL to match",
            {"store": store, "storeModel": store_model, "serviceModel": service_model},
        )


class DatabaseUnavailableError(RetrievalError):
    """PostgreSQL could not be reached or failed while answering."""

    status_code = 500
    code = "database_unavailable"
    # An outage: a restarted or failed-over server takes seconds to accept connections again.
    retry_after_s: int | None = 5


class SchemaNotReadyError(RetrievalError):
    """The database has no retrieval schema, or an older one than this code needs."""

    status_code = 503
    code = "schema_not_ready"
    # A deploy migrates the schema within a minute or two of the functions' update.
    retry_after_s = 30

    def __init__(self, found: int | None, needed: int) -> None:
        where = "has no retrieval schema" if found is None else f"schema is at version {found}"
        super().__init__(
            f"the database {where}; this service needs version {needed}: run `retrieval migrate` "
            "(a deployed stack's MigrateFunction runs it on every deploy)",
            {"schemaVersion": found, "requiredSchemaVersion": needed},
        )


class SchemaObjectMissingError(SchemaNotReadyError):
    """A query met a table or column the database lacks (SQLSTATE 42P01, 42703): its version is unknown."""

    def __init__(self, needed: int) -> None:
        RetrievalError.__init__(
            self,
            f"the database lacks a table or column this service needs (schema version {needed}): run "
            "`retrieval migrate` (a deployed stack's MigrateFunction runs it on every deploy)",
            {"requiredSchemaVersion": needed},
        )


class MigrationError(DatabaseUnavailableError):
    """The schema could not be migrated. The message says what of the run stays applied: nothing, or the
    steps it committed before the failure (db/migrations/__init__.py).

    A DatabaseUnavailableError, so that whatever treats an unusable database (health, the service
    built on first use) treats this one alike.
    """

    code = "migration_failed"
    retry_after_s = None


class MigrationTimeoutError(MigrationError):
    """A migration run would have outlasted its time budget (a Lambda's remaining time); rolled back."""

    code = "migration_timeout"


class MigrationChecksumError(MigrationError):
    """An applied migration was edited since: its file's checksum differs from the recorded one."""

    code = "migration_checksum_mismatch"


class PgvectorVersionError(MigrationError):
    """The pgvector extension is missing, or older than the version this service needs."""

    code = "pgvector_too_old"


class CustomResourceEventError(InvalidRequestError):
    """A CloudFormation custom resource request that lacks a field or has one of the wrong type."""

    code = "invalid_custom_resource_request"


class DatabaseOverloadedError(RetrievalError):
    """Every database connection is busy (pool exhausted, or too many clients): retry shortly."""

    status_code = 503
    code = "overloaded"
    retry_after_s = 1


class EmbeddingProviderError(RetrievalError):
    """The embedding provider failed or answered with something unusable."""

    status_code = 502
    code = "embedding_provider_error"


class ReplyToNotAllowedError(RetrievalError):
    """A queued job names a reply queue that is not on the function's allow-list."""

    status_code = 403
    code = "reply_to_not_allowed"

    def __init__(self) -> None:
        super().__init__(
            "replyTo: not an allowed reply queue; the reply went to the results queue instead",
            {
                "errors": [
                    {"field": "replyTo", "message": "not an allowed reply queue", "type": "not_allowed"}
                ]
            },
        )


class ReplyDeliveryError(RetrievalError):
    """SQS refused or did not answer when a reply was sent. Transient: the job is retried."""

    status_code = 502
    code = "reply_delivery_failed"


class JobInProgressError(RetrievalError):
    """Another invocation is answering the same requestId right now. Transient: retried later."""

    status_code = 503
    code = "job_in_progress"


class S3EventError(InvalidRequestError):
    """An ingest queue message that is not an S3 event we can read. Retried, then dead-lettered."""

    code = "malformed_s3_event"


class SidecarError(InvalidRequestError):
    """A `.metadata.json` sidecar whose content is not metadata we can apply."""

    code = "invalid_sidecar"

    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot read this metadata sidecar: {reason}", {"reason": reason})


class ObjectTooLargeError(InvalidRequestError):
    """An S3 object larger than the ingest function reads (S3_INGEST_MAX_BYTES)."""

    status_code = 413
    code = "object_too_large"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"object of {size} bytes is larger than the {limit} bytes ingested",
            {"sizeBytes": size, "maxBytes": limit},
        )


class ObjectReadError(RetrievalError):
    """S3 refused or did not answer when an object was read. Transient: the event is retried."""

    status_code = 502
    code = "s3_read_failed"


class ConfigurationError(RetrievalError):
    """A setting is missing or contradicts another."""

    status_code = 500
    code = "configuration_error"


class CacheUnavailableError(RetrievalError):
    """The cache could not be read or written. Callers fail open: the request is served uncached."""

    status_code = 503
    code = "cache_unavailable"


class RerankerUnavailableError(RetrievalError):
    """A reranker failed, timed out or answered with something unusable.

    Reranking is optional: callers catch this, keep the vector order and report a warning.
    """

    status_code = 502
    code = "reranker_unavailable"


class UpstreamError(RetrievalError):
    """An upstream API (e.g. Gemini) failed or answered with something unusable."""

    status_code = 502
    code = "upstream_error"


class UpstreamAuthError(UpstreamError):
    """An upstream API rejected our credentials. The message never quotes them."""

    code = "upstream_auth_rejected"


class UpstreamUnavailableError(RetrievalError):
    """An upstream API stayed rate-limited or unavailable through every retry. Transient."""

    status_code = 503
    code = "upstream_unavailable"

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, retry_after_s: int) -> None:
        super().__init__(message, details)
        self.retry_after_s = retry_after_s


class FilterSyntaxError(InvalidRequestError):
    """A metadata filter expression is malformed or over a limit; `details` names the position."""

    code = "invalid_metadata_filter"

    def __init__(self, position: int, expected: str, found: str) -> None:
        super().__init__(
            f"metadataFilter: expected {expected} at position {position}, found {found}",
            {"field": "metadataFilter", "position": position, "expected": expected, "found": found},
        )


class FilterTreeError(InvalidRequestError):
    """A JSON filter tree is malformed or over a limit; `details.field` is the path to the bad part."""

    code = "invalid_metadata_filter"

    def __init__(self, path: str, expected: str, found: str) -> None:
        super().__init__(
            f"{path}: expected {expected}, found {found}",
            {"field": path, "expected": expected, "found": found},
        )


class FilterKeyNotAllowedError(InvalidRequestError):
    """A metadata filter (or, over MCP, metadata to store) uses a key outside the allowed ones.

    `field` names the request field: metadataFilter over HTTP, filter or metadata for MCP tools.
    """

    code = "metadata_key_not_allowed"

    def __init__(self, key: str, allowed: frozenset[str], field: str = "metadataFilter") -> None:
        super().__init__(
            f"{field}: key '{key}' is not allowed; allowed keys: {', '.join(sorted(allowed))}",
            {"field": field, "key": key, "allowedKeys": sorted(allowed)},
        )


class AuthenticationError(RetrievalError):
    """The request carries no valid credential. One message for every cause, so it reveals nothing."""

    status_code = 401
    code = "unauthorized"

    def __init__(self) -> None:
        super().__init__("missing or invalid API key")


class AuthenticationUnavailableError(RetrievalError):
    """The configured API keys could not be read (Secrets Manager failed). Requests are refused."""

    status_code = 503
    code = "authentication_unavailable"


class RequestTooLargeError(RetrievalError):
    """The request body is larger than the service accepts."""

    status_code = 413
    code = "request_too_large"

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(f"request body is larger than {limit_bytes} bytes", {"maxBytes": limit_bytes})


class DocumentTooLargeError(RequestTooLargeError):
    """A documents PUT whose body is over DOCUMENTS_MAX_BODY_BYTES; larger files go through S3."""

    def __init__(self, limit_bytes: int, largest_file_bytes: int) -> None:
        RetrievalError.__init__(
            self,
            f"request body is larger than {limit_bytes} bytes (a file of at most {largest_file_bytes} bytes "
            "fits, base64 in JSON); upload larger files to the documents S3 bucket instead",
            {"maxBytes": limit_bytes, "largestFileBytes": largest_file_bytes},
        )


class ForbiddenError(RetrievalError):
    """The caller is known but its grant lacks the scope the operation needs."""

    status_code = 403
    code = "forbidden"

    def __init__(self, scope: str) -> None:
        super().__init__(f"this credential lacks the '{scope}' scope needed here", {"requiredScope": scope})


class ConflictError(RetrievalError):
    """The request contradicts the current state: a field that cannot change, a name already taken."""

    status_code = 409
    code = "conflict"

    @classmethod
    def for_field(cls, field: str, message: str) -> ConflictError:
        """A 409 about one field: `{field}: {message}`."""
        return cls(f"{field}: {message}", {"field": field})


class DocumentNotFoundError(RetrievalError):
    """No document with that id in the store."""

    status_code = 404
    code = "document_not_found"

    def __init__(self, store: str, document_id: str) -> None:
        super().__init__(
            f"document '{document_id}' not found in store '{store}'",
            {"store": store, "documentId": document_id},
        )


class UnsupportedContentTypeError(RetrievalError):
    """A document whose format no parser reads; the message names the ones we read."""

    status_code = 415
    code = "unsupported_content_type"

    def __init__(self, content_type: str, supported: tuple[str, ...]) -> None:
        super().__init__(
            f"cannot read content of type '{content_type}'; supported: {', '.join(supported)}",
            {"contentType": content_type, "supported": list(supported)},
        )


class DocumentParseError(InvalidRequestError):
    """A document in a supported format that cannot be read: corrupt, encrypted, not what it claims."""

    code = "unreadable_document"

    def __init__(self, content_type: str, reason: str) -> None:
        super().__init__(
            f"cannot read this {content_type} document: {reason}",
            {"contentType": content_type, "reason": reason},
        )


class EmptyDocumentError(InvalidRequestError):
    """A document that yields no text to index."""

    code = "empty_document"

    def __init__(self, content_type: str) -> None:
        super().__init__(f"the {content_type} document holds no text to index", {"contentType": content_type})


class SourceReadError(RetrievalError):
    """A file or S3 object that `retrieval sync` or `ingest` could not list or read."""

    status_code = 502
    code = "source_unreadable"


# Issue 19: rate limits
class RateLimitedError(RetrievalError):
    """The credential sent more requests than its rate limit allows in the current window."""

    status_code = 429
    code = "rate_limited"

    def __init__(self, requests: int, window_s: int, retry_after_s: int) -> None:
        super().__init__(
            f"rate limit of {requests} requests per {window_s} s reached for this credential; "
            f"retry in {retry_after_s} s",
            {"limit": requests, "windowSeconds": window_s, "retryAfterSeconds": retry_after_s},
        )
        self.retry_after_s = retry_after_s


# Issue 19: requests and HTTP


class BackendNotConfiguredError(RetrievalError):
    """A backend the request asks for that this deployment has not configured (no Gemini API key)."""

    status_code = 501
    code = "backend_not_configured"


class BadRequestError(RetrievalError):
    """A request that is not HTTP we can read: a malformed Lambda event (no requestContext, bad base64)."""

    status_code = 400
    code = "bad_request"


class RequestTimeoutError(RetrievalError):
    """The body did not arrive within the read deadline (REQUEST_BODY_TIMEOUT_S)."""

    status_code = 408
    code = "request_timeout"


# Issue 19: cost and cause


class QueryTimeoutError(RetrievalError):
    """A search ran into its statement timeout (SQLSTATE 57014). Under load, a retry may succeed."""

    status_code = 503
    code = "query_timeout"
    retry_after_s = 1


class DatabaseMisconfiguredError(DatabaseUnavailableError):
    """PostgreSQL refused this service's credentials or database (SQLSTATE classes 28, 3D, or 42501).

    Retrying does not help: an operator must fix DATABASE_URL or the credentials secret.
    """

    status_code = 500
    code = "database_misconfigured"
    retry_after_s = None


class DatabaseStorageFullError(DatabaseUnavailableError):
    """PostgreSQL is out of disk (SQLSTATE 53100). 507: the request was fine, the server cannot store."""

    status_code = 507
    code = "database_storage_full"
    retry_after_s = None


class UpstreamTimeoutError(RetrievalError):
    """An upstream service (embedding provider, Gemini) did not answer within its timeout."""

    status_code = 504
    code = "upstream_timeout"


# Issue 20: up to 100 results


class ResponseTooLargeError(RetrievalError):
    """An answer larger than the message or response that must carry it (reply_size.py)."""

    status_code = 413
    code = "response_too_large"

    def __init__(self, size_bytes: int, limit_bytes: int, room: str, elsewhere: str | None = None) -> None:
        """`room` completes "over the N bytes ..."; `elsewhere` names where the same request would fit."""
        remedy = "ask for fewer results (similarityTopK, rerank.topK, topK) or leave out returnFormatted"
        super().__init__(
            f"the answer is {size_bytes} bytes, over the {limit_bytes} bytes {room}; {remedy}"
            + (f", or send the request alone to {elsewhere}" if elsewhere else ""),
            {"sizeBytes": size_bytes, "maxBytes": limit_bytes},
        )


class UnusableSourceError(InvalidRequestError):
    """An attached store's `source` names a relation or column that is missing, unreadable or of a type
    the service cannot search; nothing was created."""

    code = "unusable_source"


class ReadOnlyStoreError(ConflictError):
    """The store is backed by a table the service does not own: the documents API does not write to it."""

    code = "read_only_store"

    def __init__(self, store: str, relation: str) -> None:
        super().__init__(
            f"store '{store}' is attached to {relation}, a table the service only reads; write to that "
            "table with whatever fills it (the search sees its rows at once)",
            {"store": store, "source": relation},
        )


class VectorQueriesOnlyError(ConflictError):
    """The attached table's vectors were not made by this service's embedding model."""

    code = "vector_queries_only"

    def __init__(
        self, store: str, dimension: int, model: str, service_model: str, service_dimension: int
    ) -> None:
        super().__init__(
            f"store '{store}' holds {dimension}-dimensional vectors made by '{model}', and this service "
            f"embeds text with '{service_model}' ({service_dimension} dimensions): search it with a "
            "precomputed vector (POST /api/v1/chunks/similarity-search)",
            {"store": store, "dimension": dimension, "storeModel": model, "serviceModel": service_model},
        )


class SourceUnavailableError(ConflictError):
    """An attached store's table cannot be read as it was attached (gone, changed, or not readable)."""

    code = "source_unavailable"

    def __init__(self, store: str, relation: str, reason: str) -> None:
        super().__init__(
            f"store '{store}' is attached to {relation}, which {reason}",
            {"store": store, "source": relation},
        )


class ExactScanRefusedError(ConflictError):
    """No index serves cosine distance on the attached table, and the rows to scan exceed the cap."""

    code = "exact_scan_refused"

    def __init__(self, store: str, max_rows: int, reason: str) -> None:
        super().__init__(
            f"store '{store}': {reason}, so it is searched by an exact scan, capped at {max_rows:,} rows; "
            "more rows than that match this request. Narrow it with a metadata filter or docIds, or "
            f"create an HNSW index with vector_cosine_ops and POST /api/v1/stores/{store}/refresh",
            {"store": store, "maxRows": max_rows, "reason": reason},
        )
