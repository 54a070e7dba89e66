"""Metadata filters as a JSON tree in Bedrock Knowledge Bases' shape, read into expression nodes. Pure.

    {"andAll": [{"equals": {"key": "year", "value": 2024}},
                {"startsWith": {"key": "title", "value": "Kube"}}]}

An object whose single key is one of TREE_OPERATORS is a tree; any other object is the
key → value equality map. A tree compiles exactly as the expression with the same
operators does (filter_expression.py), so both forms share one meaning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from retrieval_core.filters.exceptions import FilterTreeError
from retrieval_core.filters.expression import (
    MAX_COMPARISONS,
    MAX_DEPTH,
    MAX_IN_ITEMS,
    MAX_KEY_LENGTH,
    ORDERING_OPERATORS,
    STRING_OPERATORS,
    And,
    Comparison,
    Exists,
    Node,
    Operator,
    Or,
    Value,
)

# Tree operator → the expression operator it means.
COMPARISONS: dict[str, Operator] = {
    "equals": "=",
    "notEquals": "!=",
    "greaterThan": ">",
    "greaterThanOrEquals": ">=",
    "lessThan": "<",
    "lessThanOrEquals": "<=",
    "in": "IN",
    "notIn": "NOT IN",
    "startsWith": "STARTS WITH",
    "stringContains": "CONTAINS",
    "listContains": "HAS",
    "equalsIgnoreCase": "LOWER=",
}
LOGICAL = frozenset({"andAll", "orAll"})
TREE_OPERATORS = frozenset({*COMPARISONS, *LOGICAL, "exists"})


def is_tree(value: object) -> bool:
    """Whether a `metadataFilter` object is a tree: its single key is an operator name."""
    return isinstance(value, Mapping) and len(value) == 1 and next(iter(value)) in TREE_OPERATORS


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:40] + "..."


class _Reader:
    def __init__(self) -> None:
        self.comparisons = 0

    def node(self, value: object, path: str, depth: int) -> Node:
        if not isinstance(value, Mapping) or len(value) != 1:
            expected = 'an object with one operator, such as {"equals": {...}}'
            raise FilterTreeError(path, expected, _shown(value))
        ((name, operand),) = value.items()
        path = f"{path}.{name}"
        if name in LOGICAL:
            return self.logical(name, operand, path, depth)
        if name not in TREE_OPERATORS:
            raise FilterTreeError(path, f"an operator: {', '.join(sorted(TREE_OPERATORS))}", _shown(name))
        self.comparisons += 1
        if self.comparisons > MAX_COMPARISONS:
            raise FilterTreeError(
                path, f"at most {MAX_COMPARISONS} comparisons", f"comparison {self.comparisons}"
            )
        if name == "exists":
            return Exists(self.key(operand, path, fields=("key",)))
        op = COMPARISONS[name]
        key = self.key(operand, path, fields=("key", "value"))
        assert isinstance(operand, Mapping)
        return Comparison(key, op, self.value(op, operand["value"], f"{path}.value"))

    def logical(self, name: str, operands: object, path: str, depth: int) -> Node:
        if depth >= MAX_DEPTH:
            raise FilterTreeError(path, f"at most {MAX_DEPTH} levels of andAll/orAll", "a deeper one")
        if not isinstance(operands, list) or not operands:
            raise FilterTreeError(path, "a list of one or more filters", _shown(operands))
        nodes = tuple(self.node(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(operands))
        if len(nodes) == 1:
            return nodes[0]
        return And(nodes) if name == "andAll" else Or(nodes)

    def key(self, operand: object, path: str, fields: tuple[str, ...]) -> str:
        if not isinstance(operand, Mapping) or set(operand) != set(fields):
            wanted = " and ".join(f'"{f}"' for f in fields)
            raise FilterTreeError(path, f"an object with exactly {wanted}", _shown(operand))
        key = operand["key"]
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
            raise FilterTreeError(f"{path}.key", f"a string of 1 to {MAX_KEY_LENGTH} characters", _shown(key))
        return _text(key, f"{path}.key")

    def value(self, op: Operator, value: object, path: str) -> Value | tuple[Value, ...]:
        if op in ("IN", "NOT IN"):
            if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN_ITEMS:
                raise FilterTreeError(path, f"a list of 1 to {MAX_IN_ITEMS} values", _shown(value))
            return tuple(_scalar(item, f"{path}[{i}]") for i, item in enumerate(value))
        if op in STRING_OPERATORS:
            if not isinstance(value, str):
                raise FilterTreeError(path, "a string", _shown(value))
            return _text(value, path)
        scalar = _scalar(value, path)
        if op in ORDERING_OPERATORS and isinstance(scalar, bool):
            raise FilterTreeError(path, "a number or a string", _shown(value))
        return scalar


def _text(value: str, path: str) -> str:
    # PostgreSQL text holds neither NUL nor unpaired surrogates.
    if "\x00" in value:
        raise FilterTreeError(path, "text without NUL (\\u0000) characters", _shown(value))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FilterTreeError(path, "valid Unicode (no unpaired surrogates)", _shown(value)) from None
    return value


def _scalar(value: object, path: str) -> Value:
    if isinstance(value, str):
        return _text(value, path)
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise FilterTreeError(path, "a string, a finite number, true or false", _shown(value))


def parse_tree(tree: Mapping[str, Any]) -> Node:
    """The expression node a filter tree means; FilterTreeError (422, naming the path) if malformed."""
    return _Reader().node(tree, "metadataFilter", 0)
