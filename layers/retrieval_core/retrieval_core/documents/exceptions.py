"""Errors of the write side: the S3 ingest path's (an unreadable event or sidecar, an object too large or not
readable) and a list's cursor that is not one of ours."""

from __future__ import annotations

from retrieval_core.exceptions import ConflictError, InvalidRequestError, RetrievalError


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


class TooManyRecordsError(InvalidRequestError):
    """A CSV or JSON Lines source with more records than DOCUMENT_MAX_RECORDS (one write holds them all)."""

    status_code = 413
    code = "too_many_records"

    def __init__(self, source_id: str, records: int, limit: int) -> None:
        super().__init__(
            f"source '{source_id}' holds {records} records, over the {limit} one source may hold "
            "(DOCUMENT_MAX_RECORDS); split the file",
            {"sourceId": source_id, "records": records, "maxRecords": limit},
        )


class ObjectReadError(RetrievalError):
    """S3 refused or did not answer when an object was read. Transient: the event is retried."""

    status_code = 502
    code = "s3_read_failed"


class InvalidCursorError(InvalidRequestError):
    """A `cursor` of a paged list (stores, documents) that no page gave: malformed, or altered since.

    `cause` names what is wrong with it (`details.errors[0].type`, a word for code to compare).
    """

    code = "invalid_cursor"

    def __init__(self, cause: str, reason: str) -> None:
        errors = [{"field": "cursor", "message": reason, "type": cause}]
        super().__init__(
            f"cursor: {reason}; pass a page's nextCursor unchanged, or no cursor for the first page",
            {"errors": errors},
        )


class ForeignDocumentError(ConflictError):
    """A write or memory_delete naming an id that another source owns (docs/documents-api.md, "Ids").

    `details.source` is the owning source."""

    code = "document_of_another_source"

    def __init__(self, document_id: str, owner: str, as_source: bool = False) -> None:
        what = "the id of the source" if as_source else "a document of the source"
        super().__init__(
            f"'{document_id}' is {what} '{owner}', and a document id belongs to one source: "
            f"write or delete '{owner}' itself, or give this document another id",
            {"documentId": document_id, "source": owner},
        )
