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

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidRequestError(RetrievalError):
    """The request is well-formed JSON but asks for something we refuse."""

    status_code = 422
    code = "validation_error"


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
