"""Which outcome a write's result or error is recorded as."""

from __future__ import annotations

from retrieval_core.db.document_status import Outcome
from retrieval_core.documents.ingest_status import outcome_of
from retrieval_core.documents.models import DocumentWrite, SourceWrite
from retrieval_core.exceptions import StoreNotFoundError
from retrieval_core.parsers.exceptions import (
    DocumentParseError,
    EmptyDocumentError,
    UnsupportedContentTypeError,
    WriteCancelledError,
)


def test_a_write_is_ok_with_its_change_and_a_stale_event_leaves_nothing() -> None:
    written = SourceWrite("a.csv", "text/csv", "h", [DocumentWrite("r1", "unchanged", 1)], removed=["r2"])
    assert outcome_of("a.csv", written) == Outcome("a.csv", "ok", change="updated")
    stale = SourceWrite("a.csv", "text/csv", "h", [], stale=True)
    assert outcome_of("a.csv", stale) is None


def test_errors_of_the_document_are_failed_or_skipped_with_their_code_and_message() -> None:
    corrupt = DocumentParseError("application/pdf", "damaged or truncated")
    failed = outcome_of("q3.pdf", corrupt)
    assert failed == Outcome("q3.pdf", "failed", code="unreadable_document", message=corrupt.message)
    for skipping in (
        EmptyDocumentError("text/plain"),
        UnsupportedContentTypeError("image/png", ("text/plain",)),
    ):
        recorded = outcome_of("x", skipping)
        assert recorded is not None and (recorded.outcome, recorded.code) == ("skipped", skipping.code)


def test_a_missing_store_or_a_client_gone_records_nothing() -> None:
    assert outcome_of("x", StoreNotFoundError("s")) is None
    assert outcome_of("x", WriteCancelledError()) is None
