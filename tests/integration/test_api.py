"""The HTTP API through the FastAPI app, on the real database and the real local model."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.roles import write_role_dsn

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"


def retrieve(client: TestClient, **body: object) -> dict:  # type: ignore[type-arg]
    response = client.post(RETRIEVE, json={"grade": 0.0, **body})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_retrieve_ranks_the_relevant_chunk_first_with_its_metadata(client: TestClient) -> None:
    body = retrieve(
        client,
        query="How does Kubernetes decide which node runs a pod?",
        similarityTopK=5,
        engineName="naive",
    )
    first = body["results"][0]
    assert first["id"] == "k8s-scheduling#0"
    assert first["metadata"]["fileName"] == "k8s-docs.pdf"
    assert first["metadata"]["pageNumber"] == 12
    assert first["metadata"]["documentId"] == "k8s-scheduling"
    assert first["metadata"]["chunkIndex"] == 0
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)
    assert body["engineUsed"] == "naive" and body["store"] == "sample"
    assert body["totalResults"] == len(body["results"]) == 5
    pipeline = body["pipeline"]
    assert (pipeline["reranked"], pipeline["rerankStrategy"], pipeline["candidatesConsidered"]) == (
        False,
        None,
        5,
    )
    assert pipeline["hybrid"] is False and pipeline["warnings"] == []


def test_scores_are_similarities_not_distances(client: TestClient, service) -> None:  # type: ignore[no-untyped-def]
    text = "Descale the office espresso machine every month"
    vector = service.embedder.embed([text], "query")[0]
    response = client.post(SEARCH, json={"queryEmbedding": vector, "topK": 3})
    assert response.status_code == 200
    results = response.json()["results"]
    assert results[0]["id"] == "coffee-machine#0"
    assert 0.5 < results[0]["score"] <= 1.0
    assert results[0]["score"] > results[-1]["score"]


def test_grade_filters_and_a_strict_grade_returns_empty_200(client: TestClient) -> None:
    query = {"query": "air filter replacement schedule", "engineName": "naive"}
    loose = retrieve(client, **query, similarityTopK=10, grade=0.0)
    assert loose["totalResults"] == 10
    cut = loose["results"][2]["score"]
    graded = retrieve(client, **query, similarityTopK=10, grade=cut)
    assert all(r["score"] >= cut for r in graded["results"])
    assert graded["totalResults"] == 3
    strict = retrieve(client, **query, grade=0.99)
    assert strict["results"] == [] and strict["totalResults"] == 0
    assert strict["pipeline"]["candidatesConsidered"] == 5


def test_doc_ids_and_metadata_filters_restrict_results(client: TestClient) -> None:
    only = retrieve(
        client, query="cleaning and maintenance", docIds=["hvac-filters", "coffee-machine"], similarityTopK=10
    )
    assert {r["metadata"]["documentId"] for r in only["results"]} == {"hvac-filters", "coffee-machine"}
    facilities = retrieve(
        client,
        query="temperature complaints",
        metadataFilter={"project_name": "Facilities", "year": 2023},
        similarityTopK=10,
    )
    assert {r["metadata"]["documentId"] for r in facilities["results"]} == {"hvac-cold-complaints"}
    typed = retrieve(client, query="temperature complaints", metadataFilter={"year": "2023"})
    assert typed["results"] == []  # typed equality: the string "2023" is not the number 2023


def test_unicode_queries_work(client: TestClient) -> None:
    body = retrieve(client, query="recherche vectorielle en français 日本語", similarityTopK=1)
    assert body["results"][0]["metadata"]["documentId"] == "multilingual-note"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "q"}, "grade"),
        ({"query": "q", "grade": -0.1}, "grade"),
        ({"query": "q", "grade": 0.5, "similarityTopK": 500}, "similarityTopK"),
        ({"query": "", "grade": 0.5}, "query"),
        ({"query": "a\u0000b", "grade": 0.5}, "query"),
        ({"query": "q", "grade": 0.5, "metadataFilter": {"k": [1, 2]}}, "metadataFilter.k"),
        ({"query": "q", "grade": 0.5, "unknownOption": 1}, "unknownOption"),
    ],
)
def test_validation_errors_are_422_and_name_the_field(client: TestClient, body: dict, field: str) -> None:  # type: ignore[type-arg]
    response = client.post(RETRIEVE, json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert any(e["field"].startswith(field) for e in error["details"]["errors"]), error
    assert error["message"].split(":")[0].startswith(field.split(".")[0])


def test_malformed_json_is_422(client: TestClient) -> None:
    response = client.post(RETRIEVE, content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


def test_malformed_json_names_the_body_and_the_character(client: TestClient) -> None:
    # `[...]` as a placeholder for a vector: the offset of the error is not a field's name.
    body = b'{"queryEmbedding": [...], "topK": 10}'
    response = client.post(SEARCH, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"] == {
        "code": "validation_error",
        "message": "body: not valid JSON (Expecting value) at character 20",
        "details": {
            "errors": [
                {
                    "field": "body",
                    "message": "not valid JSON (Expecting value) at character 20",
                    "type": "json_invalid",
                }
            ]
        },
    }


def test_unknown_store_is_404_naming_it(client: TestClient) -> None:
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.1, "store": "no-such-store"})
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "store_not_found",
        "message": "store 'no-such-store' not found",
        "details": {"store": "no-such-store"},
    }


def test_wrong_embedding_dimension_is_422_naming_both(client: TestClient) -> None:
    response = client.post(SEARCH, json={"queryEmbedding": [0.1] * 1536})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "dimension_mismatch"
    assert "1536" in error["message"] and "384" in error["message"]


def test_unknown_route_is_json_404(client: TestClient) -> None:
    response = client.get("/api/v1/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_openapi_documents_scores_as_similarities(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    score = schema["components"]["schemas"]["ChunkResult"]["properties"]["score"]
    assert "1 - cosine distance" in score["description"] and "higher is better" in score["description"]


# --- database outages -------------------------------------------------------------------------

SECRET = "s3cr3t-pa55word"


@pytest.fixture()
def app_on(service_env: dict[str, str]) -> Iterator[object]:
    """Build the app against a DATABASE_URL chosen by the test, then restore the shared one."""
    from retrieval_core import container
    from retrieval_core.api.app import create_app
    from retrieval_core.settings import get_settings

    def build(dsn: str) -> TestClient:
        container.reset_service()
        get_settings.cache_clear()
        monkeypatch.setenv("DATABASE_URL", dsn)
        monkeypatch.setenv("DB_CONNECT_TIMEOUT_S", "1")
        return TestClient(create_app())

    shared = container.replace_service(None)  # set aside, not closed: other tests keep using it
    monkeypatch = pytest.MonkeyPatch()
    yield build
    monkeypatch.undo()
    container.reset_service()
    get_settings.cache_clear()
    container.replace_service(shared)


def test_unreachable_database_is_a_descriptive_500_without_secrets(app_on) -> None:  # type: ignore[no-untyped-def]
    client = app_on(f"postgresql://svc_user:{SECRET}@127.0.0.1:1/retrieval?connect_timeout=1")
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.1})
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "database_unavailable"
    assert "database unavailable" in error["message"]
    for leak in (SECRET, "svc_user", "127.0.0.1", "postgresql://", "Traceback"):
        assert leak not in response.text
    health = client.get("/api/v1/health")
    assert health.status_code == 503
    assert health.json()["status"] == "degraded"
    assert health.json()["checks"]["database"]["status"] == "failed"
    for leak in (SECRET, "svc_user", "127.0.0.1", "postgresql://", "Traceback"):
        assert leak not in health.text


def test_service_recovers_when_postgres_restarts(app_on, private_postgres) -> None:  # type: ignore[no-untyped-def]
    from retrieval_core.container import get_service
    from retrieval_core.documents.sample import load_sample_corpus

    server = private_postgres
    client = app_on(write_role_dsn(server.get_uri()))
    load_sample_corpus(get_service())
    assert retrieve(client, query="espresso machine")["totalResults"] == 5

    server.stop()
    outage_started = time.monotonic()
    down = client.post(RETRIEVE, json={"query": "espresso machine", "grade": 0.0})
    assert down.status_code == 500
    assert down.json()["error"]["code"] == "database_unavailable"
    assert client.get("/api/v1/health").status_code == 503
    # Long enough that psycopg_pool's own doubling retry delay (1, 2, 4, 8 s ...) would put its next
    # try well after the restart: the first request after it must not wait for that.
    time.sleep(max(0.0, 9.0 - (time.monotonic() - outage_started)))

    server.ensure_postgres_running()
    # Same process, same app: the broken connections are replaced and nothing stored was lost.
    body = retrieve(client, query="espresso machine")
    assert body["results"][0]["id"] == "coffee-machine#0"
    assert client.get("/api/v1/health").status_code == 200


def test_store_embedded_with_another_model_is_409(client: TestClient, service) -> None:  # type: ignore[no-untyped-def]
    from retrieval_core.db.stores import create_store

    with service.database.connection() as conn:
        create_store(conn, "other-model", "Other model", "text-embedding-3-small", 384)
    response = client.post(RETRIEVE, json={"query": "q", "grade": 0.1, "store": "other-model"})
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "embedding_model_mismatch"
    assert "text-embedding-3-small" in error["message"] and "all-MiniLM-L6-v2" in error["message"]


def test_store_is_found_by_display_name(client: TestClient) -> None:
    body = retrieve(client, query="espresso", store="Sample corpus", similarityTopK=1)
    assert body["store"] == "sample"
