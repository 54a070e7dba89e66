"""Document ids that a URL would read as a step up the path: refused on every way in, and the ones stored
before the rule found by the migration check, read and deleted through the query-parameter routes."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval_core.cli.main import main
from retrieval_core.db.migrations.runner import run_migrations
from retrieval_core.names import CANDIDATE_PATTERN, holds_dot_segment
from tests.legacy_rows import rename_document
from tests.writing import doc_url

STORES = "/api/v1/stores"
CLIMBING = ["..", ".", "../../bravo", "a/../b", "a/.", "%2e%2E", ".%2e/x", "a\\..\\b", "%252e%252e", ".\t."]


@pytest.fixture()
def bravo(client: TestClient) -> Iterator[str]:
    """Another tenant's store, holding one document."""
    name = f"bravo-{uuid.uuid4().hex[:8]}"
    assert client.put(f"{STORES}/{name}", json={}).status_code == 201
    assert client.put(doc_url(name, "plans"), json={"text": "Bravo's plans."}).status_code == 201
    yield name
    client.delete(f"{STORES}/{name}")


@pytest.mark.parametrize("document_id", CLIMBING)
def test_an_http_put_of_an_id_with_a_dot_segment_is_a_422_naming_the_rule(
    client: TestClient, store: str, document_id: str
) -> None:
    # Encoded whole, the id reaches the route as it is (httpx would resolve a raw `..` itself).
    response = client.put(doc_url(store, document_id).replace(".", "%2E"), json={"text": "Climbing out."})
    assert response.status_code == 422, response.text
    (error,) = response.json()["error"]["details"]["errors"]
    assert (error["field"], error["type"]) == ("documentId", "dot_segment")
    assert "'..' path segment" in error["message"]
    assert client.get(f"{STORES}/{store}").json()["documentCount"] == 0


@pytest.mark.parametrize("document_id", ["...", ".hidden", "a..b", "v1.2/notes.md", "x/.../y", "a/.x"])
def test_ids_with_dots_that_are_not_path_steps_are_stored(
    client: TestClient, store: str, document_id: str
) -> None:
    assert client.put(doc_url(store, document_id), json={"text": "Dots inside."}).status_code == 201
    assert client.get(doc_url(store, document_id)).json()["documentId"] == document_id


def test_store_names_with_dot_segments_are_refused(client: TestClient) -> None:
    for name in ("%2E", "%2E%2E"):
        response = client.put(f"{STORES}/{name}", json={})
        assert response.status_code == 422, response.text
        assert "starting with a letter or digit" in response.json()["error"]["message"]


def test_row_ids_of_a_table_file_are_refused_whole(client: TestClient, store: str) -> None:
    table = "id,text\nok,A fine row.\n../bravo,A row that climbs.\n"
    response = client.put(
        doc_url(store, "rows.csv"),
        json={"text": table, "contentType": "text/csv"},
        params={"idColumn": "id", "textColumn": "text"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"]["errors"][0]["type"] == "dot_segment"
    assert client.get(f"{STORES}/{store}").json()["documentCount"] == 0


def test_the_cli_refuses_a_prefix_that_climbs_and_writes_nothing(
    client: TestClient, store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n\nA note.\n")
    assert (
        main(["ingest", str(tmp_path), "--store", store, "--prefix", "../", "--json", "--no-progress"]) == 1
    )
    report = json.loads(capsys.readouterr().out)
    assert [item["path"] for item in report["failed"]] == ["notes.md"]
    assert "'..' path segment" in json.dumps(report["failed"])
    assert client.get(f"{STORES}/{store}").json()["documentCount"] == 0


def test_a_stored_climbing_id_is_listed_by_the_migration_check_and_deleted_by_query_alone(
    client: TestClient, store: str, bravo: str, postgres_dsn: str
) -> None:
    assert (
        client.put(doc_url(store, "planted"), json={"text": "Planted by a writer of alpha."}).status_code
        == 201
    )
    planted = f"../../{bravo}"
    rename_document(postgres_dsn, store, "planted", planted)

    result = run_migrations(postgres_dsn)
    assert (store, planted) in result.unsafe_ids.listed and result.unsafe_ids.count >= 1

    # Readable through the routes that take it as a query parameter.
    listed = client.get(f"{STORES}/{store}/documents", params={"prefix": planted, "limit": 1}).json()
    assert [d["documentId"] for d in listed["documents"]] == [planted]
    chunks = client.get(f"{STORES}/{store}/chunks", params={"documentId": planted}).json()
    assert chunks["chunks"][0]["content"] == "Planted by a writer of alpha."

    deleted = client.delete(f"{STORES}/{store}/documents", params={"documentId": planted})
    assert deleted.status_code == 204, deleted.text
    assert client.get(f"{STORES}/{store}").json()["documentCount"] == 0
    # The other tenant's store and document are untouched.
    assert client.get(f"{STORES}/{bravo}").json()["documentCount"] == 1
    again = client.delete(f"{STORES}/{store}/documents", params={"documentId": planted})
    assert again.status_code == 404 and again.json()["error"]["code"] == "document_not_found"
    assert (store, planted) not in run_migrations(postgres_dsn).unsafe_ids.listed


def test_retrieval_migrate_prints_each_stored_id_with_a_dot_segment_and_how_to_delete_it(
    private_postgres: Any, own_runtime: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.api.app import create_app

    dsn = private_postgres.get_uri()
    own_runtime(DATABASE_URL=dsn, AUTO_MIGRATE="true")
    with TestClient(create_app()) as client:
        assert client.put(f"{STORES}/alpha", json={}).status_code == 201
        assert client.put(doc_url("alpha", "a"), json={"text": "One."}).status_code == 201
        assert client.put(doc_url("alpha", "b"), json={"text": "Two."}).status_code == 201
    rename_document(dsn, "alpha", "a", "..")
    rename_document(dsn, "alpha", "b", "notes/%2e%2e/x")
    assert main(["migrate"]) == 0
    out = capsys.readouterr().out
    assert "2 document ids hold a '.' or '..' segment" in out and "retrieval delete --store STORE ID" in out
    assert "  alpha: '..'\n  alpha: 'notes/%2e%2e/x'\n" in out
    # The command's own delete reaches an id no URL path can carry.
    assert main(["delete", "--store", "alpha", ".."]) == 0
    assert main(["migrate"]) == 0
    assert "1 document ids hold" in capsys.readouterr().out


def test_a_delete_by_query_needs_the_write_scope_and_an_id(client: TestClient, store: str) -> None:
    missing = client.delete(f"{STORES}/{store}/documents")
    assert missing.status_code == 422 and "documentId" in missing.text


PIECES = [*"./\\%2eE5aZ\t", "%2e", "%2E", "%25", "%2f", "%5C", "é"]
ids = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document_id=ids)
def test_the_databases_candidate_pattern_finds_every_id_the_rule_refuses(
    postgres_dsn: str, document_id: str
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        (found,) = conn.execute("SELECT %s ~* %s", (document_id, CANDIDATE_PATTERN)).fetchone() or (None,)
    assert found == bool(re.search(CANDIDATE_PATTERN, document_id, re.IGNORECASE))
    if holds_dot_segment(document_id):
        assert found, document_id
