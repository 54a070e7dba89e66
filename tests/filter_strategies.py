"""Hypothesis strategies for filter expressions, a renderer to text and a Python oracle.

Shared by the unit tests (parse/compile) and the integration tests (oracle against PostgreSQL).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from retrieval_core.filter_expression import And, Comparison, Node, Not, Or, Value

KEYS = ["project", "year", "draft", "source_type", "score", "tags", "missing"]
STRINGS = ["ABC Project", "abc project", "s3", "web", "O'Brien", 'say "hi"', "back\\slash", "", "é", "Z", "a"]
INJECTIONS = [
    "'; DROP TABLE chunks; --",
    "' OR 1=1 --",
    '" OR ""="',
    "x') OR ('1'='1",
    "$$; DELETE FROM chunks; $$",
    "%s",
    "%(limit)s",
    "%(mf0)s",
    "$1",
    "\\'; TRUNCATE chunks; --",
    "\\",
    "'",
    '"',
    "'')) OR true --",
    "東京' OR 'x'='x",
    "metadata ->> 'k'",
    "*/ SELECT pg_sleep(0) /*",
    "\u2028\u00a0' OR '1",
]

SQL_WORDS = {"metadata", "ANY", "COALESCE", "jsonb_typeof", "AND", "OR", "NOT", "false", "COLLATE"}
_SQL_FRAGMENT = re.compile(
    r"%\(mf\d+\)s|::jsonb\[\]|::jsonb|::text|->>|->|@>|<>|<=|>=|[=<>(),]|\"C\""
    r"|'(?:number|string|boolean)'|[A-Za-z_]+|\s+"
)


def only_fixed_fragments(sql: str) -> bool:
    """True when `sql` is made of the compiler's fixed fragments and placeholders, nothing else."""
    position = 0
    while position < len(sql):
        match = _SQL_FRAGMENT.match(sql, position)
        if match is None:
            return False
        word = match.group()
        if (word[0].isalpha() or word[0] == "_") and word not in SQL_WORDS:
            return False
        position = match.end()
    return True


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "other"


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def holds(node: Node, metadata: Mapping[str, Any]) -> bool:
    """The documented semantics, in Python: typed comparisons, missing key or other type -> false."""
    if isinstance(node, Not):
        return not holds(node.operand, metadata)
    if isinstance(node, And):
        return all(holds(n, metadata) for n in node.operands)
    if isinstance(node, Or):
        return any(holds(n, metadata) for n in node.operands)
    if node.key not in metadata:
        return False
    stored = metadata[node.key]
    if node.op == "IN":
        assert isinstance(node.value, tuple)
        return any(_json_type(stored) == _json_type(v) and stored == v for v in node.value)
    return _json_type(stored) == _json_type(node.value) and _COMPARE[node.op](stored, node.value)


# Values, keys and structure -------------------------------------------------------------------

numbers = st.sampled_from([0, 1, -1, 2022, 2023, 2024, 1.5, -0.5, 2023.0, 0.25]) | st.integers(-5, 5)
texts = st.sampled_from(STRINGS)
booleans = st.booleans()
values: st.SearchStrategy[Value] = numbers | texts | booleans


@st.composite
def comparisons(draw: st.DrawFn, keys: st.SearchStrategy[str], vals: st.SearchStrategy[Value]) -> Comparison:
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "IN"]))
    if op == "IN":
        return Comparison(draw(keys), "IN", tuple(draw(st.lists(vals, min_size=1, max_size=4))))
    value = draw(vals)
    if op in ("<", "<=", ">", ">=") and isinstance(value, bool):
        op = "="
    return Comparison(draw(keys), op, value)  # type: ignore[arg-type]


fixed_keys = st.sampled_from(KEYS)


def expressions(
    keys: st.SearchStrategy[str] = fixed_keys, vals: st.SearchStrategy[Value] = values
) -> st.SearchStrategy[Node]:
    """Random syntax trees, at most a few levels deep (well within the depth limit)."""
    return st.recursive(
        comparisons(keys, vals),
        lambda children: (
            st.builds(Not, children)
            | st.builds(And, st.lists(children, min_size=2, max_size=3).map(tuple))
            | st.builds(Or, st.lists(children, min_size=2, max_size=3).map(tuple))
        ),
        max_leaves=8,
    )


# Rendering -------------------------------------------------------------------------------------


def quote(text: str, style: int) -> str:
    """A string literal for `text`: 0 doubled single quotes, 1 backslash single, 2 double quotes."""
    if style == 0:
        return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    if style == 1:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def literal(value: Value, style: int) -> str:
    if isinstance(value, bool):
        return ["true", "TRUE", "True"][style % 3] if value else ["false", "FALSE", "False"][style % 3]
    if isinstance(value, str):
        return quote(value, style % 3)
    return repr(value)


def render(node: Node, style: int = 0) -> str:
    """`node` as expression text; `style` varies quoting and keyword case without changing meaning."""
    kw: Callable[[str], str] = str.lower if style % 2 else str.upper
    if isinstance(node, Not):
        return f"{kw('NOT')} ({render(node.operand, style)})"
    if isinstance(node, And | Or):
        joiner = f" {kw('AND' if isinstance(node, And) else 'OR')} "
        return joiner.join(f"({render(n, style)})" for n in node.operands)
    if node.op == "IN":
        assert isinstance(node.value, tuple)
        return f"{node.key} {kw('IN')} ({', '.join(literal(v, style) for v in node.value)})"
    assert not isinstance(node.value, tuple)
    return f"{node.key} {node.op} {literal(node.value, style)}"
