"""Metadata filter expressions against the real PostgreSQL, checked against a Python oracle."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval_core.filters.exceptions import FilterKeyNotAllowedError, FilterSyntaxError
from retrieval_core.filters.expression import Node, parse
from retrieval_core.grants import OPEN_GRANT
from retrieval_core.schemas.retrieve import RetrieveRequest
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest
from tests.filter_strategies import INJECTIONS, STRINGS, expressions, holds, quote, render
from tests.writing import GivenVectors, TextDocument, ensure_store, write_documents

SEARCH = "/api/v1/chunks/similarity-search"
STORE = "filter-expressions"
DIMENSION = 4
QUERY = [1.0, 0.5, 0.25, 0.125]


def _metadata(rng: random.Random) -> dict[str, Any]:
    """Varied metadata: every key sometimes missing, sometimes of another JSON type."""
    pools: dict[str, list[Any]] = {
        "project": ["ABC Project", "abc project", "O'Brien", 'say "hi"', "back\\slash", "é", "", 1, True],
        "year": [2022, 2023, 2024, 2023.0, 2022.5, "2023", "2024", None, False],
        "draft": [True, False, "true", 0, 1],
        "source_type": ["s3", "web", "Z", "a", ["s3"], {"s3": True}],
        "score": [0, 1, -1, 0.25, 1.5, -0.5, 5, -5, "1"],
        "tags": [["a", "b"], [], "a", 2],
    }
    return {key: rng.choice(pool) for key, pool in pools.items() if rng.random() < 0.8}


@pytest.fixture(scope="module")
def filter_store(service) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    """A store of 40 one-chunk documents with varied metadata; returns chunk id -> metadata."""
    rng = random.Random(20231122)
    documents = []
    vectors: dict[str, list[float]] = {}
    stored: dict[str, dict[str, Any]] = {}
    for doc_id in (f"doc-{i:02d}" for i in range(40)):
        metadata = _metadata(rng)
        text = f"text of {doc_id}"
        vectors[text] = [rng.uniform(0.1, 1.0) for _ in range(DIMENSION)]
        documents.append(TextDocument(doc_id, text, metadata=metadata))
        stored[f"{doc_id}#0"] = metadata
    embedder = GivenVectors("filter-test", DIMENSION, vectors)
    ensure_store(service, STORE, embedder)
    write_documents(service, STORE, documents, 1000, 0, embedder=embedder)
    return stored


def matching_ids(service, expression: str) -> set[str]:  # type: ignore[no-untyped-def]
    request = SimilaritySearchRequest(
        query_embedding=QUERY, top_k=50, store=STORE, metadata_filter=expression
    )
    response, _ = service.similarity_search(request, grant=OPEN_GRANT)
    return {r.id for r in response.results}


def oracle(stored: dict[str, dict[str, Any]], node: Node | None) -> set[str]:
    return {chunk_id for chunk_id, metadata in stored.items() if node is None or holds(node, metadata)}


FIXED = [
    "project = 'ABC Project'",
    "project = 'abc project'",
    "project = 'O''Brien' OR project = \"say \\\"hi\\\"\" OR project = 'back\\\\slash'",
    "year >= 2023",
    "year = 2023",
    "year = '2023'",
    "year > '2023'",
    "year IN (2022, '2024', false)",
    "draft = true",
    "NOT draft = true",
    "draft != true",
    "project = 'ABC Project' AND (source_type = 's3' OR year >= 2023) AND NOT draft = true",
    "source_type = 's3'",
    "source_type < 'b'",
    "tags = 'a'",
    "score < 0 OR score > 1",
    "score <= -0.5",
    "NOT (score < 0 OR score > 1)",
    "missing = 1",
    "NOT missing = 1",
    "missing != 1",
    "project > ''",
    "project < 'a' AND project >= 'A'",
]


@pytest.mark.parametrize("expression", FIXED)
def test_expressions_select_what_the_oracle_selects(service, filter_store, expression: str) -> None:  # type: ignore[no-untyped-def]
    expected = oracle(filter_store, parse(expression))
    assert matching_ids(service, expression) == expected


def test_fixed_expressions_are_not_vacuous(filter_store) -> None:  # type: ignore[no-untyped-def]
    # The dataset makes most fixed expressions select some but not all chunks.
    sizes = [len(oracle(filter_store, parse(e))) for e in FIXED]
    assert sum(0 < size < len(filter_store) for size in sizes) >= len(FIXED) - 4


def test_typed_semantics_on_the_database(service, filter_store) -> None:  # type: ignore[no-untyped-def]
    numeric = matching_ids(service, "year = 2023")
    assert numeric and all(filter_store[i]["year"] == 2023 for i in numeric)
    assert all(not isinstance(filter_store[i]["year"], str) for i in numeric)  # "2023" is not 2023
    # A missing key makes a comparison false, so NOT of it is true and != is false.
    without_draft = {i for i, m in filter_store.items() if "draft" not in m}
    assert without_draft
    assert without_draft <= matching_ids(service, "NOT draft = true")
    assert not without_draft & matching_ids(service, "draft != true")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expressions(), st.integers(0, 5))
def test_random_expressions_match_the_oracle(service, filter_store, node: Node, style: int) -> None:  # type: ignore[no-untyped-def]
    assert matching_ids(service, render(node, style)) == oracle(filter_store, node)


# --- through HTTP -------------------------------------------------------------------------------


def _count_chunks(service) -> int:  # type: ignore[no-untyped-def]
    with service.database.connection() as conn:
        row = conn.execute("SELECT count(*) FROM chunks").fetchone()
    return int(row[0])


def _injection_bodies() -> Iterator[str]:
    for attack in INJECTIONS:
        yield attack
        yield f"project = '{attack}'"
        yield f'project = "{attack}"'
        yield f"project = {quote(attack, 0)}"
        yield f"project IN ({quote(attack, 1)}, 1)"
        yield f"{attack} = 1"
        yield f"year >= 2023 AND {attack}"


def test_injection_corpus_through_http_changes_nothing(client: TestClient, service, filter_store) -> None:  # type: ignore[no-untyped-def]
    before = _count_chunks(service)
    statuses = set()
    for expression in _injection_bodies():
        for path, body in [
            (SEARCH, {"queryEmbedding": QUERY, "topK": 50, "store": STORE, "metadataFilter": expression}),
            (
                "/api/v1/rag/retrieve",
                {"query": "x", "grade": 0, "store": "sample", "metadataFilter": expression},
            ),
        ]:
            response = client.post(path, json=body)
            assert response.status_code in (200, 422), (expression, response.text)
            statuses.add(response.status_code)
            if response.status_code == 422:
                assert response.json()["error"]["code"] in ("invalid_metadata_filter", "validation_error")
            elif path == SEARCH:
                node = parse(expression)
                assert {r["id"] for r in response.json()["results"]} == oracle(filter_store, node)
    assert statuses == {200, 422}
    assert _count_chunks(service) == before
    # A quoted attack is just a value that no chunk has.
    quoted = client.post(
        SEARCH,
        json={
            "queryEmbedding": QUERY,
            "store": STORE,
            "metadataFilter": f"project = {quote(INJECTIONS[0], 0)}",
        },
    )
    assert quoted.status_code == 200 and quoted.json()["results"] == []


def test_syntax_error_is_422_with_the_position(client: TestClient, filter_store) -> None:  # type: ignore[no-untyped-def]
    response = client.post(
        SEARCH,
        json={"queryEmbedding": QUERY, "store": STORE, "metadataFilter": "year >= 2023 AND (draft = )"},
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_metadata_filter"
    assert error["details"]["position"] == 26
    assert error["details"]["found"] == "')'"
    assert "position 26" in error["message"]


def test_string_and_object_forms_agree(client: TestClient, filter_store) -> None:  # type: ignore[no-untyped-def]
    def ids(metadata_filter: object) -> set[str]:
        body = {"queryEmbedding": QUERY, "topK": 50, "store": STORE, "metadataFilter": metadata_filter}
        response = client.post(SEARCH, json=body)
        assert response.status_code == 200, response.text
        return {r["id"] for r in response.json()["results"]}

    for project in STRINGS:
        assert ids({"project": project}) == ids(f"project = {quote(project, 0)}")
    assert ids({"year": 2023, "draft": False}) == ids("year = 2023 AND draft = false")
    assert ids("") == set(filter_store)


@pytest.fixture()
def restricted_client(service_env: dict[str, str], filter_store) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    """The app built from settings with ALLOWED_METADATA_KEYS=project,year; the shared service restored."""
    from retrieval_core import container
    from retrieval_core.api.app import create_app
    from retrieval_core.settings import get_settings

    shared = container.replace_service(None)  # set aside, not closed: other tests keep using it
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ALLOWED_METADATA_KEYS", "project, year")
        get_settings.cache_clear()
        with TestClient(create_app()) as test_client:
            yield test_client
        container.reset_service()
    get_settings.cache_clear()
    container.replace_service(shared)


@pytest.mark.parametrize(
    "metadata_filter",
    [
        "project = 'x' OR NOT draft = true",
        {"project": "x", "draft": True},
        {"orAll": [{"equals": {"key": "project", "value": "x"}}, {"andAll": [{"exists": {"key": "draft"}}]}]},
    ],
)
def test_allowed_metadata_keys_reject_other_keys(
    restricted_client: TestClient, metadata_filter: object
) -> None:
    body = {"queryEmbedding": QUERY, "store": STORE, "metadataFilter": metadata_filter}
    response = restricted_client.post(SEARCH, json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "metadata_key_not_allowed"
    assert error["details"]["key"] == "draft"
    allowed = restricted_client.post(SEARCH, json={**body, "metadataFilter": "project = 'x' OR year >= 2023"})
    assert allowed.status_code == 200


class CountingEmbedder:
    """Counts embed calls; the vectors are never searched with."""

    model = "counting"
    dimension = DIMENSION

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str], kind: str) -> list[list[float]]:
        self.calls += 1
        return [QUERY for _ in texts]


def test_a_bad_filter_fails_before_the_cache_and_the_embedder(service, filter_store) -> None:  # type: ignore[no-untyped-def]
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.container import build_cache
    from retrieval_core.settings import get_settings

    cache = build_cache(get_settings())
    embedder = CountingEmbedder()
    unrestricted = RetrievalService(service.database, embedder, STORE, 100, cache=cache)
    restricted = RetrievalService(
        service.database, embedder, STORE, 100, cache=cache, allowed_metadata_keys=frozenset({"project"})
    )
    request = SimilaritySearchRequest(
        query_embedding=QUERY, top_k=50, store=STORE, metadata_filter="draft = true"
    )
    answer, _ = unrestricted.similarity_search(request, grant=OPEN_GRANT)
    assert answer.results
    # The same request, answered and cached without the restriction, is still refused with it.
    with pytest.raises(FilterKeyNotAllowedError):
        restricted.similarity_search(request, grant=OPEN_GRANT)
    with pytest.raises(FilterSyntaxError):
        unrestricted.retrieve(
            RetrieveRequest(query="q", grade=0.0, store=STORE, metadata_filter="draft = "), grant=OPEN_GRANT
        )
    assert embedder.calls == 0
