"""A SQL boolean expression with bound parameters: what every filter form compiles to. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MetadataValue = str | int | float | bool


# The store id a predicate's store-scoped form compares with (bound when the store is known).
METADATA_SCOPE = "%(metadata_scope)s"


@dataclass(frozen=True)
class Predicate:
    """A SQL boolean expression with `%(name)s` placeholders and their values.

    `sql` reads a `metadata` column as it is (attached tables, and stores while their database builds its
    shared indexes). `scoped_sql` is the same test in the form the shared metadata index of `chunks`
    answers, `chunk_metadata_scope(store_id, metadata) @> chunk_metadata_scope(<store>, value)`, which
    names the parameter `metadata_scope`; None when the two are the same.
    """

    sql: str
    params: dict[str, Any] = field(default_factory=dict)
    # The metadata keys it reads: a store's own allow-list is checked against them once the store is known.
    metadata_keys: frozenset[str] = frozenset()
    scoped_sql: str | None = None
    # Whether the shared metadata index alone finds every row `scoped_sql` holds for: at its top, a
    # containment (or an OR of such parts), whose keys carry the store id. The store's own condition then
    # needs no index of its own (db/search_sql.py).
    scoped_index_finds_rows: bool = False

    @property
    def chunk_sql(self) -> str:
        """The predicate over `chunks` (the store-scoped form)."""
        return self.sql if self.scoped_sql is None else self.scoped_sql

    def __and__(self, other: Predicate) -> Predicate:
        if not self.sql:
            return other
        if not other.sql:
            return self
        scoped = None
        if self.scoped_sql is not None or other.scoped_sql is not None:
            scoped = f"({self.chunk_sql}) AND ({other.chunk_sql})"
        return Predicate(
            f"({self.sql}) AND ({other.sql})",
            {**self.params, **other.params},
            self.metadata_keys | other.metadata_keys,
            scoped,
            self.scoped_index_finds_rows or other.scoped_index_finds_rows,
        )


TRUE = Predicate("")
