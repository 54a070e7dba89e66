"""Every filter operator in both forms (expression and JSON tree) on the real PostgreSQL.

Random filters are compiled and run against random metadata rows, and their answer compared
with a Python oracle of the documented semantics (tests/filter_strategies.py). A fixed store then
checks each operator through HTTP, with the answer written out by hand.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_core.filters.expression import Node, parse
from retrieval_core.filters.predicate import Predicate
from retrieval_core.filters.sql import metadata_predicate
from retrieval_core.filters.tree import parse_tree
from tests.filter_strategies import KEYS, STRINGS, TEXTS, expressions, holds, numbers, render, to_tree
from tests.writing import GivenVectors, TextDocument, ensure_store, write_documents

# --- random filters over random metadata, in SQL --------------------------------------------------

# Mixed case in several scripts, LIKE's wildcards and the backslash.
scalars = (
    st.sampled_from(TEXTS + STRINGS)
    | st.text(alphabet="aAkKäÄσΣß東%_\\ -", max_size=6)
    | numbers
    | st.booleans()
)
json_values = (
    scalars
    | st.none()
    | st.lists(scalars, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b"]), scalars, max_size=2)
)
metadata_rows = st.lists(st.dictionaries(st.sampled_from(KEYS), json_values), min_size=1, max_size=8)


@pytest.fixture(scope="module")
def conn(postgres_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        yield connection


def selected(conn: psycopg.Connection[Any], predicate: Predicate, rows: list[dict[str, Any]]) -> set[int]:
    """The 0-based positions of the `rows` the predicate holds for, as PostgreSQL evaluates it."""
    query = (
        "SELECT i - 1 FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS r(metadata, i)"
        f" WHERE {predicate.sql}"
    )
    return {row[0] for row in conn.execute(query, {**predicate.params, "rows": json.dumps(rows)})}


def expected(node: Node, rows: list[dict[str, Any]]) -> set[int]:
    return {i for i, metadata in enumerate(rows) if holds(node, metadata)}


@settings(max_examples=300, deadline=None)
@given(metadata_rows, expressions(), st.integers(0, 5))
def test_random_expressions_on_random_metadata_match_the_oracle(
    conn: psycopg.Connection[Any], rows: list[dict[str, Any]], node: Node, style: int
) -> None:
    assert selected(conn, metadata_predicate(render(node, style)), rows) == expected(node, rows)


@settings(max_examples=300, deadline=None)
@given(metadata_rows, expressions(negation=False))
def test_random_trees_on_random_metadata_match_the_oracle(
    conn: psycopg.Connection[Any], rows: list[dict[str, Any]], node: Node
) -> None:
    tree = to_tree(node)
    assert parse_tree(tree) == node
    assert selected(conn, metadata_predicate(tree), rows) == expected(node, rows)


# --- each operator through HTTP, answers written out ------------------------------------------------

SEARCH = "/api/v1/chunks/similarity-search"
STORE = "filter-operators"
DIMENSION = 4
ROWS: list[dict[str, Any]] = [
    {"title": "Kubernetes pods", "tags": ["k8s", "Ops"], "year": 2024},
    {"title": "kubernetes", "tags": "k8s", "year": "2024"},
    {"title": "100% uptime", "tags": ["100%", 3], "year": 2023.0, "draft": None},
    {"title": "a_b\\c", "tags": [], "year": 2023, "draft": False},
    {},
    {"title": ["Kube list", 7], "year": True},
    {"title": "ÄRZTE in Straße", "tags": ["Ärzte"], "year": 2022},
    {"title": "İSTANBUL ΣΟΦΙΑΣ"},
]

# (expression, tree, the rows it selects)
CASES: list[tuple[str, dict[str, Any], set[int]]] = [
    ("title STARTS WITH 'Kube'", {"startsWith": {"key": "title", "value": "Kube"}}, {0}),
    ("title STARTS WITH '100%'", {"startsWith": {"key": "title", "value": "100%"}}, {2}),
    ("title STARTS WITH '1_0'", {"startsWith": {"key": "title", "value": "1_0"}}, set()),
    ("title STARTS WITH '%'", {"startsWith": {"key": "title", "value": "%"}}, set()),
    ("title STARTS WITH 'a_'", {"startsWith": {"key": "title", "value": "a_"}}, {3}),
    ("title CONTAINS 'netes'", {"stringContains": {"key": "title", "value": "netes"}}, {0, 1}),
    ("title CONTAINS 'list'", {"stringContains": {"key": "title", "value": "list"}}, {5}),
    ("title CONTAINS '%'", {"stringContains": {"key": "title", "value": "%"}}, {2}),
    ("title CONTAINS '_'", {"stringContains": {"key": "title", "value": "_"}}, {3}),
    ("title CONTAINS '\\\\'", {"stringContains": {"key": "title", "value": "\\"}}, {3}),
    ("tags HAS 'k8s'", {"listContains": {"key": "tags", "value": "k8s"}}, {0}),
    ("tags HAS 3", {"listContains": {"key": "tags", "value": 3}}, {2}),
    ("tags HAS '3'", {"listContains": {"key": "tags", "value": "3"}}, set()),
    ("tags HAS 'ops'", {"listContains": {"key": "tags", "value": "ops"}}, set()),
    ("lower(title) = 'KUBERNETES'", {"equalsIgnoreCase": {"key": "title", "value": "KUBERNETES"}}, {1}),
    (
        "lower(title) = 'ärzte in straße'",
        {"equalsIgnoreCase": {"key": "title", "value": "ärzte in straße"}},
        {6},
    ),
    # Letter by letter, as PostgreSQL's lower() does: İ is i, a final Σ is σ.
    (
        "lower(title) = 'istanbul σοφιασ'",
        {"equalsIgnoreCase": {"key": "title", "value": "istanbul σοφιασ"}},
        {7},
    ),
    ("EXISTS(draft)", {"exists": {"key": "draft"}}, {2, 3}),
    ("year NOT IN (2024)", {"notIn": {"key": "year", "value": [2024]}}, {2, 3, 6}),
    ("year NOT IN (2024, 'x')", {"notIn": {"key": "year", "value": [2024, "x"]}}, {1, 2, 3, 6}),
    ("year IN (2023)", {"in": {"key": "year", "value": [2023]}}, {2, 3}),
    ("year != 2024", {"notEquals": {"key": "year", "value": 2024}}, {2, 3, 6}),
    ("year = 2024", {"equals": {"key": "year", "value": 2024}}, {0}),
    ("year > 2022", {"greaterThan": {"key": "year", "value": 2022}}, {0, 2, 3}),
    ("year >= 2023", {"greaterThanOrEquals": {"key": "year", "value": 2023}}, {0, 2, 3}),
    ("year < 2024", {"lessThan": {"key": "year", "value": 2024}}, {2, 3, 6}),
    ("year <= 2023", {"lessThanOrEquals": {"key": "year", "value": 2023}}, {2, 3, 6}),
    (
        "year = 2024 AND title STARTS WITH 'Kube'",
        {
            "andAll": [
                {"equals": {"key": "year", "value": 2024}},
                {"startsWith": {"key": "title", "value": "Kube"}},
            ]
        },
        {0},
    ),
    (
        "EXISTS(draft) OR tags HAS 'Ärzte'",
        {"orAll": [{"exists": {"key": "draft"}}, {"listContains": {"key": "tags", "value": "Ärzte"}}]},
        {2, 3, 6},
    ),
]


@pytest.fixture(scope="module")
def operator_store(service: Any) -> None:
    rng = random.Random(20)
    documents = []
    vectors: dict[str, list[float]] = {}
    for i, metadata in enumerate(ROWS):
        vectors[f"row {i}"] = [rng.uniform(0.1, 1.0) for _ in range(DIMENSION)]
        documents.append(TextDocument(f"row-{i}", f"row {i}", metadata=metadata))
    embedder = GivenVectors("filter-test", DIMENSION, vectors)
    ensure_store(service, STORE, embedder)
    write_documents(service, STORE, documents, 1000, 0, embedder=embedder)


def rows_selected(client: TestClient, metadata_filter: object) -> set[int]:
    body = {
        "queryEmbedding": [1.0, 0.5, 0.25, 0.125],
        "topK": 50,
        "store": STORE,
        "metadataFilter": metadata_filter,
    }
    response = client.post(SEARCH, json=body)
    assert response.status_code == 200, response.text
    return {int(r["id"].split("#")[0].removeprefix("row-")) for r in response.json()["results"]}


@pytest.mark.parametrize(("expression", "tree", "rows"), CASES, ids=[case[0] for case in CASES])
def test_each_operator_selects_the_documented_rows_in_both_forms(
    client: TestClient, operator_store: None, expression: str, tree: dict[str, Any], rows: set[int]
) -> None:
    assert rows_selected(client, expression) == rows
    assert rows_selected(client, tree) == rows
    node = parse(expression)
    assert node is not None and parse_tree(tree) == node
    assert expected(node, ROWS) == rows  # the oracle of the random tests agrees with the hand answers


def test_a_missing_key_makes_negations_false_but_not_negates_exists(
    client: TestClient, operator_store: None
) -> None:
    # Row 4 has no metadata at all: no comparison holds for it, notEquals and notIn included.
    for metadata_filter in (
        {"notEquals": {"key": "year", "value": 1}},
        {"notIn": {"key": "year", "value": [1]}},
        "year != 1",
        "year NOT IN (1)",
    ):
        assert 4 not in rows_selected(client, metadata_filter)
    assert 4 in rows_selected(client, "NOT EXISTS(year)")


@pytest.mark.parametrize(
    ("tree", "field"),
    [
        ({"andAll": []}, "metadataFilter.andAll"),
        ({"andAll": [{"equals": {"key": "year"}}]}, "metadataFilter.andAll[0].equals"),
        ({"orAll": [{"equals": {"key": "year", "value": 1}}, {"near": 1}]}, "metadataFilter.orAll[1].near"),
        ({"startsWith": {"key": "title", "value": 3}}, "metadataFilter.startsWith.value"),
        ({"in": {"key": "year", "value": 2024}}, "metadataFilter.in.value"),
        ({"in": {"key": "year", "value": [None]}}, "metadataFilter.in.value[0]"),
        ({"greaterThan": {"key": "year", "value": True}}, "metadataFilter.greaterThan.value"),
        ({"equals": {"key": "", "value": 1}}, "metadataFilter.equals.key"),
        ({"exists": {"key": "year", "value": True}}, "metadataFilter.exists"),
        ({"listContains": {"key": "tags", "value": ["a"]}}, "metadataFilter.listContains.value"),
    ],
)
def test_a_malformed_tree_is_a_422_naming_the_path(
    client: TestClient, operator_store: None, tree: dict[str, Any], field: str
) -> None:
    body = {"queryEmbedding": [1.0, 0.5, 0.25, 0.125], "store": STORE, "metadataFilter": tree}
    for path, request in (
        (SEARCH, body),
        ("/api/v1/rag/retrieve", {"query": "pods", "grade": 0, "metadataFilter": tree}),
    ):
        response = client.post(path, json=request)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_metadata_filter"
        assert error["details"]["field"] == field
        assert error["message"].startswith(f"{field}: expected ")


def test_a_key_named_like_an_operator_is_a_tree_only_as_the_single_key(
    client: TestClient, operator_store: None
) -> None:
    # {"in": ...} alone is a tree (malformed here); beside another key it is an equality again.
    assert (
        client.post(
            SEARCH,
            json={"queryEmbedding": [1.0, 0.5, 0.25, 0.125], "store": STORE, "metadataFilter": {"in": "x"}},
        ).status_code
        == 422
    )
    assert rows_selected(client, {"in": "x", "year": 2024}) == set()
