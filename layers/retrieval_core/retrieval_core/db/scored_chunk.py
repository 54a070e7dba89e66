"""A chunk found by a search, with its similarity to the query. Pure: no I/O.

The search SQL (db/search_sql.py), the attached tables' SQL and the ranking steps above them all pass
these along. Every score the service returns is a similarity, higher is better: for vectors
`1 - cosine distance`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


# Not frozen: a frozen dataclass's __init__ costs about 1 µs more per row, 10 per search.
@dataclass(slots=True)
class ScoredChunk:
    """A chunk with its similarity to the query and everything stored beside it."""

    document_id: str
    chunk_index: int
    content: str
    # None: a keyword search alone, which computes no similarity.
    score: float | None
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: Sequence[float] | None = None
    # Hybrid search: the full-text rank (None: not among the keyword hits), and whether the chunk is
    # among the vector hits (keyword-only hits have a similarity too, computed exactly).
    keyword_score: float | None = None
    vector_hit: bool = True
    # A row of an attached table: its own id (the table has no chunk index).
    row_id: str | None = None
    # The content_sha256 of the chunk's document, when the search asked for it (collapsing duplicates);
    # None for an attached row, whose table keeps no hash.
    content_sha256: str | None = None

    @property
    def key(self) -> tuple[str, int]:
        """(document id, chunk index), or (row id, -1) for an attached row: identifies it within its store."""
        return (self.document_id, self.chunk_index) if self.row_id is None else (self.row_id, -1)

    @property
    def chunk_id(self) -> str:
        """The stable chunk id: document id plus index, or an attached row's own id."""
        return f"{self.document_id}#{self.chunk_index}" if self.row_id is None else self.row_id


def similarity_from_distance(cosine_distance: float) -> float:
    """pgvector's `<=>` is a distance; the service only ever reports `1 - distance`."""
    return 1.0 - cosine_distance
