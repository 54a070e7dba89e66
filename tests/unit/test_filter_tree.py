"""The JSON filter tree (Bedrock's shape): reading, limits, the allow-list, the request model, cache keys
and the translation to Gemini's filter syntax."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_core.backends.gemini.service import gemini_filter
from retrieval_core.cache.cache_keys import search_key
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.filters.exceptions import FilterKeyNotAllowedError, FilterTreeError
from retrieval_core.filters.expression import (
    MAX_COMPARISONS,
    MAX_DEPTH,
    MAX_IN_ITEMS,
    And,
    Comparison,
    parse,
)
from retrieval_core.filters.sql import filter_keys, metadata_predicate
from retrieval_core.filters.tree import TREE_OPERATORS, is_tree, parse_tree
from retrieval_core.schemas.retrieve import RetrieveRequest
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest

TREE_EXAMPLE = {
    "andAll": [
        {"equals": {"key": "year", "value": 2024}},
        {"startsWith": {"key": "title", "value": "Kube"}},
    ]
}


def tree_error(tree: Any) -> FilterTreeError:
    with pytest.raises(FilterTreeError) as caught:
        parse_tree(tree)
    assert caught.value.status_code == 422 and caught.value.code == "invalid_metadata_filter"
    return caught.value


def test_a_tree_means_what_the_same_expression_means() -> None:
    node = parse_tree(TREE_EXAMPLE)
    assert node == And((Comparison("year", "=", 2024), Comparison("title", "STARTS WITH", "Kube")))
    assert node == parse("year = 2024 AND title STARTS WITH 'Kube'")
    assert (
        metadata_predicate(TREE_EXAMPLE).sql
        == metadata_predicate("year = 2024 AND title STARTS WITH 'Kube'").sql
    )


def test_a_tree_is_an_object_whose_single_key_is_an_operator() -> None:
    assert is_tree({"equals": {"key": "a", "value": 1}})
    assert is_tree({"in": "x"})  # reserved: malformed, never an equality on a key named "in"
    assert not is_tree({"year": 2024})
    assert not is_tree({"in": "x", "year": 2024})
    assert not is_tree({})
    assert tree_error({"in": "x"}).details["field"] == "metadataFilter.in"
    # Two keys: the equality map, as before.
    assert metadata_predicate({"in": "x", "year": 2024}).sql == "metadata @> %(metadata_contains)s::jsonb"


def test_keys_of_any_form_are_the_allow_list_input() -> None:
    tree = {"orAll": [TREE_EXAMPLE, {"exists": {"key": "draft"}}, {"notIn": {"key": "team", "value": ["x"]}}]}
    assert filter_keys(tree) == ["year", "title", "draft", "team"]
    with pytest.raises(FilterKeyNotAllowedError) as caught:
        metadata_predicate(tree, frozenset({"year", "title", "team"}))
    assert caught.value.details["key"] == "draft"
    assert metadata_predicate(tree, frozenset({"year", "title", "team", "draft"})).metadata_keys == {
        "year",
        "title",
        "draft",
        "team",
    }


def test_limits_are_422s_naming_the_limit() -> None:
    deep: dict[str, Any] = {"equals": {"key": "a", "value": 1}}
    for _ in range(MAX_DEPTH + 1):
        deep = {"andAll": [deep]}
    assert "levels" in tree_error(deep).details["expected"]
    many = {"orAll": [{"equals": {"key": "a", "value": i}} for i in range(MAX_COMPARISONS + 1)]}
    assert f"at most {MAX_COMPARISONS} comparisons" in tree_error(many).details["expected"]
    long_list = {"in": {"key": "a", "value": list(range(MAX_IN_ITEMS + 1))}}
    assert tree_error(long_list).details["field"] == "metadataFilter.in.value"
    assert (
        tree_error({"equals": {"key": "k" * 257, "value": 1}}).details["field"] == "metadataFilter.equals.key"
    )


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), "nul\x00", "\ud800", None, {"a": 1}, [1]], ids=repr
)
def test_values_postgresql_cannot_hold_or_compare_are_refused(value: object) -> None:
    error = tree_error({"equals": {"key": "a", "value": value}})
    assert error.details["field"] == "metadataFilter.equals.value"


def test_the_request_model_keeps_a_tree_and_still_validates_equalities() -> None:
    request = SimilaritySearchRequest.model_validate(
        {"queryEmbedding": [1.0], "metadataFilter": TREE_EXAMPLE}
    )
    assert request.metadata_filter == TREE_EXAMPLE
    with pytest.raises(ValueError, match=r"metadataFilter\.year"):
        SimilaritySearchRequest.model_validate({"queryEmbedding": [1.0], "metadataFilter": {"year": [2024]}})


def _key(metadata_filter: object) -> str:
    request = SimilaritySearchRequest.model_validate(
        {"queryEmbedding": [1.0], "metadataFilter": metadata_filter}
    )
    return search_key(
        backend="pgvector",
        store="s",
        store_version=1,
        operation="similarity-search",
        request=request.model_dump(mode="json", exclude={"store"}),
        context={},
    )


def test_cache_keys_differ_for_different_trees_and_not_for_member_order() -> None:
    other_value = {"andAll": [TREE_EXAMPLE["andAll"][0], {"startsWith": {"key": "title", "value": "kube"}}]}
    other_operator = {
        "andAll": [TREE_EXAMPLE["andAll"][0], {"stringContains": {"key": "title", "value": "Kube"}}]
    }
    keys = {_key(t) for t in (TREE_EXAMPLE, other_value, other_operator, {"orAll": TREE_EXAMPLE["andAll"]})}
    assert len(keys) == 4
    reordered = {
        "andAll": [
            {"equals": {"value": 2024, "key": "year"}},
            {"startsWith": {"value": "Kube", "key": "title"}},
        ]
    }
    assert _key(reordered) == _key(TREE_EXAMPLE)


def test_trees_gemini_can_express_are_translated() -> None:
    tree = {
        "andAll": [
            {"greaterThanOrEquals": {"key": "year", "value": 2023}},
            {"in": {"key": "source_type", "value": ["s3", "web"]}},
            {
                "orAll": [
                    {"notEquals": {"key": "team", "value": "x"}},
                    {"lessThan": {"key": "rank", "value": 2.5}},
                ]
            },
        ]
    }
    assert gemini_filter(tree) == (
        '(year >= 2023) AND (source_type = "s3" OR source_type = "web") AND ((team != "x") OR (rank < 2.5))'
    )


@pytest.mark.parametrize(
    ("operator", "operand"),
    [
        ("startsWith", {"key": "title", "value": "Kube"}),
        ("stringContains", {"key": "title", "value": "netes"}),
        ("listContains", {"key": "tags", "value": "k8s"}),
        ("equalsIgnoreCase", {"key": "title", "value": "kube"}),
        ("notIn", {"key": "year", "value": [2024]}),
        ("exists", {"key": "year"}),
    ],
)
def test_trees_gemini_cannot_express_are_refused_naming_the_operator(operator: str, operand: Any) -> None:
    nested = {"andAll": [{"equals": {"key": "year", "value": 2024}}, {operator: operand}]}
    with pytest.raises(InvalidRequestError) as caught:
        gemini_filter(nested)
    assert caught.value.status_code == 422
    assert operator in caught.value.message
    assert caught.value.details["errors"][0]["field"] == "metadataFilter"


def _operators(tree: Any) -> set[str]:
    ((name, operand),) = tree.items()
    if isinstance(operand, list):
        return {name}.union(*(_operators(item) for item in operand))
    return {name}


def test_the_openapi_schema_shows_every_operator_with_an_example_that_works() -> None:
    schema = RetrieveRequest.model_json_schema(by_alias=True)["properties"]["metadataFilter"]
    tree, expression = (
        next(s for s in schema["anyOf"] if "examples" in s and s.get("type") == kind)
        for kind in ("object", "string")
    )
    assert set().union(*(_operators(t) for t in tree["examples"])) == TREE_OPERATORS
    for example in tree["examples"]:
        metadata_predicate(example)
    words = " ".join(expression["examples"])
    for syntax in ("STARTS WITH", "CONTAINS", "HAS", "NOT IN", "lower(", "EXISTS(", "NOT ", " AND ", " OR "):
        assert syntax in words
    for example in expression["examples"]:
        assert parse(example) is not None
