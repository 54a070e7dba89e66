"""Hypothesis strategies for metadata filters, renderers to expression text and to JSON trees, and a
Python oracle of their documented semantics.

Shared by the unit tests (parse/compile) and the integration tests (oracle against PostgreSQL).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from retrieval_core.filters.expression import And, Comparison, Exists, Node, Not, Or, Value
from retrieval_core.filters.tree import COMPARISONS

KEYS = ["project", "year", "draft", "source_type", "score", "tags", "missing"]
STRINGS = ["ABC Project", "abc project", "s3", "web", "O'Brien", 'say "hi"', "back\\slash", "", "é", "Z", "a"]
# Values for the text operators: case variants in several scripts, and LIKE's wildcards, which are literal.
TEXTS = [
    "Kube", "kube", "KUBERNETES", "Kubernetes", "netes", "ÄRZTE", "ärzte", "Straße", "STRASSE", "ΣΟΦΙΑ",
    "σοφια", "İstanbul", "istanbul", "東京", "100%", "%", "_", "a_b", "\\", "50% off", "ab", "",
]  # fmt: skip
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

SQL_WORDS = {
    "metadata", "ANY", "COALESCE", "jsonb_typeof", "AND", "OR", "NOT", "false", "COLLATE", "starts_with",
    "strpos", "lower", "CASE", "WHEN", "THEN", "ELSE", "END", "EXISTS", "SELECT", "FROM",
    "jsonb_array_elements", "AS", "item", "WHERE",
}  # fmt: skip
_SQL_FRAGMENT = re.compile(
    r"%\(mf\d+\)s|::jsonb\[\]|::jsonb|::text\[\]|::text|->>|->|#>>|@>|<>|<=|>=|[=<>(),?]|\"C\"|\b0\b"
    r"|'(?:number|string|boolean|array|\{\})'|[A-Za-z_]+|\s+"
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


def _same(stored: Any, value: Any) -> bool:
    return _json_type(stored) == _json_type(value) and stored == value


def pg_lower(text: str) -> str:
    """PostgreSQL's lower() under a UTF-8 libc locale: each character on its own (Σ is always σ)."""
    return "".join("i" if ch == "İ" else ch.lower() for ch in text)


def holds(node: Node, metadata: Mapping[str, Any]) -> bool:
    """The documented semantics, in Python: typed comparisons, missing key or other type -> false."""
    if isinstance(node, Exists):
        return node.key in metadata
    if isinstance(node, Not):
        return not holds(node.operand, metadata)
    if isinstance(node, And):
        return all(holds(n, metadata) for n in node.operands)
    if isinstance(node, Or):
        return any(holds(n, metadata) for n in node.operands)
    if node.key not in metadata:
        return False
    stored = metadata[node.key]
    if node.op in ("IN", "NOT IN"):
        assert isinstance(node.value, tuple)
        listed = any(_same(stored, v) for v in node.value)
        if node.op == "IN":
            return listed
        return _json_type(stored) in {_json_type(v) for v in node.value} and not listed
    value = node.value
    if node.op == "HAS":
        return isinstance(stored, list) and any(_same(item, value) for item in stored)
    if node.op == "CONTAINS":
        assert isinstance(value, str)
        texts = stored if isinstance(stored, list) else [stored]
        return any(isinstance(text, str) and value in text for text in texts)
    if _json_type(stored) != _json_type(value):
        return False
    if node.op == "STARTS WITH":
        return bool(stored.startswith(value))
    if node.op == "LOWER=":
        return pg_lower(stored) == pg_lower(str(value))
    return bool(_COMPARE[node.op](stored, value))


# Values, keys and structure -------------------------------------------------------------------

numbers = st.sampled_from([0, 1, -1, 2022, 2023, 2024, 1.5, -0.5, 2023.0, 0.25]) | st.integers(-5, 5)
texts = st.sampled_from(STRINGS)
booleans = st.booleans()
values: st.SearchStrategy[Value] = numbers | texts | booleans
operator_texts = st.sampled_from(TEXTS) | texts


@st.composite
def comparisons(
    draw: st.DrawFn,
    keys: st.SearchStrategy[str],
    vals: st.SearchStrategy[Value],
    strings: st.SearchStrategy[str] = operator_texts,
) -> Comparison | Exists:
    """One comparison of any operator; `strings` are the values of the text operators."""
    op = draw(st.sampled_from([*COMPARISONS.values(), "EXISTS"]))
    if op == "EXISTS":
        return Exists(draw(keys))
    if op in ("IN", "NOT IN"):
        return Comparison(draw(keys), op, tuple(draw(st.lists(vals, min_size=1, max_size=4))))
    if op in ("STARTS WITH", "CONTAINS", "LOWER="):
        return Comparison(draw(keys), op, draw(strings))
    value = draw(vals)
    if op in ("<", "<=", ">", ">=") and isinstance(value, bool):
        op = "="
    return Comparison(draw(keys), op, value)


fixed_keys = st.sampled_from(KEYS)


def expressions(
    keys: st.SearchStrategy[str] = fixed_keys,
    vals: st.SearchStrategy[Value] = values,
    strings: st.SearchStrategy[str] = operator_texts,
    *,
    negation: bool = True,
) -> st.SearchStrategy[Node]:
    """Random syntax trees, at most a few levels deep (well within the depth limit); `negation`
    False leaves NOT out, which a JSON tree cannot say."""

    def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        logical = st.builds(And, st.lists(children, min_size=2, max_size=3).map(tuple)) | st.builds(
            Or, st.lists(children, min_size=2, max_size=3).map(tuple)
        )
        return st.builds(Not, children) | logical if negation else logical

    return st.recursive(comparisons(keys, vals, strings), extend, max_leaves=8)


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
    if isinstance(node, Exists):
        return f"{kw('EXISTS')}({node.key})"
    if node.op in ("IN", "NOT IN"):
        assert isinstance(node.value, tuple)
        return f"{node.key} {kw(node.op)} ({', '.join(literal(v, style) for v in node.value)})"
    assert not isinstance(node.value, tuple)
    if node.op == "LOWER=":
        return f"{kw('LOWER')}({node.key}) = {literal(node.value, style)}"
    return f"{node.key} {kw(node.op)} {literal(node.value, style)}"


_TREE_NAMES = {op: name for name, op in COMPARISONS.items()}


def to_tree(node: Node) -> dict[str, Any]:
    """`node` as a JSON filter tree (which has no NOT)."""
    if isinstance(node, Exists):
        return {"exists": {"key": node.key}}
    if isinstance(node, And | Or):
        return {"andAll" if isinstance(node, And) else "orAll": [to_tree(n) for n in node.operands]}
    assert isinstance(node, Comparison), "a JSON tree has no NOT"
    value = list(node.value) if isinstance(node.value, tuple) else node.value
    return {_TREE_NAMES[node.op]: {"key": node.key, "value": value}}
