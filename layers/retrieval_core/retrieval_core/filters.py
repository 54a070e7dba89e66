"""Compile metadata filters to parameterised SQL predicates. Pure: no database client.

The SQL text is assembled only from fixed fragments in this module; every value a
caller sends travels as a bound parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MetadataValue = str | int | float | bool


@dataclass(frozen=True)
class Predicate:
    """A SQL boolean expression with `%(name)s` placeholders and their values."""

    sql: str
    params: dict[str, Any] = field(default_factory=dict)

    def __and__(self, other: Predicate) -> Predicate:
        if not self.sql:
            return other
        if not other.sql:
            return self
        return Predicate(f"({self.sql}) AND ({other.sql})", {**self.params, **other.params})


TRUE = Predicate("")


def metadata_equals(filters: Mapping[str, MetadataValue] | None) -> Predicate:
    """All of `filters` must match the chunk's metadata exactly (JSONB containment, GIN-indexed)."""
    if not filters:
        return TRUE
    return Predicate(
        "metadata @> %(metadata_contains)s::jsonb", {"metadata_contains": json.dumps(dict(filters))}
    )


def document_ids_in(document_ids: Sequence[str] | None) -> Predicate:
    """The chunk belongs to one of `document_ids`."""
    if not document_ids:
        return TRUE
    return Predicate("document_id = ANY(%(document_ids)s::text[])", {"document_ids": list(document_ids)})
