"""Split a migration's SQL into statements, for a step that runs outside a transaction.

PostgreSQL runs the statements of one multi-statement query string in one implicit transaction, where
CREATE INDEX CONCURRENTLY is refused: such a step is sent one statement at a time. Semicolons inside
quotes, dollar quotes, quoted identifiers and comments do not end a statement.
"""

from __future__ import annotations

import re

_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")
_IDENTIFIER_CHAR = re.compile(r"[A-Za-z_0-9$]")


def split_statements(sql: str) -> list[str]:
    """The statements of `sql`, without their ending semicolons; stretches holding only comments dropped."""
    statements: list[str] = []
    start = 0
    has_code = False
    i = 0
    while i < len(sql):
        char = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            i = _end_of_block_comment(sql, i)
            continue
        if char == ";":
            if has_code:
                statements.append(sql[start:i].strip())
            start, has_code, i = i + 1, False, i + 1
            continue
        if not char.isspace():
            has_code = True
        i = _end_of_token(sql, i)
    if has_code:
        statements.append(sql[start:].strip())
    return statements


def _end_of_token(sql: str, i: int) -> int:
    """Where the quoted string, dollar-quoted string or quoted identifier starting at `i` ends; i + 1
    for any other character. An unterminated quote runs to the end (the server reports it)."""
    char = sql[i]
    follows_identifier = i > 0 and _IDENTIFIER_CHAR.match(sql[i - 1]) is not None
    if char == "'":
        escapes = i > 0 and sql[i - 1] in "eE" and (i < 2 or _IDENTIFIER_CHAR.match(sql[i - 2]) is None)
        return _end_of_string(sql, i, escapes)
    if char == '"':
        end = sql.find('"', i + 1)
        return len(sql) if end < 0 else end + 1
    if char == "$" and not follows_identifier:
        tag = _DOLLAR_TAG.match(sql, i)
        if tag is not None:
            end = sql.find(tag.group(), tag.end())
            return len(sql) if end < 0 else end + len(tag.group())
    return i + 1


def _end_of_string(sql: str, i: int, escapes: bool) -> int:
    """After the string literal opening at `i` (a doubled quote reopens it; E'' strings escape with \\)."""
    j = i + 1
    while j < len(sql):
        if escapes and sql[j] == "\\":
            j += 2
            continue
        if sql[j] == "'":
            return j + 1
        j += 1
    return len(sql)


def _end_of_block_comment(sql: str, i: int) -> int:
    """After the /* */ comment opening at `i`; PostgreSQL's block comments nest."""
    depth = 0
    while i < len(sql):
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(sql)
