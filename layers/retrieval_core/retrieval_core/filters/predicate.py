"""A SQL boolean expression with bound parameters: what every filter form compiles to. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MetadataValue = str | int | float | bool


@dataclass(frozen=True)
class Predicate:
    """A SQL boolean expression with `%(name)s` placeholders and their values."""

    sql: str
    params: dict[str, Any] = field(default_factory=dict)
    # The metadata keys it reads: a store's own allow-list is checked against them once the store is known.
    metadata_keys: frozenset[str] = frozenset()

    def __and__(self, other: Predicate) -> Predicate:
        if not self.sql:
            return other
        if not other.sql:
            return self
        return Predicate(
            f"({self.sql}) AND ({other.sql})",
            {**self.params, **other.params},
            self.metadata_keys | other.metadata_keys,
        )


TRUE = Predicate("")
