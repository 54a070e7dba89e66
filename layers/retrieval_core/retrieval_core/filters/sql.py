"""Compile metadata filters to parameterised SQL predicates. Pure: no database client.

The SQL text is assembled only from fixed fragments in this module; every value a
caller sends travels as a bound parameter.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from retrieval_core.filters.exceptions import FilterKeyNotAllowedError
from retrieval_core.filters.expression import Node, compile_node, contains_sql, keys_of, parse
from retrieval_core.filters.predicate import TRUE, MetadataValue, Predicate
from retrieval_core.filters.tree import is_tree, parse_tree


def metadata_equals(filters: Mapping[str, MetadataValue] | None) -> Predicate:
    """All of `filters` must match the chunk's metadata exactly (JSONB containment, GIN-indexed)."""
    if not filters:
        return TRUE
    value = "%(metadata_contains)s::jsonb"
    return Predicate(
        contains_sql(value, scoped=False),
        {"metadata_contains": json.dumps(dict(filters))},
        scoped_sql=contains_sql(value, scoped=True),
        scoped_index_finds_rows=True,
    )


# What `metadataFilter` holds: equalities, a JSON filter tree (filter_tree.py) or an expression string.
MetadataFilterValue = Mapping[str, Any] | str


def filter_node(value: MetadataFilterValue) -> Node | None:
    """The syntax tree of an expression string or of a filter tree; None for equalities or no filter.

    Raises FilterSyntaxError or FilterTreeError (422) when malformed.
    """
    if isinstance(value, str):
        return parse(value)
    return parse_tree(value) if is_tree(value) else None


def filter_keys(value: MetadataFilterValue | None) -> list[str]:
    """Every metadata key a filter of any form names; raises as `filter_node` when malformed."""
    if not value:
        return []
    node = filter_node(value)
    if node is not None:
        return keys_of(node)
    return [] if isinstance(value, str) else list(value)


def metadata_predicate(
    value: MetadataFilterValue | None, allowed_keys: frozenset[str] | None = None
) -> Predicate:
    """Any filter form as a predicate: an object of equalities, a filter tree or an expression string.

    `allowed_keys`, when given, is the only keys a filter may name (FilterKeyNotAllowedError else).
    A malformed filter raises FilterSyntaxError or FilterTreeError.
    """
    if not value:
        return TRUE
    node = filter_node(value)
    if node is None and isinstance(value, str):  # an expression of blanks only
        return TRUE
    keys = keys_of(node) if node is not None else list(value)
    check_keys(keys, allowed_keys)
    if node is not None:
        predicate = compile_node(node)
    else:
        assert not isinstance(value, str)
        predicate = metadata_equals(value)
    return replace(predicate, metadata_keys=frozenset(keys))


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
