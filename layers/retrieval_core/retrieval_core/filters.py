"""Compile metadata filters to parameterised SQL predicates. Pure: no database client.

The SQL text is assembled only from fixed fragments in this module; every value a
caller sends travels as a bound parameter.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .exceptions import FilterKeyNotAllowedError

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


def metadata_equals(filters: Mapping[str, MetadataValue] | None) -> Predicate:
    """All of `filters` must match the chunk's metadata exactly (JSONB containment, GIN-indexed)."""
    if not filters:
        return TRUE
    return Predicate(
        "metadata @> %(metadata_contains)s::jsonb", {"metadata_contains": json.dumps(dict(filters))}
    )


def metadata_predicate(
    value: Mapping[str, MetadataValue] | str | None, allowed_keys: frozenset[str] | None = None
) -> Predicate:
    """Either filter form as a predicate: an object of equalities, or an expression string.

    `allowed_keys`, when given, is the only keys a filter may name (FilterKeyNotAllowedError else).
    An expression that does not parse raises FilterSyntaxError.
    """
    # Imported here: filter_expression builds on Predicate from this module.
    from .filter_expression import compile_node, keys_of, parse

    if isinstance(value, str):
        node = parse(value)
        if node is None:
            return TRUE
        keys = keys_of(node)
        check_keys(keys, allowed_keys)
        return replace(compile_node(node), metadata_keys=frozenset(keys))
    if not value:
        return TRUE
    check_keys(list(value), allowed_keys)
    return replace(metadata_equals(value), metadata_keys=frozenset(value))


def check_keys(keys: Iterable[str], allowed_keys: frozenset[str] | None) -> None:
    """FilterKeyNotAllowedError (422, naming `allowed_keys`) for the first key outside them; None: all."""
    if allowed_keys is None:
        return
    for key in keys:
        if key not in allowed_keys:
            raise FilterKeyNotAllowedError(key, allowed_keys)


def document_ids_in(document_ids: Sequence[str] | None) -> Predicate:
    """The chunk belongs to one of `document_ids`."""
    if not document_ids:
        return TRUE
    return Predicate("document_id = ANY(%(document_ids)s::text[])", {"document_ids": list(document_ids)})
