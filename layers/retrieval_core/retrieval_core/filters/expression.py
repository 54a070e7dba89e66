"""Metadata filter expressions (`year >= 2023 AND NOT draft = true`) compiled to SQL. Pure.

Grammar (keywords case-insensitive; precedence NOT > AND > OR):

    expression := or_expr
    or_expr    := and_expr ("OR" and_expr)*
    and_expr   := unary ("AND" unary)*
    unary      := "NOT" unary | "(" or_expr ")" | comparison
    comparison := key ("=" | "!=" | "<" | "<=" | ">" | ">=") literal
                | key ["NOT"] "IN" "(" literal ("," literal)* ")"
                | key "STARTS" "WITH" string | key "CONTAINS" string | key "HAS" literal
                | "LOWER" "(" key ")" "=" string | "EXISTS" "(" key ")"
    key        := [A-Za-z_][A-Za-z0-9_]*   (not a keyword)
    literal    := string | number | "true" | "false"

STARTS, WITH, CONTAINS, HAS, LOWER and EXISTS are read as operators only where a key cannot
stand (after a key, or before "("), so they stay usable as keys.

Strings take single or double quotes; inside, the quote is escaped by doubling it
(`'O''Brien'`) or with a backslash (`'O\\'Brien'`), and `\\\\` is a backslash.
Comparisons are typed: a number literal matches JSON numbers only, a string literal JSON
strings only, `true`/`false` JSON booleans only. A comparison on a missing key or on a
value of another type is false (never NULL), so `NOT` is plain two-valued negation.
`NOT IN` is false too for a value whose type none of the listed values has. STARTS WITH and
CONTAINS take the value as literal text (no wildcards); CONTAINS also looks into the strings of
a list. HAS is list membership. `lower(key) = 'v'` is equality after lowercasing both sides.
EXISTS tests that the key is present, whatever its value.

Every key and value travels as a bound parameter named `mf0`, `mf1`, ...; the SQL text is
built only from the fixed fragments below.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Literal as TypingLiteral

from retrieval_core.filters.exceptions import FilterSyntaxError
from retrieval_core.filters.predicate import METADATA_SCOPE, Predicate

MAX_EXPRESSION_LENGTH = 4_000
MAX_DEPTH = 32
MAX_IN_ITEMS = 100
MAX_COMPARISONS = 100
MAX_KEY_LENGTH = 256

Value = str | int | float | bool
# LOWER= is `lower(key) = value`, equality ignoring case.
Operator = TypingLiteral[
    "=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN", "STARTS WITH", "CONTAINS", "HAS", "LOWER="
]
KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "TRUE", "FALSE"})
LIST_OPERATORS = ("IN", "NOT IN")
STRING_OPERATORS = ("STARTS WITH", "CONTAINS", "LOWER=")
ORDERING_OPERATORS = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class Comparison:
    """`key op value`; for IN and NOT IN, `value` is the tuple of listed literals."""

    key: str
    op: Operator
    value: Value | tuple[Value, ...]


@dataclass(frozen=True)
class Exists:
    """The key is present in the metadata, whatever its value."""

    key: str


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class And:
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Node, ...]


Node = Comparison | Exists | Not | And | Or


@dataclass(frozen=True)
class Token:
    kind: str  # IDENT, STRING, NUMBER, KEYWORD, OP, LPAREN, RPAREN, COMMA, END
    text: str  # as written (for messages)
    position: int
    value: Value | None = None


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("!=", "<=", ">=", "=", "<", ">")
_PUNCTUATION = {"(": "LPAREN", ")": "RPAREN", ",": "COMMA"}


def _shown(text: str) -> str:
    """A token as quoted in an error message (bounded, so a huge input is not echoed back)."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _error(position: int, expected: str, found: str) -> FilterSyntaxError:
    return FilterSyntaxError(position=position, expected=expected, found=found)


def tokenize(text: str) -> list[Token]:
    """Split `text` into tokens; FilterSyntaxError at the first character that starts none."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _PUNCTUATION:
            tokens.append(Token(_PUNCTUATION[ch], ch, i))
            i += 1
        elif ch in "'\"":
            value, end = _read_string(text, i)
            tokens.append(Token("STRING", text[i:end], i, value))
            i = end
        elif ch == "-" or ch.isdigit():
            match = _NUMBER.match(text, i)
            glued = (
                match is not None
                and match.end() < n
                and (text[match.end()].isalnum() or text[match.end()] in "._")
            )
            if match is None or glued:
                end = match.end() if match else i + 1
                raise _error(i, "a number", _shown(text[i : end + 1]))
            tokens.append(Token("NUMBER", match.group(), i, _number(match.group(), i)))
            i = match.end()
        elif (ident := _IDENT.match(text, i)) is not None:
            word = ident.group()
            if word.upper() in KEYWORDS:
                upper = word.upper()
                tokens.append(Token("KEYWORD", upper, i, {"TRUE": True, "FALSE": False}.get(upper)))
            else:
                tokens.append(Token("IDENT", word, i, word))
            i = ident.end()
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise _error(i, "a key, a value, an operator or a parenthesis", _shown(ch))
            tokens.append(Token("OP", op, i))
            i += len(op)
    tokens.append(Token("END", "end of input", n))
    return tokens


def _read_string(text: str, start: int) -> tuple[str, int]:
    """The string literal opening at `start`, and the offset just after its closing quote."""
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 < len(text) and text[i + 1] in "\\'\"":
                out.append(text[i + 1])
                i += 2
                continue
            raise _error(i, "an escape: \\\\, \\' or \\\"", _shown(text[i : i + 2]))
        if ch == quote:
            if i + 1 < len(text) and text[i + 1] == quote:
                out.append(quote)
                i += 2
                continue
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise _error(start, f"a closing {quote} for the string starting here", "end of input")


def _number(text: str, position: int) -> int | float:
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        raise _error(position, "a finite number", _shown(text))
    return value


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.comparisons = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def at_keyword(self, word: str) -> bool:
        return self.current.kind == "KEYWORD" and self.current.text == word

    def fail(self, expected: str) -> FilterSyntaxError:
        token = self.current
        found = "end of input" if token.kind == "END" else _shown(token.text)
        return _error(token.position, expected, found)

    def or_expr(self, depth: int) -> Node:
        operands = [self.and_expr(depth)]
        while self.at_keyword("OR"):
            self.advance()
            operands.append(self.and_expr(depth))
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def and_expr(self, depth: int) -> Node:
        operands = [self.unary(depth)]
        while self.at_keyword("AND"):
            self.advance()
            operands.append(self.unary(depth))
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def unary(self, depth: int) -> Node:
        if self.at_keyword("NOT") or self.current.kind == "LPAREN":
            if depth >= MAX_DEPTH:
                raise self.fail(f"at most {MAX_DEPTH} levels of parentheses and NOT")
            if self.advance().kind == "LPAREN":
                inner = self.or_expr(depth + 1)
                if self.current.kind != "RPAREN":
                    raise self.fail("')' or AND/OR")
                self.advance()
                return inner
            return Not(self.unary(depth + 1))
        return self.comparison()

    def at_word(self, word: str) -> bool:
        """The current token is the identifier `word` (any case): an operator where no key can stand."""
        return self.current.kind == "IDENT" and self.current.text.upper() == word

    def before_parenthesis(self) -> bool:
        return self.tokens[min(self.index + 1, len(self.tokens) - 1)].kind == "LPAREN"

    def key(self) -> str:
        """A metadata key; each one starts a comparison, counted against MAX_COMPARISONS."""
        if self.current.kind != "IDENT":
            raise self.fail("a metadata key, NOT or '('")
        key_token = self.advance()
        key = key_token.text
        if len(key) > MAX_KEY_LENGTH:
            raise _error(key_token.position, f"a key of at most {MAX_KEY_LENGTH} characters", _shown(key))
        self.comparisons += 1
        if self.comparisons > MAX_COMPARISONS:
            raise _error(key_token.position, f"at most {MAX_COMPARISONS} comparisons", _shown(key))
        return key

    def key_in_parentheses(self) -> str:
        self.advance()  # EXISTS or LOWER; the caller saw "(" after it
        self.advance()
        key = self.key()
        if self.current.kind != "RPAREN":
            raise self.fail("')' after the key")
        self.advance()
        return key

    def comparison(self) -> Comparison | Exists:
        if self.at_word("EXISTS") and self.before_parenthesis():
            return Exists(self.key_in_parentheses())
        if self.at_word("LOWER") and self.before_parenthesis():
            key = self.key_in_parentheses()
            if not (self.current.kind == "OP" and self.current.text == "="):
                raise self.fail("'=' after lower(key)")
            self.advance()
            return Comparison(key, "LOWER=", self.string_literal("LOWER="))
        key = self.key()
        if self.at_keyword("IN") or self.at_keyword("NOT"):
            if self.advance().text == "NOT":
                if not self.at_keyword("IN"):
                    raise self.fail("IN after NOT")
                self.advance()
                return Comparison(key, "NOT IN", self.literal_list())
            return Comparison(key, "IN", self.literal_list())
        if self.at_word("STARTS"):
            self.advance()
            if not self.at_word("WITH"):
                raise self.fail("WITH after STARTS")
            self.advance()
            return Comparison(key, "STARTS WITH", self.string_literal("STARTS WITH"))
        if self.at_word("CONTAINS"):
            self.advance()
            return Comparison(key, "CONTAINS", self.string_literal("CONTAINS"))
        if self.at_word("HAS"):
            self.advance()
            return Comparison(key, "HAS", self.literal("a string, a number, true or false after HAS"))
        if self.current.kind != "OP":
            raise self.fail("an operator: =, !=, <, <=, >, >=, IN, NOT IN, STARTS WITH, CONTAINS or HAS")
        op = self.advance().text
        ordering = op in ORDERING_OPERATORS
        value = self.literal("a number or a string" if ordering else "a string, a number, true or false")
        if ordering and isinstance(value, bool):
            position = self.tokens[self.index - 1].position
            raise _error(position, f"a number or a string after {op}", "a boolean")
        return Comparison(key, op, value)  # type: ignore[arg-type]  # op is one of _OPERATORS

    def string_literal(self, op: str) -> str:
        shown = "lower(key) =" if op == "LOWER=" else op
        if self.current.kind != "STRING":
            raise self.fail(f"a string after {shown}")
        value = self.advance().value
        assert isinstance(value, str)
        return value

    def literal(self, expected: str) -> Value:
        token = self.current
        if token.kind in ("STRING", "NUMBER") or (token.kind == "KEYWORD" and token.value is not None):
            self.advance()
            assert token.value is not None
            return token.value
        raise self.fail(expected)

    def literal_list(self) -> tuple[Value, ...]:
        if self.current.kind != "LPAREN":
            raise self.fail("'(' opening the IN list")
        self.advance()
        items = [self.literal("a string, a number, true or false")]
        while self.current.kind == "COMMA":
            self.advance()
            if len(items) >= MAX_IN_ITEMS:
                raise self.fail(f"at most {MAX_IN_ITEMS} values in an IN list")
            items.append(self.literal("a string, a number, true or false"))
        if self.current.kind != "RPAREN":
            raise self.fail("',' or ')' in the IN list")
        self.advance()
        return tuple(items)


def parse(text: str) -> Node | None:
    """The expression's syntax tree (None for an empty expression); FilterSyntaxError if malformed."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise _error(MAX_EXPRESSION_LENGTH, f"at most {MAX_EXPRESSION_LENGTH} characters", f"{len(text)}")
    if "\x00" in text:
        raise _error(text.index("\x00"), "no NUL character", "'\\x00'")
    parser = _Parser(tokenize(text))
    if parser.current.kind == "END":
        return None
    node = parser.or_expr(0)
    if parser.current.kind != "END":
        raise parser.fail("AND, OR or end of input")
    return node


def keys_of(node: Node) -> list[str]:
    """Every key the expression compares, in order of appearance."""
    if isinstance(node, Comparison | Exists):
        return [node.key]
    if isinstance(node, Not):
        return keys_of(node.operand)
    return [key for operand in node.operands for key in keys_of(operand)]


def _json_type(value: Value) -> str:
    if isinstance(value, bool):
        return "boolean"
    return "string" if isinstance(value, str) else "number"


class _Compiler:
    def __init__(self, scoped: bool) -> None:
        self.params: dict[str, object] = {}
        # Containment in the store-scoped form (Predicate.scoped_sql), which the shared GIN index answers.
        self.scoped = scoped

    def bind(self, value: object) -> str:
        name = f"mf{len(self.params)}"
        self.params[name] = value
        return f"%({name})s"

    def node(self, node: Node) -> str:
        if isinstance(node, Comparison):
            return self.comparison(node)
        if isinstance(node, Exists):
            return f"metadata ? {self.bind(node.key)}::text"
        if isinstance(node, Not):
            return f"NOT ({self.node(node.operand)})"
        joiner = " AND " if isinstance(node, And) else " OR "
        return joiner.join(f"({self.node(operand)})" for operand in node.operands)

    def contains(self, key: str, value: object) -> str:
        # Containment of a one-key object: typed equality that the GIN index on metadata can answer.
        return contains_sql(f"{self.bind(json.dumps({key: value}))}::jsonb", self.scoped)

    def comparison(self, c: Comparison) -> str:
        if c.op == "=":
            return self.contains(c.key, c.value)
        if c.op == "HAS":
            return self.contains(c.key, [c.value])  # an array holding the value, among others
        if c.op in LIST_OPERATORS:
            assert isinstance(c.value, tuple)
            listed = self.bind([json.dumps({c.key: v}) for v in c.value])
            if c.op == "IN":
                if self.scoped:
                    scoped = f"chunk_metadata_scopes({METADATA_SCOPE}, {listed}::jsonb[])"
                    return f"{SCOPED_METADATA} @> ANY({scoped})"
                return f"metadata @> ANY({listed}::jsonb[])"
            types = self.bind(sorted({_json_type(v) for v in c.value}))
            key = self.bind(c.key)
            # NOT IN holds for a value of one of the listed types that is none of the listed values.
            return (
                f"COALESCE(jsonb_typeof(metadata -> {key}::text) = ANY({types}::text[])"
                f" AND NOT metadata @> ANY({listed}::jsonb[]), false)"
            )
        assert not isinstance(c.value, tuple)
        key = self.bind(c.key)
        json_type = _json_type(c.value)  # one of three fixed words, never caller text
        if c.op == "CONTAINS":
            # A string holding the value, or a list holding such a string (Bedrock's stringContains).
            needle = self.bind(c.value)
            items = f"jsonb_array_elements(metadata -> {key}::text) AS item"
            return (
                f"COALESCE(CASE jsonb_typeof(metadata -> {key}::text)"
                f" WHEN 'string' THEN strpos(metadata ->> {key}::text, {needle}::text) > 0"
                f" WHEN 'array' THEN EXISTS (SELECT FROM {items}"
                f" WHERE jsonb_typeof(item) = 'string' AND strpos(item #>> '{{}}', {needle}::text) > 0)"
                " ELSE false END, false)"
            )
        if c.op == "STARTS WITH":
            # starts_with, not LIKE: the value is literal text, % and _ included.
            compare = f"starts_with(metadata ->> {key}::text, {self.bind(c.value)}::text)"
        elif c.op == "LOWER=":
            compare = f"lower(metadata ->> {key}::text) = lower({self.bind(c.value)}::text)"
        elif json_type == "string" and c.op != "!=":
            # Byte order of UTF-8 = code point order, whatever the database's default collation.
            compare = f'(metadata ->> {key}::text) COLLATE "C" {c.op} {self.bind(c.value)}::text'
        else:
            # jsonb compares numbers numerically; the type check keeps comparisons typed.
            sql_op = "<>" if c.op == "!=" else c.op
            compare = f"(metadata -> {key}::text) {sql_op} {self.bind(json.dumps(c.value))}::jsonb"
        # COALESCE: a missing key makes the comparison false, never NULL, so NOT stays two-valued.
        return f"COALESCE(jsonb_typeof(metadata -> {key}::text) = '{json_type}' AND {compare}, false)"


# The indexed expression of the shared metadata index of `chunks` (migration 12).
SCOPED_METADATA = "chunk_metadata_scope(store_id, metadata)"


def contains_sql(value_sql: str, scoped: bool) -> str:
    """`metadata @> value`, or its store-scoped form (Predicate.scoped_sql)."""
    if scoped:
        return f"{SCOPED_METADATA} @> chunk_metadata_scope({METADATA_SCOPE}, {value_sql})"
    return f"metadata @> {value_sql}"


def compile_node(node: Node) -> Predicate:
    """The SQL predicate over the `metadata` jsonb column for `node`, values bound as `mf0`, `mf1`, ...

    Compiled twice, as it is and store-scoped: the two bind the same values under the same names.
    """
    plain, scoped = _Compiler(scoped=False), _Compiler(scoped=True)
    sql, scoped_sql = plain.node(node), scoped.node(node)
    return Predicate(
        sql,
        plain.params,
        scoped_sql=scoped_sql if scoped_sql != sql else None,
        scoped_index_finds_rows=index_finds_rows(node),
    )


def index_finds_rows(node: Node) -> bool:
    """Whether the rows matching `node` all come out of the metadata GIN index: an equality or HAS
    (containment), an AND with one such part, an OR of such parts. IN (`@> ANY`), NOT, EXISTS and the
    typed comparisons are checked row by row."""
    if isinstance(node, Comparison):
        return node.op in ("=", "HAS")
    if isinstance(node, And):
        return any(index_finds_rows(operand) for operand in node.operands)
    if isinstance(node, Or):
        return all(index_finds_rows(operand) for operand in node.operands)
    return False
