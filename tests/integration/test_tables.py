"""Spreadsheet exports (CSV, TSV, JSON Lines without a text column) written as users write them: a
document PUT, `retrieval ingest` and `retrieval sync` with flags or a sidecar's tableOptions. What is
checked is what a user sees: a row found by one of its values, its columns as filterable metadata, the
columns of their choice, and a refusal that names the missing column and the ones the file has."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.cli.main import main
from retrieval_core.documents.service import DocumentService
from tests.files import jsonl_bytes
from tests.table_files import debian_csv, grants_export, wide_csv
from tests.writing import HashingEmbedder, doc_url, serving_with

STORES = "/api/v1/stores"
RETRIEVE = "/api/v1/rag/retrieve"


def body_of(data: bytes, file_name: str) -> dict[str, Any]:
    return {"content": base64.b64encode(data).decode(), "fileName": file_name}


def search(client: TestClient, store: str, query: str, **options: Any) -> list[dict[str, Any]]:
    response = client.post(RETRIEVE, json={"query": query, "grade": 0.0, "store": store, **options})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_debian_csv_loads_its_rows_are_found_by_a_value_and_filtered_by_a_column(
    client: TestClient, store: str
) -> None:
    written = client.put(doc_url(store, "debian.csv"), json=body_of(debian_csv(), "debian.csv"))
    assert written.status_code == 201, written.text
    ids = [d["documentId"] for d in written.json()["documents"]]
    assert len(ids) == 11 and ids[8] == "debian.csv#9"

    [top, *_] = search(client, store, "Bookworm", useHybrid=True, similarityTopK=11)
    assert top["metadata"]["documentId"] == "debian.csv#9"
    assert "codename: Bookworm" in top["content"] and "release: 2023-06-10" in top["content"]

    filtered = search(client, store, "when does support end", metadataFilter={"series": "bullseye"})
    assert [r["metadata"]["codename"] for r in filtered] == ["Bullseye"]
    assert filtered[0]["metadata"]["version"] == 11 and filtered[0]["metadata"]["eol-lts"] == "2026-08-31"


def test_the_put_names_the_text_id_and_metadata_columns_and_a_wrong_name_writes_nothing(
    client: TestClient, store: str
) -> None:
    url = doc_url(store, "debian.csv")
    named = "?textColumn=codename&idColumn=series&metadataColumn=version&metadataColumn=release"
    written = client.put(url + named, json=body_of(debian_csv(), "debian.csv"))
    assert written.status_code == 201, written.text
    assert [d["documentId"] for d in written.json()["documents"]][-3:] == ["bookworm", "trixie", "sid"]
    bookworm = client.get(doc_url(store, "bookworm")).json()
    assert bookworm["source"] == "debian.csv"
    assert bookworm["metadata"] == {
        "version": 12,
        "release": "2023-06-10",
        "contentType": "text/csv",
        "fileName": "debian.csv",
    }
    # The same bytes under other options are another source: the records follow the options.
    again = client.put(url + "?textColumn=codename", json=body_of(debian_csv(), "debian.csv")).json()
    assert again["status"] == "updated" and "bookworm" in again["removed"]

    refused = client.put(url + "?textColumn=name", json=body_of(debian_csv(), "debian.csv"))
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "unknown_column"
    assert error["message"] == (
        "textColumns: this text/csv document has no column 'name'; its columns: version, codename, series, "
        "created, release, eol, eol-lts, eol-elts"
    )
    assert error["details"]["column"] == "name" and "eol-lts" in error["details"]["columns"]
    assert client.get(doc_url(store, "debian.csv#9")).json()["metadata"]["series"] == "bookworm"

    too_many = "&".join(f"metadataColumn=c{i}" for i in range(62))
    refused = client.put(f"{url}?{too_many}", json=body_of(debian_csv(), "debian.csv"))
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_table_options"


def test_a_wide_export_and_a_long_title_load_within_the_metadata_limits(
    client: TestClient, store: str
) -> None:
    written = client.put(doc_url(store, "wide.csv"), json=body_of(wide_csv(90), "wide.csv"))
    assert written.status_code == 201, written.text
    first = client.get(doc_url(store, "wide.csv#1")).json()["metadata"]
    assert first["c61"] == "r1c61" and "c62" not in first
    [found] = search(client, store, "r2c85", metadataFilter={"c01": "r2c1"})
    assert "c85: r2c85" in found["content"]

    rows = [{"title": "Annual report " * 2000, "body": "The annual report of the board."}]
    titled = "title,body\n" + "\n".join(f'"{r["title"]}","{r["body"]}"' for r in rows) + "\n"
    written = client.put(doc_url(store, "reports.csv"), json=body_of(titled.encode(), "reports.csv"))
    assert written.status_code == 201, written.text
    title = client.get(doc_url(store, "reports.csv#1")).json()["title"]
    assert title.startswith("Annual report Annual report") and len(title) <= 512 and title.endswith("...")


def test_jsonl_records_without_a_text_field_load_with_their_fields_as_text(
    client: TestClient, store: str
) -> None:
    records = [
        {"sku": "KT-100", "name": "Electric kettle", "watts": 2200},
        {"sku": "MG-200", "name": "Stoneware mug", "watts": None},
    ]
    url = doc_url(store, "products.jsonl") + "?idColumn=sku"
    written = client.put(url, json=body_of(jsonl_bytes(records), "products.jsonl"))
    assert written.status_code == 201, written.text
    assert [d["documentId"] for d in written.json()["documents"]] == ["KT-100", "MG-200"]
    [found] = search(client, store, "kettle", metadataFilter={"watts": 2200})
    assert found["content"] == "sku: KT-100\nname: Electric kettle\nwatts: 2200"
    refused = client.put(
        doc_url(store, "products.jsonl") + "?titleColumn=label", json=body_of(jsonl_bytes(records), "p.jsonl")
    )
    assert refused.status_code == 422
    assert "no column 'label'; its columns: sku, name, watts" in refused.json()["error"]["message"]


@pytest.fixture()
def hashing(service: Any) -> Iterator[Any]:
    """Thousands of rows embedded with a hash: what matters here is the reading and the write."""
    with serving_with(service, HashingEmbedder()) as retrieval:
        yield retrieval


def test_a_semicolon_export_of_1574_rows_with_a_bom_and_quoted_line_breaks_loads(hashing: Any) -> None:
    from retrieval_core.api.app import create_app

    store = f"grants-{uuid.uuid4().hex[:8]}"
    with TestClient(create_app()) as client:
        assert client.put(f"{STORES}/{store}", json={}).status_code == 201
        url = doc_url(store, "grants.csv") + "?idColumn=Grant%20ID"
        written = client.put(url, json=body_of(grants_export(1574), "grants.csv"))
        assert written.status_code == 201, written.text[:500]
        assert len(written.json()["documents"]) == 1574
        got = client.get(doc_url(store, "G-01001")).json()
        # "1.234.567" is text, not a decimal; the year is a number.
        assert got["metadata"]["Amount (EUR)"] == f"{(1001 * 7919) % 2_000_000 + 1_000:,}".replace(",", ".")
        assert got["metadata"]["Year"] == 2016 and got["metadata"]["Region"] == "Hessen"
        [found] = search(client, store, "note", metadataFilter={"Beneficiary": "School no. 700"})
        assert "Summary: Funding round 5; first year\nsecond line of note 700" in found["content"]


def put(root: Path, name: str, data: bytes | str) -> Path:
    path = root / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json", "--no-progress"])
    return code, json.loads(capsys.readouterr().out)


def stored_ids(store: str) -> list[str]:
    from retrieval_core.container import get_document_service

    documents: DocumentService = get_document_service()
    page, _ = documents.list_documents(store, limit=1000)
    return [d.id for d in page]


def test_ingest_flags_name_the_columns_of_a_tsv_and_a_wrong_one_fails_the_file(
    service: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tsv = debian_csv().decode().replace(",", "\t")
    path = put(tmp_path, "debian.tsv", tsv)
    store = f"tables-{uuid.uuid4().hex[:8]}"
    code, report = run_json(
        capsys, "ingest", str(path), "--store", store, "--id-column", "series", "--text-column", "codename"
    )
    assert code == 0 and report["totals"]["documentsWritten"] == 11
    assert "bookworm" in stored_ids(store)

    code, report = run_json(capsys, "ingest", str(path), "--store", store, "--text-column", "Name")
    assert code == 1
    [failed] = report["failed"]
    assert (
        failed["code"] == "unknown_column"
        and "no column 'Name'; its columns: version, codename" in failed["message"]
    )


def test_sync_reads_a_file_again_when_its_options_change_from_flags_or_its_sidecar(
    service: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "debian.csv", debian_csv())
    store = f"tables-{uuid.uuid4().hex[:8]}"
    code, report = run_json(capsys, "sync", str(tmp_path), "--store", store)
    assert code == 0 and "debian.csv#9" in stored_ids(store)
    # Unchanged bytes, unchanged options: nothing read again.
    code, report = run_json(capsys, "sync", str(tmp_path), "--store", store)
    assert report["totals"]["unchanged"] == 1 and report["totals"]["documentsWritten"] == 0

    code, report = run_json(capsys, "sync", str(tmp_path), "--store", store, "--id-column", "series")
    assert code == 0 and report["totals"]["updated"] == 1
    assert "bookworm" in stored_ids(store) and "debian.csv#9" not in stored_ids(store)

    sidecar = {"metadataAttributes": {"distro": "debian"}, "tableOptions": {"idColumn": "codename"}}
    put(tmp_path, "debian.csv.metadata.json", json.dumps(sidecar))
    code, report = run_json(capsys, "sync", str(tmp_path), "--store", store, "--id-column", "series")
    assert code == 0, report
    assert "Bookworm" in stored_ids(store) and "bookworm" not in stored_ids(store)

    put(tmp_path, "debian.csv.metadata.json", json.dumps({"tableOptions": {"textColumns": ["nickname"]}}))
    code, report = run_json(capsys, "sync", str(tmp_path), "--store", store)
    assert code == 1 and report["failed"][0]["code"] == "unknown_column"
    assert "Bookworm" in stored_ids(store)  # the store keeps what it had
