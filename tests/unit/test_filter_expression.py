from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.filters.exceptions import FilterKeyNotAllowedError, FilterSyntaxError
from retrieval_core.filters.expression import (
    MAX_COMPARISONS,
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    MAX_IN_ITEMS,
    And,
    Comparison,
    Exists,
    Node,
    Not,
    Or,
    compile_node,
    index_finds_rows,
    parse,
)
from retrieval_core.filters.predicate import TRUE
from retrieval_core.filters.sql import document_ids_in, metadata_predicate
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest
from retrieval_core.settings import Settings
from tests.filter_strategies import INJECTIONS, expressions, only_fixed_fragments, quote, render


def c(key: str, op: str, value: object) -> Comparison:
    return Comparison(key, op, value)  # type: ignore[arg-type]


def syntax_error(text: str) -> FilterSyntaxError:
    with pytest.raises(FilterSyntaxError) as caught:
        parse(text)
    return caught.value


# Parsing ---------------------------------------------------------------------------------------


def test_simple_equalities_parse() -> None:
    assert parse("source_type = 's3'") == c("source_type", "=", "s3")
    assert parse("project_name = 'ABC Project'") == c("project_name", "=", "ABC Project")
    assert parse('author = "Robert Graves"') == c("author", "=", "Robert Graves")


def test_a_mixed_expression_parses_with_not_binding_tighter_than_and() -> None:
    node = parse("project_name = 'ABC Project' AND (source_type = 's3' OR year >= 2023) AND NOT draft = true")
    assert node == And(
        (
            c("project_name", "=", "ABC Project"),
            Or((c("source_type", "=", "s3"), c("year", ">=", 2023))),
            Not(c("draft", "=", True)),
        )
    )


def test_and_binds_tighter_than_or_and_parentheses_override() -> None:
    assert parse("a = 1 OR b = 2 AND c = 3") == Or((c("a", "=", 1), And((c("b", "=", 2), c("c", "=", 3)))))
    assert parse("(a = 1 OR b = 2) AND c = 3") == And((Or((c("a", "=", 1), c("b", "=", 2))), c("c", "=", 3)))
    assert parse("NOT a = 1 OR b = 2") == Or((Not(c("a", "=", 1)), c("b", "=", 2)))
    assert parse("NOT (a = 1 OR b = 2)") == Not(Or((c("a", "=", 1), c("b", "=", 2))))
    assert parse("NOT NOT a = 1") == Not(Not(c("a", "=", 1)))


def test_keywords_and_booleans_are_case_insensitive() -> None:
    assert parse("a = TRUE and not b = False or c = true") == Or(
        (And((c("a", "=", True), Not(c("b", "=", False)))), c("c", "=", True))
    )


def test_in_lists_and_every_operator() -> None:
    assert parse("k IN ('a', 2, true)") == c("k", "IN", ("a", 2, True))
    assert parse("k in (1)") == c("k", "IN", (1,))
    for op in ["=", "!=", "<", "<=", ">", ">="]:
        assert parse(f"k {op} 1") == c("k", op, 1)
    assert parse("k>=1 AND j!='x'") == And((c("k", ">=", 1), c("j", "!=", "x")))


def test_numbers_negative_float_and_exponent() -> None:
    assert parse("x > -1.5") == c("x", ">", -1.5)
    assert parse("x = 1e3") == c("x", "=", 1000.0)
    assert parse("x = -0") == c("x", "=", 0)
    assert parse("x = 2.5E-1") == c("x", "=", 0.25)
    big = "123456789012345678901234567890"
    assert parse(f"x = {big}") == c("x", "=", int(big))
    assert type(c("x", "=", 1).value) is int


def test_string_escapes() -> None:
    assert parse("n = 'O''Brien'") == c("n", "=", "O'Brien")
    assert parse(r"n = 'O\'Brien'") == c("n", "=", "O'Brien")
    assert parse(r'n = "say \"hi\""') == c("n", "=", 'say "hi"')
    assert parse('n = "it\'s ""x"""') == c("n", "=", 'it\'s "x"')
    assert parse(r"n = 'C:\\dir'") == c("n", "=", "C:\\dir")
    assert parse("n = ''") == c("n", "=", "")
    assert parse("n = '東京 — é'") == c("n", "=", "東京 — é")


def test_empty_expression_is_no_filter() -> None:
    assert parse("") is None
    assert parse("   ") is None
    assert metadata_predicate("  ", None) is TRUE


@pytest.mark.parametrize(
    ("text", "position", "expected", "found"),
    [
        ("a = ", 4, "a string, a number, true or false", "end of input"),
        ("a == 1", 3, "a string, a number, true or false", "'='"),
        ("(a = 1", 6, "')' or AND/OR", "end of input"),
        ("a = 1)", 5, "AND, OR or end of input", "')'"),
        ("a = 'x", 4, "a closing ' for the string starting here", "end of input"),
        ("a @ 1", 2, "a key, a value, an operator or a parenthesis", "'@'"),
        ("a < true", 4, "a number or a string after <", "a boolean"),
        ("and = 1", 0, "a metadata key, NOT or '('", "'AND'"),
        ("a 1", 2, "an operator: =, !=, <, <=, >, >=, IN, NOT IN, STARTS WITH, CONTAINS or HAS", "'1'"),
        ("a IN ()", 6, "a string, a number, true or false", "')'"),
        ("a IN 1", 5, "'(' opening the IN list", "'1'"),
        ("a IN (1 2)", 8, "',' or ')' in the IN list", "'2'"),
        ("a = 1 AND", 9, "a metadata key, NOT or '('", "end of input"),
        (r"a = 'x\n'", 6, "an escape: \\\\, \\' or \\\"", "'\\\\n'"),
        ("a = 1.", 4, "a number", "'1.'"),
        ("a = 12abc", 4, "a number", "'12a'"),
        ("a = b", 4, "a string, a number, true or false", "'b'"),
        ("a = 1 b = 2", 6, "AND, OR or end of input", "'b'"),
    ],
)
def test_syntax_errors_name_position_expected_and_found(
    text: str, position: int, expected: str, found: str
) -> None:
    error = syntax_error(text)
    assert error.status_code == 422
    assert isinstance(error, InvalidRequestError)
    assert error.details["position"] == position
    assert error.details["expected"] == expected
    assert error.details["found"] == found
    assert f"at position {position}" in error.message


def test_limits_are_422s_naming_the_limit() -> None:
    too_long = syntax_error("a = '" + "x" * MAX_EXPRESSION_LENGTH + "'")
    assert too_long.details["position"] == MAX_EXPRESSION_LENGTH
    assert str(MAX_EXPRESSION_LENGTH) in too_long.details["expected"]

    assert parse("(" * MAX_DEPTH + "a = 1" + ")" * MAX_DEPTH) == c("a", "=", 1)
    too_deep = syntax_error("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1))
    assert too_deep.details["position"] == MAX_DEPTH
    assert "levels" in too_deep.details["expected"]
    assert "levels" in syntax_error("NOT " * (MAX_DEPTH + 1) + "a = 1").details["expected"]

    in_list = ", ".join(str(i) for i in range(MAX_IN_ITEMS))
    assert parse(f"k IN ({in_list})") == c("k", "IN", tuple(range(MAX_IN_ITEMS)))
    too_many = syntax_error(f"k IN ({in_list}, 100)")
    assert f"at most {MAX_IN_ITEMS} values" in too_many.details["expected"]

    many = " OR ".join(f"k = {i}" for i in range(MAX_COMPARISONS))
    assert isinstance(parse(many), Or)
    over = syntax_error(many + " OR k = 1")
    assert over.details["position"] == len(many) + 4
    assert f"at most {MAX_COMPARISONS} comparisons" in over.details["expected"]

    huge_number = syntax_error("x = 1e999")
    assert huge_number.details["expected"] == "a finite number"


def test_nul_is_refused() -> None:
    assert syntax_error("a = 'x\x00'").details["position"] == 6


# Compiling -------------------------------------------------------------------------------------


def compiled(text: str) -> tuple[str, dict[str, object]]:
    node = parse(text)
    assert node is not None
    predicate = compile_node(node)
    return predicate.sql, predicate.params


def test_equality_is_a_one_key_containment_with_a_json_parameter() -> None:
    sql, params = compiled("project_name = 'ABC Project'")
    assert sql == "metadata @> %(mf0)s::jsonb"
    assert params == {"mf0": json.dumps({"project_name": "ABC Project"})}
    assert compiled("draft = true")[1] == {"mf0": '{"draft": true}'}
    assert compiled("year = 2023")[1] == {"mf0": '{"year": 2023}'}


def test_in_is_containment_of_any_one_key_object() -> None:
    sql, params = compiled("k IN ('a', 1, false)")
    assert sql == "metadata @> ANY(%(mf0)s::jsonb[])"
    assert params == {"mf0": ['{"k": "a"}', '{"k": 1}', '{"k": false}']}


def test_ordering_is_typed_and_missing_keys_are_false_not_null() -> None:
    sql, params = compiled("year >= 2023")
    assert sql == (
        "COALESCE(jsonb_typeof(metadata -> %(mf0)s::text) = 'number'"
        " AND (metadata -> %(mf0)s::text) >= %(mf1)s::jsonb, false)"
    )
    assert params == {"mf0": "year", "mf1": "2023"}
    sql, params = compiled("name < 'm'")
    assert "= 'string'" in sql and 'COLLATE "C" < %(mf1)s::text' in sql
    assert params == {"mf0": "name", "mf1": "m"}
    sql, params = compiled("draft != true")
    assert "= 'boolean'" in sql and "<> %(mf1)s::jsonb" in sql
    assert params == {"mf0": "draft", "mf1": "true"}


def test_boolean_structure_and_parameter_names() -> None:
    sql, params = compiled("NOT (a = 1 OR b = 2) AND c != 'x'")
    assert sql.startswith(
        "(NOT ((metadata @> %(mf0)s::jsonb) OR (metadata @> %(mf1)s::jsonb))) AND (COALESCE("
    )
    assert list(params) == ["mf0", "mf1", "mf2", "mf3"]


def test_metadata_predicate_dispatches_on_the_form() -> None:
    equalities = metadata_predicate({"year": 2023}, None)
    assert equalities.sql == "metadata @> %(metadata_contains)s::jsonb"
    expression = metadata_predicate("year = 2023", None)
    assert expression.sql == "metadata @> %(mf0)s::jsonb"
    assert metadata_predicate(None, None) is TRUE
    assert metadata_predicate({}, frozenset({"a"})) is TRUE
    combined = document_ids_in(["d"]) & metadata_predicate("a = 1 AND b IN (1, 2)", None)
    assert set(combined.params) == {"document_ids", "mf0", "mf1"}


def test_allowed_keys_reject_other_keys_in_both_forms() -> None:
    allowed = frozenset({"project", "year"})
    assert metadata_predicate("project = 'x' AND year > 1", allowed).params
    assert metadata_predicate({"project": "x"}, allowed).params
    attempts: list[str | dict[str, str | int]] = [
        "project = 'x' AND NOT (secret = 1)",
        {"project": "x", "secret": 1},
    ]
    for value in attempts:
        with pytest.raises(FilterKeyNotAllowedError) as caught:
            metadata_predicate(value, allowed)
        assert caught.value.status_code == 422
        assert caught.value.details["key"] == "secret"
        assert caught.value.details["allowedKeys"] == ["project", "year"]


def test_allowed_metadata_keys_setting_parses_a_comma_separated_list() -> None:
    assert Settings(allowed_metadata_keys="").metadata_keys_allowed is None
    assert Settings(allowed_metadata_keys=" project, year ,,").metadata_keys_allowed == frozenset(
        {"project", "year"}
    )


def test_request_models_accept_either_form_and_refuse_nul_and_overlong_text() -> None:
    vector = [0.0, 1.0]
    as_text = SimilaritySearchRequest.model_validate(
        {"queryEmbedding": vector, "metadataFilter": "year >= 2023"}
    )
    assert as_text.metadata_filter == "year >= 2023"
    as_object = SimilaritySearchRequest.model_validate(
        {"queryEmbedding": vector, "metadataFilter": {"year": 2023}}
    )
    assert as_object.metadata_filter == {"year": 2023}
    for bad in ["a = '\x00'", "a = '" + "x" * MAX_EXPRESSION_LENGTH + "'"]:
        with pytest.raises(ValueError):
            SimilaritySearchRequest.model_validate({"queryEmbedding": vector, "metadataFilter": bad})


# Properties ------------------------------------------------------------------------------------

RESERVED = {"document_ids", "query_vector", "limit", "metadata_contains", "ef_search", "bitmapscan"}


def _values_of(node: Node) -> list[object]:
    if isinstance(node, Exists):
        return [node.key]
    if isinstance(node, Comparison):
        listed = node.value if isinstance(node.value, tuple) else (node.value,)
        return [node.key, *listed]
    if isinstance(node, Not):
        return _values_of(node.operand)
    return [v for n in node.operands for v in _values_of(n)]


def _param_values(params: dict[str, object]) -> list[object]:
    found: list[object] = []
    for value in params.values():
        for item in value if isinstance(value, list) else [value]:
            assert isinstance(item, str)
            try:
                decoded = json.loads(item)
            except json.JSONDecodeError:
                found.append(item)
                continue
            if isinstance(decoded, dict):  # {key: value}, or {key: [value]} for HAS
                held = [v if isinstance(v, list) else [v] for v in decoded.values()]
                inner = [v for values in held for v in values]
                found.extend([*decoded.keys(), *inner])
            else:
                found.extend([item, decoded])
    return found


def _neutral(node: Node) -> Node:
    """`node` with every key replaced by `k` and every value by a plain one of the same JSON type."""

    def plain(value: object) -> object:
        return value if isinstance(value, bool) else "x" if isinstance(value, str) else 0

    if isinstance(node, Exists):
        return Exists("k")
    if isinstance(node, Comparison):
        value = node.value
        return c("k", node.op, tuple(map(plain, value)) if isinstance(value, tuple) else plain(value))
    if isinstance(node, Not):
        return Not(_neutral(node.operand))
    return type(node)(tuple(map(_neutral, node.operands)))


def assert_sql_is_independent_of_keys_and_values(node: Node) -> None:
    """No key or value reaches the SQL text: it equals the text compiled for neutral keys and values."""
    predicate = compile_node(node)
    assert predicate.sql == compile_node(_neutral(node)).sql
    assert only_fixed_fragments(predicate.sql), predicate.sql


any_values = (
    st.text(max_size=20).filter(lambda v: "\x00" not in v)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
)
any_keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True).filter(
    lambda k: k.upper() not in {"AND", "OR", "NOT", "IN", "TRUE", "FALSE"}
)


@settings(max_examples=200)
@given(expressions(any_keys, any_values), st.integers(0, 5))
def test_well_formed_expressions_round_trip_and_values_travel_only_as_parameters(
    node: Node, style: int
) -> None:
    text = render(node, style)
    assert parse(text) == node
    assert_sql_is_independent_of_keys_and_values(node)
    predicate = compile_node(node)
    placeholders = set(re.findall(r"%\((\w+)\)s", predicate.sql))
    assert placeholders == set(predicate.params)
    assert all(re.fullmatch(r"mf\d+", name) for name in placeholders)
    # The store-scoped form binds the same values, and the store id as `metadata_scope`.
    assert set(re.findall(r"%\((\w+)\)s", predicate.chunk_sql)) - {"metadata_scope"} == placeholders
    assert not placeholders & RESERVED
    carried = _param_values(predicate.params)
    for value in _values_of(node):
        assert any(type(value) is type(v) and value == v for v in carried), value


injection_text = st.sampled_from(INJECTIONS) | st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), min_size=1, max_size=30
)


@settings(max_examples=200)
@given(injection_text, st.integers(0, 2))
def test_injection_strings_as_keys_raise_or_compile_to_fixed_sql(attack: str, style: int) -> None:
    for template in ("{} = 1", "k = 1 AND {} != 'x'", "{} IN (1)", "NOT {} <= 'x'"):
        try:
            node = parse(template.format(attack))
        except FilterSyntaxError:
            continue
        assert node is not None
        assert_sql_is_independent_of_keys_and_values(node)


@settings(max_examples=200)
@given(injection_text, st.integers(0, 2))
def test_injection_strings_as_literals_are_bound_values(attack: str, style: int) -> None:
    quoted = metadata_predicate(f"k = {quote(attack, style)} OR k < {quote(attack, style)}", None)
    assert quoted.sql == metadata_predicate("k = 'x' OR k < 'x'", None).sql
    assert json.loads(quoted.params["mf0"]) == {"k": attack}
    assert quoted.params["mf2"] == attack
    # Unescaped, the attack either breaks the syntax or is itself a well-formed, bound expression.
    for text in (f"k = '{attack}'", f'k = "{attack}"', f"k IN ('{attack}')"):
        try:
            node = parse(text)
        except FilterSyntaxError:
            continue
        assert node is not None
        assert_sql_is_independent_of_keys_and_values(node)


grammar_junk = st.text(
    alphabet=st.sampled_from(list("ab_k1 2.-e'\"\\()=!<>,ANDORNTINtrufals\t")), max_size=60
)


@settings(max_examples=300)
@given(grammar_junk | st.text(max_size=80))
def test_junk_raises_only_filter_errors(text: str) -> None:
    for allowed in (None, frozenset({"a", "k"})):
        try:
            predicate = metadata_predicate(text, allowed)
        except (FilterSyntaxError, FilterKeyNotAllowedError) as error:
            assert error.status_code == 422
            continue
        assert only_fixed_fragments(predicate.sql), predicate.sql


# The operators of the full filter language ---------------------------------------------------------


def test_the_new_operators_parse_in_any_case() -> None:
    assert parse("title starts with 'Kube'") == c("title", "STARTS WITH", "Kube")
    assert parse("title Contains '%'") == c("title", "CONTAINS", "%")
    assert parse("tags has 3") == c("tags", "HAS", 3)
    assert parse("tags HAS true") == c("tags", "HAS", True)
    assert parse("year not in (1, '1')") == c("year", "NOT IN", (1, "1"))
    assert parse("LOWER(title) = 'x'") == c("title", "LOWER=", "x")
    assert parse("NOT exists(draft)") == Not(Exists("draft"))


def test_operator_words_stay_usable_as_keys() -> None:
    for word in ("starts", "with", "contains", "has", "lower", "exists"):
        assert parse(f"{word} = 1") == c(word, "=", 1)
    assert parse("has HAS 'x'") == c("has", "HAS", "x")
    assert parse("starts STARTS WITH 'x'") == c("starts", "STARTS WITH", "x")
    assert parse("lower(lower) = 'x' AND exists(exists)") == And(
        (c("lower", "LOWER=", "x"), Exists("exists"))
    )


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("title STARTS 'x'", 13, "WITH after STARTS"),
        ("title STARTS WITH 1", 18, "a string after STARTS WITH"),
        ("title CONTAINS x", 15, "a string after CONTAINS"),
        ("lower(title) != 'x'", 13, "'=' after lower(key)"),
        ("lower(title) = 1", 15, "a string after lower(key) ="),
        ("lower(title = 'x'", 12, "')' after the key"),
        ("EXISTS()", 7, "a metadata key, NOT or '('"),
        ("year NOT (1)", 9, "IN after NOT"),
        ("tags HAS (1)", 9, "a string, a number, true or false after HAS"),
    ],
)
def test_malformed_new_operators_name_what_was_expected(text: str, position: int, expected: str) -> None:
    error = syntax_error(text)
    assert (error.details["position"], error.details["expected"]) == (position, expected)


def test_text_operators_bind_the_value_as_literal_text() -> None:
    predicate = compile_node(c("title", "STARTS WITH", "100%_\\"))
    assert "LIKE" not in predicate.sql and "starts_with(" in predicate.sql
    assert predicate.params["mf1"] == "100%_\\"
    contains = compile_node(c("title", "CONTAINS", "%"))
    assert "LIKE" not in contains.sql and contains.params["mf1"] == "%"


def test_containment_serves_equals_in_and_has_only() -> None:
    # The GIN index (jsonb_path_ops) answers `metadata @> ...` alone.
    for op, value in (("=", 1), ("IN", (1, 2)), ("HAS", "k8s")):
        assert compile_node(c("k", op, value)).sql.startswith("metadata @> ")
    assert json.loads(compile_node(c("k", "HAS", "k8s")).params["mf0"]) == {"k": ["k8s"]}
    for op, value in (("!=", 1), ("NOT IN", (1,)), ("STARTS WITH", "x"), ("CONTAINS", "x"), ("LOWER=", "x")):
        assert compile_node(c("k", op, value)).sql.startswith("COALESCE(")
    assert compile_node(Exists("k")).sql == "metadata ? %(mf0)s::text"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a = 1", True),
        ("tags HAS 'x'", True),
        ("a = 1 AND b > 2", True),
        ("b > 2 AND (a = 1 OR tags HAS 'x')", True),
        ("a = 1 OR b = 2", True),
        ("a = 1 OR b > 2", False),
        ("NOT a = 1", False),
        ("a IN (1, 2)", False),
        ("exists(a)", False),
        ("a STARTS WITH 'x'", False),
    ],
)
def test_the_shared_index_finds_the_rows_of_containments_and_their_ands_and_ors(
    text: str, found: bool
) -> None:
    # The exact scan then leaves the store's own condition to no index (db/search_sql.py): a filter the
    # index cannot answer alone must say so, or the scan would read every store's chunks.
    node = parse(text)
    assert node is not None
    assert index_finds_rows(node) is found
    assert compile_node(node).scoped_index_finds_rows is found
