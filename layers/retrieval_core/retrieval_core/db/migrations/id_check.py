"""After migrating: the stored document ids that a URL would read as a path step (`names.py`).

Such ids are refused on every write; ones stored before the rule stay, readable and deletable through
the routes that take the id as a query parameter. Each migration run lists them so that an operator
can delete them (docs/migrations.md, "Ids with dot segments")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from retrieval_core.names import CANDIDATE_PATTERN, holds_dot_segment

# The ids a run names; the rest are counted.
MAX_LISTED = 100


@dataclass(frozen=True)
class UnsafeIds:
    """The stored ids with a dot segment: the first MAX_LISTED as (store, document id), and how many."""

    listed: list[tuple[str, str]]
    count: int


def unsafe_document_ids(conn: psycopg.Connection[Any]) -> UnsafeIds:
    """Every stored document id that holds a `.` or `..` segment in any spelling, by store and id."""
    # The pattern is a superset, matched by PostgreSQL so that only candidates travel; Python decides.
    rows = conn.execute(
        "SELECT s.name, d.id FROM documents d JOIN stores s ON s.id = d.store_id "
        "WHERE d.id ~* %s ORDER BY s.name, d.id",
        (CANDIDATE_PATTERN,),
    ).fetchall()
    unsafe = [(store, document_id) for store, document_id in rows if holds_dot_segment(document_id)]
    return UnsafeIds(unsafe[:MAX_LISTED], len(unsafe))
