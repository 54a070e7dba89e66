"""Each source's last outcome and each store's counts, for every write path (docs/documents-api.md,
"Ingestion status").

`DocumentService` records the outcome of every source a write receives (HTTP PUT, S3 event, CLI, MCP)
right after the write, in a short transaction of its own: a failed write rolled back, and its failure
must still be kept. A failure to record is logged, never raised: the write's own answer stands.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db import document_status as status_sql
from retrieval_core.db import stores as store_sql
from retrieval_core.db.document_status import Outcome
from retrieval_core.db.errors import database_errors
from retrieval_core.documents.models import Actor, SourceWrite
from retrieval_core.exceptions import RetrievalError, StoreNotFoundError
from retrieval_core.parsers.exceptions import (
    EmptyDocumentError,
    UnsupportedContentTypeError,
    WriteCancelledError,
)

logger = logging.getLogger(__name__)

# Errors that mean "not a document we index" rather than "something went wrong": the source is skipped.
SKIPPING_ERRORS = (UnsupportedContentTypeError, EmptyDocumentError)
# Errors that say nothing of the source: no store to record in, or a client that went away.
UNRECORDED = (StoreNotFoundError, WriteCancelledError)


def outcome_of(source_id: str, result: SourceWrite | RetrievalError) -> Outcome | None:
    """The outcome to record for a source's write or error; None when there is none to record (a stale
    event changed nothing, the store does not exist, the client went away)."""
    if isinstance(result, SourceWrite):
        return None if result.stale else Outcome(source_id, "ok", change=result.status)
    if isinstance(result, UNRECORDED):
        return None
    if isinstance(result, SKIPPING_ERRORS):
        return Outcome(source_id, "skipped", code=result.code, message=result.message)
    return Outcome(source_id, "failed", code=result.code, message=result.message)


def record(retrieval: RetrievalService, store: str, outcomes: Iterable[Outcome | None], actor: Actor) -> None:
    """Record `outcomes` in `store` (nothing when it does not exist) in a transaction of their own."""
    kept = [o for o in outcomes if o is not None]
    if not kept:
        return
    try:
        with (
            database_errors("recording ingestion status"),
            retrieval.database.connection() as conn,
            conn.transaction(),
        ):
            found = store_sql.find_store_named(conn, store)
            if found is not None:
                status_sql.record_outcomes(conn, found, kept, actor.credential)
    except RetrievalError as exc:
        logger.warning(
            "ingestion status not recorded: %s", exc.message, extra={"store": store, "code": exc.code}
        )
