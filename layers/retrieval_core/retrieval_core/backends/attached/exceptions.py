"""Errors of attached stores: a source that cannot be searched, and what such a store refuses."""

from __future__ import annotations

from retrieval_core.exceptions import ConflictError, InvalidRequestError


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
