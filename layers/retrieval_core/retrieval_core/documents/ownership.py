"""A document id belongs to one source: a write naming another source's document, or a record whose id is
another source's id, is refused (409) rather than moving or overwriting what that source wrote."""

from __future__ import annotations

from retrieval_core.db.connection import Connection
from retrieval_core.db.document_owners import foreign_owner
from retrieval_core.db.documents import document_states
from retrieval_core.db.stores import Store
from retrieval_core.documents.exceptions import ForeignDocumentError
from retrieval_core.documents.prepare import PreparedSource


def check_ownership(conn: Connection, store: Store, prepared: PreparedSource) -> None:
    """ForeignDocumentError (409) unless every id `prepared` writes is free or already its own.

    Run in the write's transaction, under its locks on the source and on each document id, so a writer of
    another source writing one of these ids waits, then sees it taken. A source named like one of the
    ids is read under no lock of this write: two first writes racing that way may both pass."""
    ids = [d.id for d in prepared.documents]
    found = foreign_owner(conn, store, prepared.source_id, ids)
    if found is None:
        return
    document_id, owner = found
    if document_id in ids or document_id == prepared.source_id:
        raise ForeignDocumentError(document_id, owner)
    raise ForeignDocumentError(owner, owner, as_source=True)  # a record would take that source's id


def own_document(conn: Connection, store: Store, document_id: str) -> list[str]:
    """[`document_id`] when that document is its own source (a memory, a single-file document); [] when
    there is no such document; ForeignDocumentError (409) naming the source of a record."""
    state = document_states(conn, store, [document_id]).get(document_id)
    if state is None:
        return []
    if state.source != document_id:
        raise ForeignDocumentError(document_id, state.source)
    return [document_id]
