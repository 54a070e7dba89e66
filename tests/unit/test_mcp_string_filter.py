"""memory_search's string filter, translated into the public filter language (filters/string_form.py)."""

from __future__ import annotations

from retrieval_core.filters.expression import Comparison, Node, Not, parse
from retrieval_core.filters.string_form import memory_filter, typed_forms


def test_a_string_has_the_typed_forms_whose_string_form_it_is() -> None:
    assert typed_forms("2024") == [2024]
    assert typed_forms("-3") == [-3]
    assert typed_forms("2024.5") == [2024.5]
    assert typed_forms("true") == [True] and typed_forms("false") == [False]
    # Not the string form of any JSON value but a string: no other match.
    for text in ("02024", "1e3", "True", "2024.", ".5", "+1", "1_000", " 1", "NaN", "platform"):
        assert typed_forms(text) == [], text


def test_only_strings_with_typed_forms_become_an_expression() -> None:
    assert memory_filter(None) is None and memory_filter({}) is None
    assert memory_filter({"team": "sre", "year": 2024}) == {"team": "sre", "year": 2024}
    assert memory_filter({"year": "2024", "team": "sre"}) == 'year IN ("2024", 2024) AND team = "sre"'
    assert memory_filter({"draft": "false"}) == 'draft IN ("false", false)'


def test_a_key_the_language_cannot_name_keeps_the_string_only_equality() -> None:
    assert memory_filter({"project-name": "x", "year": "2024"}) == {"project-name": "x", "year": "2024"}
    assert memory_filter({"in": "2024"}) == {"in": "2024"}  # a keyword


def test_values_round_trip_through_the_parser_whatever_quotes_and_backslashes_they_hold() -> None:
    for value in ['say "hi"', "back\\slash", "'single'", '\\"', "a\\\\b"]:
        expression = memory_filter({"year": "1", "note": value})
        assert isinstance(expression, str)
        node = parse(expression)
        assert node is not None
        comparisons = [c for c in _comparisons(node) if c.key == "note"]
        assert comparisons == [Comparison("note", "=", value)]


def _comparisons(node: Node) -> list[Comparison]:
    if isinstance(node, Comparison):
        return [node]
    if isinstance(node, Not):
        return _comparisons(node.operand)
    return [c for operand in node.operands for c in _comparisons(operand)]
