"""memory_search's `filter`: string-to-string equalities on our typed metadata. Pure.

Metadata here is typed (`year: 2024`), while an agent's memory filter sends strings
(`"year": "2024"`). A string value therefore matches the metadata value whose string form is equal:
`"2024"` matches `"2024"` and `2024` (and `2024.0`), `"2024.5"` matches `2024.5`, `"true"` matches
`"true"` and `true`. A number or boolean value matches only that typed value, as over HTTP.

The translation is an expression of the public filter language (`year IN ("2024", 2024)`): values are
written as literals of that language, never as SQL, and the parser binds each one as a parameter.
A key that the language cannot name (outside `[A-Za-z_][A-Za-z0-9_]*`, or a keyword) keeps the plain
equality form, in which a string matches strings only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from retrieval_core.filters.expression import KEYWORDS
from retrieval_core.filters.predicate import MetadataValue

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]{0,17})\.[0-9]{1,17}")


def typed_forms(value: str) -> list[MetadataValue]:
    """The typed values whose string form is `value` (without `value` itself)."""
    if value in ("true", "false"):
        return [value == "true"]
    if _INTEGER.fullmatch(value):
        return [int(value)]
    if _DECIMAL.fullmatch(value):
        return [float(value)]
    return []


def memory_filter(equalities: Mapping[str, MetadataValue] | None) -> dict[str, MetadataValue] | str | None:
    """`metadataFilter` for a memory_search `filter`: equalities, or an expression when a string value
    also has a typed form and every key can be named in an expression."""
    if not equalities:
        return None
    widened = {k: v for k, v in equalities.items() if isinstance(v, str) and typed_forms(v)}
    if not widened or not all(_nameable(key) for key in equalities):
        return dict(equalities)
    terms = []
    for key, value in equalities.items():
        if key in widened:
            assert isinstance(value, str)
            literals = ", ".join(_literal(v) for v in [value, *typed_forms(value)])
            terms.append(f"{key} IN ({literals})")
        else:
            terms.append(f"{key} = {_literal(value)}")
    return " AND ".join(terms)


def _nameable(key: str) -> bool:
    return bool(_IDENTIFIER.fullmatch(key)) and key.upper() not in KEYWORDS


def _literal(value: MetadataValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # The language's escapes: backslash before a backslash or the quote.
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)
