"""The same content under two document ids: named by the write that stores the second, shown once by search
unless `collapseDuplicates` is false. Through the real app, CLI, PostgreSQL and local model."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from retrieval_core.cli.main import main
from tests.files import markdown_bytes, pdf_bytes
from tests.writing import doc_url

RETRIEVE = "/api/v1/rag/retrieve"

HANDBOOK = markdown_bytes(
    "# Expenses\n\nReceipts for travel expenses are scanned and uploaded within thirty days of the trip."
)
OTHERS = {
    "parking": "Visitors park in the north lot and collect a permit at reception.",
    "laptops": "Laptops are replaced every four years; the service desk orders them.",
    "holidays": "Holiday requests go to the team lead at least two weeks ahead.",
    "canteen": "The canteen serves lunch from noon until two in the afternoon.",
}


def put_file(client: TestClient, store: str, doc_id: str, data: bytes, name: str) -> dict[str, Any]:
    response = client.put(
        doc_url(store, doc_id), json={"content": base64.b64encode(data).decode(), "fileName": name}
    )
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def put_others(client: TestClient, store: str) -> None:
    for doc_id, text in OTHERS.items():
        assert client.put(doc_url(store, doc_id), json={"text": text}).json()["duplicateOf"] == []


def found_ids(client: TestClient, store: str, query: str, **options: Any) -> list[str]:
    body = {"query": query, "grade": 0.0, "store": store, **options}
    response = client.post(RETRIEVE, json=body)
    assert response.status_code == 200, response.text
    return [r["metadata"]["documentId"] for r in response.json()["results"]]


def test_the_second_copy_names_the_first_and_search_shows_one_unless_asked(
    client: TestClient, store: str
) -> None:
    first = put_file(client, store, "handbook", HANDBOOK, "handbook.md")
    assert (first["status"], first["duplicateOf"]) == ("created", [])
    second = put_file(client, store, "archive/handbook-copy", HANDBOOK, "handbook-copy.md")
    assert (second["status"], second["duplicateOf"]) == ("created", ["handbook"])
    assert second["contentSha256"] == first["contentSha256"]
    # Writing the first again (unchanged) still says it has a copy.
    again = put_file(client, store, "handbook", HANDBOOK, "handbook.md")
    assert (again["status"], again["duplicateOf"]) == ("unchanged", ["archive/handbook-copy"])
    put_others(client, store)

    query = "how soon must travel receipts be uploaded"
    naive = {"engineName": "naive", "similarityTopK": 3}
    collapsed = found_ids(client, store, query, **naive)
    # One copy, best-ranked first (equal scores: the smaller id), and still three results.
    assert collapsed[0] == "archive/handbook-copy" and "handbook" not in collapsed
    assert len(collapsed) == 3 and len(set(collapsed)) == 3
    every = found_ids(client, store, query, collapseDuplicates=False, **naive)
    assert every[:2] == ["archive/handbook-copy", "handbook"] and len(every) == 3
    # The advanced engine, hybrid or not, collapses the same way: the copy's place goes to the next one.
    for hybrid in (False, True):
        advanced = found_ids(client, store, query, useHybrid=hybrid)
        all_copies = found_ids(client, store, query, useHybrid=hybrid, collapseDuplicates=False)
        assert [d for d in all_copies if d != "handbook"] == advanced

    # Deleting the copy kept by search leaves the other searchable, and no longer a duplicate.
    assert client.delete(doc_url(store, "archive/handbook-copy")).status_code == 204
    assert found_ids(client, store, query, **naive)[0] == "handbook"
    alone = put_file(client, store, "handbook", HANDBOOK, "handbook.md")
    assert (alone["status"], alone["duplicateOf"]) == ("unchanged", [])


def test_deleting_the_original_leaves_the_duplicate_searchable(client: TestClient, store: str) -> None:
    put_file(client, store, "a-original", HANDBOOK, "handbook.md")
    assert put_file(client, store, "b-copy", HANDBOOK, "copy.md")["duplicateOf"] == ["a-original"]
    put_others(client, store)
    query = "travel expense receipts"
    assert found_ids(client, store, query, engineName="naive", similarityTopK=2)[0] == "a-original"
    assert client.delete(doc_url(store, "a-original")).status_code == 204
    assert found_ids(client, store, query, engineName="naive", similarityTopK=2)[0] == "b-copy"


def test_many_copies_do_not_shorten_the_answer(client: TestClient, store: str) -> None:
    """Copies that fill every candidate place send the search deeper: k distinct results, not one."""
    copies = [f"copy-{n}" for n in range(9)]
    for n, doc_id in enumerate(copies):
        written = put_file(client, store, doc_id, HANDBOOK, f"handbook-{n}.md")
        assert written["duplicateOf"] == copies[:n]
    put_others(client, store)
    query = "travel expense receipts uploaded"
    collapsed = found_ids(client, store, query, engineName="naive", similarityTopK=3)
    assert len(collapsed) == 3 and collapsed[0] == "copy-0" and not set(collapsed[1:]) & set(copies)
    every = found_ids(client, store, query, engineName="naive", similarityTopK=3, collapseDuplicates=False)
    assert every == copies[:3]
    advanced = client.post(
        RETRIEVE, json={"query": query, "grade": 0.0, "store": store, "rerank": {"enabled": False, "topK": 4}}
    ).json()
    ids = [r["metadata"]["documentId"] for r in advanced["results"]]
    assert len(ids) == 4 and len(set(ids) & set(copies)) == 1


def test_the_same_file_in_another_format_is_not_a_duplicate(client: TestClient, store: str) -> None:
    """Duplicates are the same bytes: a PDF of the same text is a document of its own."""
    put_file(client, store, "handbook", HANDBOOK, "handbook.md")
    text = "Receipts for travel expenses are scanned and uploaded within thirty days of the trip."
    assert put_file(client, store, "handbook-pdf", pdf_bytes([text]), "handbook.pdf")["duplicateOf"] == []


def test_records_with_the_same_content_name_each_other(client: TestClient, store: str) -> None:
    """Rows without an id column are the same record when title, text and metadata are."""
    rows = [{"text": "Badges are returned at the front desk."}, {"text": "Lost badges cost ten euros."}]
    jsonl = "\n".join(json.dumps(r) for r in [*rows, rows[0]]).encode()
    written = put_file(client, store, "badges", jsonl, "badges.jsonl")
    by_id = {d["documentId"]: d["duplicateOf"] for d in written["documents"]}
    assert by_id == {"badges#1": ["badges#3"], "badges#2": [], "badges#3": ["badges#1"]}
    assert written["duplicateOf"] == []  # none outside the source
    found = found_ids(client, store, "where are badges returned", engineName="naive", similarityTopK=2)
    assert found.count("badges#1") + found.count("badges#3") == 1 and "badges#2" in found


def test_the_cli_report_names_the_stored_copy(
    client: TestClient, store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put_file(client, store, "handbook.md", HANDBOOK, "handbook.md")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "handbook.md").write_bytes(HANDBOOK)
    (tmp_path / "parking.md").write_text(OTHERS["parking"])
    assert main(["ingest", str(tmp_path), "--store", store, "--prefix", "files/", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "duplicate     old/handbook.md: same content as handbook.md" in lines
    assert not [line for line in lines if "parking" in line]
    (tmp_path / "new.md").write_bytes(HANDBOOK)
    code = main(["sync", str(tmp_path), "--store", store, "--prefix", "files/", "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["added"] == [
        {
            "path": "new.md",
            "sourceId": "files/new.md",
            "documents": 1,
            "chunks": 1,
            "duplicateOf": ["handbook.md", "files/old/handbook.md"],
        }
    ]


def test_rows_of_an_attached_table_with_the_same_text_appear_once(
    client: TestClient, postgres_dsn: str, service: Any
) -> None:
    """An attached table keeps no content hash: its rows are compared by their text."""
    texts = [OTHERS["parking"], OTHERS["parking"], OTHERS["laptops"], OTHERS["canteen"]]
    vectors = service.embedder.embed(texts, "document")
    table = f"team.notes_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        conn.execute(
            f"CREATE TABLE {table} (id text PRIMARY KEY, body text, embedding vector({len(vectors[0])}))"
        )
        for n, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            literal = "[" + ",".join(map(str, vector)) + "]"
            conn.execute(f"INSERT INTO {table} VALUES (%s, %s, %s::vector)", (f"row-{n}", text, literal))
    name = f"att-{uuid.uuid4().hex[:8]}"
    columns = {"id": "id", "content": "body", "embedding": "embedding"}
    assert (
        client.put(
            f"/api/v1/stores/{name}", json={"source": {"table": table, "columns": columns}}
        ).status_code
        == 201
    )
    try:
        body = {
            "query": "where do visitors park",
            "store": name,
            "grade": 0.0,
            "engineName": "naive",
            "similarityTopK": 2,
        }
        collapsed = client.post(RETRIEVE, json=body).json()["results"]
        assert collapsed[0]["id"] == "row-0" and len(collapsed) == 2
        assert collapsed[1]["content"] != OTHERS["parking"]
        every = client.post(RETRIEVE, json={**body, "collapseDuplicates": False}).json()["results"]
        assert [r["id"] for r in every] == ["row-0", "row-1"]
    finally:
        client.delete(f"/api/v1/stores/{name}")
