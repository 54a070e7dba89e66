"""Errors the retrieval core raises: the base classes and the errors every part shares. `api.errors`
maps each one to an HTTP response.

A package's own errors live beside it in its `exceptions` module (filters, backends.attached, parsers,
documents, lambdas), built on the classes here. The Errors table of docs/api.md is the one list of every
code with its status; tests/unit/test_errors_table.py checks it against every RetrievalError subclass
of the package, wherever it is defined.

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


class DatabaseOverloadedError(RetrievalError):
    """Every database connection is busy (pool exhausted, or too many clients): retry shortly."""

    status_code = 503
    code = "overloaded"
    retry_after_s = 1


class DatabaseResourcesExhaustedError(RetrievalError):
    """PostgreSQL ran out of a resource while answering (SQLSTATE 53000, 53200, 53400): most often its
    lock table ("out of shared memory": max_locks_per_transaction). Not an outage: the server is up."""

    status_code = 503
    code = "database_resources_exhausted"
    # Locks and memory come back as other transactions end.
    retry_after_s = 1


class DatabaseLockTableFullError(DatabaseResourcesExhaustedError):
    """PostgreSQL's lock table is full ("out of shared memory", SQLSTATE 53200 with the hint naming
    max_locks_per_transaction): too many locks held at once across the server's transactions."""

    code = "database_lock_table_full"


class DatabaseStatementError(DatabaseUnavailableError):
    """PostgreSQL answered, but refused a statement for a reason no other error names (the SQLSTATE
    says which). Not an outage: retrying the same request most likely fails the same way."""

    code = "database_error"
    retry_after_s = None


class TransactionConflictError(RetrievalError):
    """PostgreSQL rolled a write back to serialise it with a concurrent one (SQLSTATE 40001), and the
    retries within the request's deadline ran out."""

    status_code = 409
    code = "write_conflict"
    retry_after_s = 1


class DeadlockError(TransactionConflictError):
    """PostgreSQL chose the write as a deadlock victim (SQLSTATE 40P01) on every retry within the
    request's deadline."""

    code = "database_deadlock"


class ConcurrentlyDeletedError(RetrievalError):
    """A row the statement refers to was deleted by a concurrent request (SQLSTATE 23503, a foreign key):
    the write raced a delete of what it writes into."""

    status_code = 409
    code = "concurrently_deleted"


class EmbeddingProviderError(RetrievalError):
    """The embedding provider failed or answered with something unusable."""

    status_code = 502
    code = "embedding_provider_error"


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
            "fits, base64 in JSON); upload larger files to the documents S3 bucket, or load them with the "
            "CLI (retrieval ingest)",
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


class SourceReadError(RetrievalError):
    """A file or S3 object that `retrieval sync` or `ingest` could not list or read."""

    status_code = 502
    code = "source_unreadable"


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


class GenerationProviderError(UpstreamError):
    """The generation provider failed or answered with something unusable (no text, a refused request)."""

    code = "generation_provider_error"
