"""A row source of 100,000 records loads in one write over the CLI, S3 and HTTP, and one over the
record limit (DOCUMENT_MAX_RECORDS) is refused naming it.

The records are embedded with a hash (tests.writing.HashingEmbedder): what is measured here is the
write, whose locks no longer grow with the records (db/documents.py LOCK_SLOTS). Reading the file has no
deadline here (PARSE_TIMEOUT_S 300, see `unhurried`): these tests check that the rows load, not how fast;
the time is `make bench-large-documents`'s, and the deadline has tests of its own (test_parse_budgets.py).
A 2-core machine busy with other work reads 100,000 rows slower than the default 10 s.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.cli.main import main
from tests.files import rows_csv
from tests.writing import HashingEmbedder, serving_with

ROWS = 100_000
STORES = "/api/v1/stores"


@pytest.fixture()
def hashing(service: Any) -> Iterator[Any]:
    with serving_with(service, HashingEmbedder()) as retrieval:
        yield retrieval


@pytest.fixture()
def unhurried(configure: Any) -> None:
    configure(PARSE_TIMEOUT_S="300")


def document_count(store: str) -> int:
    from retrieval_core.container import get_document_service

    return get_document_service().get_store(store).document_count


@pytest.mark.heavy
def test_a_csv_of_100000_rows_loads_over_the_cli(hashing: Any, unhurried: None, tmp_path: Path) -> None:
    store = f"rows-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "export.csv"
    path.write_bytes(rows_csv(ROWS))
    assert main(["ingest", str(path), "--store", store, "--no-progress"]) == 0
    assert document_count(store) == ROWS


@pytest.mark.heavy
def test_a_csv_of_100000_rows_loads_over_http(hashing: Any, unhurried: None) -> None:
    from retrieval_core.api.app import create_app

    store = f"rows-{uuid.uuid4().hex[:8]}"
    body = {"content": base64.b64encode(rows_csv(ROWS)).decode(), "contentType": "text/csv"}
    with TestClient(create_app()) as client:
        assert client.put(f"{STORES}/{store}", json={}).status_code == 201
        response = client.put(f"{STORES}/{store}/documents/export.csv", json=body)
    assert response.status_code == 201, response.text[:500]
    assert len(response.json()["documents"]) == ROWS
    assert document_count(store) == ROWS


def test_a_source_over_the_record_limit_is_413_naming_the_setting(
    hashing: Any, configure: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.api.app import create_app

    configure(DOCUMENT_MAX_RECORDS="1000")
    store = f"rows-{uuid.uuid4().hex[:8]}"
    at_limit = {"content": base64.b64encode(rows_csv(1000)).decode(), "contentType": "text/csv"}
    over = {"content": base64.b64encode(rows_csv(1001)).decode(), "contentType": "text/csv"}
    with TestClient(create_app()) as client:
        assert client.put(f"{STORES}/{store}", json={}).status_code == 201
        assert client.put(f"{STORES}/{store}/documents/full.csv", json=at_limit).status_code == 201
        refused = client.put(f"{STORES}/{store}/documents/over.csv", json=over)
    assert refused.status_code == 413, refused.text
    error = refused.json()["error"]
    assert error["code"] == "too_many_records" and "DOCUMENT_MAX_RECORDS" in error["message"]
    assert error["details"] == {"sourceId": "over.csv", "records": 1001, "maxRecords": 1000}
    assert document_count(store) == 1000
    # The CLI reports the file as failed, with the same code.
    path = tmp_path / "over.csv"
    path.write_bytes(rows_csv(1001))
    assert main(["ingest", str(path), "--store", store, "--no-progress", "--json"]) == 1
    assert '"too_many_records"' in capsys.readouterr().out
