"""Which source owns an id: the one query behind "a document id belongs to one source"."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store


def foreign_owner(
    conn: Connection, store: Store, source: str, document_ids: Sequence[str]
) -> tuple[str, str] | None:
    """(id, source) of one stored document of another source than `source` that either has one of
    `document_ids` or `source` as its id, or is read from a source named by one of `document_ids`;
    None when every one of those ids is `source`'s alone."""
    ids = list(document_ids)
    # Two index lookups (by id, by source), so the cost follows the write's ids, not the store's size.
    row = conn.execute(
        """(SELECT id, source FROM documents
            WHERE store_id = %(store)s AND id = ANY(%(ids)s::text[]) AND source <> %(source)s)
           UNION ALL
           (SELECT id, source FROM documents
            WHERE store_id = %(store)s AND source = ANY(%(sources)s::text[]) AND source <> %(source)s)
           LIMIT 1""",
        {"store": store.id, "ids": [*ids, source], "sources": ids, "source": source},
    ).fetchone()
    return (row[0], row[1]) if row is not None else None
