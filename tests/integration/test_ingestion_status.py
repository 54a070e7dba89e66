"""Each source's last outcome and each store's counts through the paths users take (HTTP, CLI, MCP; S3 is
in test_s3_ingest.py), and the `unchanged` answer given before any parse."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.cli.main import main
from retrieval_core.documents.models import SourceInput
from retrieval_core.documents.service import DocumentService
from retrieval_core.parsers import ParseBudget
from retrieval_core.parsers.exceptions import DocumentLimitError
from retrieval_core.parsers.tables import TableOptions
from tests.files import corrupt_pdf_bytes, csv_bytes, pdf_bytes
from tests.integration.test_documents_service import CountingEmbedder, documents_for, new_store
from tests.writing import doc_url

STORES = "/api/v1/stores"
REPORT = pdf_bytes(["Quarterly report: expenses fell by 4 percent.", "Travel costs rose."], title="Q3")


def pdf_source(source_id: str = "q3.pdf", **metadata: Any) -> SourceInput:
    return SourceInput(source_id, REPORT, "application/pdf", "q3.pdf", metadata)


def statuses(client: TestClient, store: str, status: str) -> dict[str, Any]:
    response = client.get(f"{STORES}/{store}/documents", params={"status": status})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_same_source_again_is_answered_unchanged_without_being_parsed(service: Any) -> None:
    embedder = CountingEmbedder()
    docs = documents_for(service, embedder)
    store = new_store(docs)
    assert docs.write_source(store, pdf_source(team="finance")).status == "created"
    # The same database and embedder, with a budget that refuses the two-page report whenever it is parsed.
    strict = DocumentService(docs.retrieval, docs.chunk_size, docs.chunk_overlap, ParseBudget(max_pages=1))
    calls = embedder.calls

    again = strict.write_source(store, pdf_source(team="finance"))
    assert (again.status, again.chunk_count, embedder.calls) == ("unchanged", 2, calls)
    assert again.content_sha256 == docs.get_document(store, "q3.pdf").content_sha256
    # Whatever the parse would make differently is parsed: the budget then refuses it.
    for changed in (
        pdf_source(team="sales"),  # other metadata
        SourceInput("q3.pdf", REPORT, "application/pdf", "report.pdf", {"team": "finance"}),  # file name
        SourceInput("q3.pdf", REPORT, None, "q3.pdf", {"team": "finance"}),  # declared type
        SourceInput(
            "q3.pdf", REPORT, "application/pdf", "q3.pdf", {"team": "finance"}, TableOptions(("rows",))
        ),
    ):
        with pytest.raises(DocumentLimitError):
            strict.write_source(store, changed)

    # A metadata change on the same bytes is applied (parsed, not re-embedded).
    moved = docs.write_source(store, pdf_source(team="sales"))
    assert (moved.status, embedder.calls) == ("updated", calls)
    assert docs.get_document(store, "q3.pdf").metadata["team"] == "sales"
    # A sidecar applied meanwhile is part of what is stored: the same source again is still unchanged.
    assert docs.put_source_metadata(store, "q3.pdf", {"year": 2026}) == 1
    assert strict.write_source(store, pdf_source(team="sales")).status == "unchanged"
    assert docs.get_document(store, "q3.pdf").metadata["year"] == 2026


def test_a_record_deleted_alone_comes_back_when_its_file_is_sent_again(service: Any) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    rows = csv_bytes([{"id": "r1", "text": "First row."}, {"id": "r2", "text": "Second row."}])
    source = SourceInput("rows.csv", rows, "text/csv")
    assert docs.write_source(store, source).status == "created"
    assert docs.delete_source(store, "r2") == ["r2"]
    again = docs.write_source(store, source)
    assert again.status == "updated"
    assert {d.document_id: d.status for d in again.documents} == {"r1": "unchanged", "r2": "created"}
    assert docs.write_source(store, source).status == "unchanged"


def test_a_failed_put_is_listed_with_its_reason_until_a_good_version_replaces_it(
    client: TestClient, store: str
) -> None:
    broken = {"content": base64.b64encode(corrupt_pdf_bytes()).decode(), "contentType": "application/pdf"}
    refused = client.put(doc_url(store, "reports/q3.pdf"), json=broken)
    assert refused.status_code == 422
    assert client.put(doc_url(store, "notes/empty"), json={"text": "   "}).status_code == 422

    failed = statuses(client, store, "failed")
    (row,) = failed["documents"]
    assert (row["documentId"], row["status"]) == ("reports/q3.pdf", "failed")
    assert row["code"] == "unreadable_document"
    assert row["message"] == refused.json()["error"]["message"] and row["writtenBy"] == "open"
    (skipped,) = statuses(client, store, "skipped")["documents"]
    assert (skipped["documentId"], skipped["code"]) == ("notes/empty", "empty_document")
    assert client.get(doc_url(store, "reports/q3.pdf")).status_code == 404  # no document, only its status

    good = {"content": base64.b64encode(REPORT).decode(), "contentType": "application/pdf"}
    assert client.put(doc_url(store, "reports/q3.pdf"), json=good).status_code == 201
    assert client.put(doc_url(store, "reports/q3.pdf"), json=good).json()["status"] == "unchanged"
    after = statuses(client, store, "failed")
    assert after["documents"] == []
    (ok,) = statuses(client, store, "ok")["documents"]
    assert (ok["documentId"], ok["change"], ok["code"]) == ("reports/q3.pdf", "unchanged", None)
    counts = {k: after["statistics"][k] for k in ("scanned", "added", "unchanged", "failed", "skipped")}
    assert counts == {"scanned": 4, "added": 1, "unchanged": 1, "failed": 1, "skipped": 1}
    assert (after["statistics"]["nowOk"], after["statistics"]["nowFailed"]) == (1, 0)

    assert client.delete(doc_url(store, "reports/q3.pdf")).status_code == 204
    gone = statuses(client, store, "ok")
    assert (gone["documents"], gone["statistics"]["deleted"]) == ([], 1)
    assert client.get(f"{STORES}/{store}/documents", params={"status": "lost"}).status_code == 422


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_cli_lists_what_a_sync_failed_and_its_dry_run_parses(
    service: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.container import get_document_service

    store = f"cli-status-{uuid.uuid4().hex[:8]}"
    get_document_service().ensure_store(store)
    (tmp_path / "broken.pdf").write_bytes(corrupt_pdf_bytes())
    (tmp_path / "q3.pdf").write_bytes(REPORT)

    code, plan = run_json(capsys, "sync", str(tmp_path), "--store", store, "--dry-run", "--no-progress")
    assert code == 1
    assert [(a["path"], a["documents"], a["chunks"]) for a in plan["added"]] == [("q3.pdf", 1, 2)]
    assert [(f["path"], f["code"]) for f in plan["failed"]] == [("broken.pdf", "unreadable_document")]

    code, done = run_json(capsys, "sync", str(tmp_path), "--store", store, "--no-progress")
    assert (code, done["totals"]["added"], done["totals"]["failed"]) == (1, 1, 1)
    code, again = run_json(capsys, "sync", str(tmp_path), "--store", store, "--no-progress")
    assert (code, again["totals"]["unchanged"], again["totals"]["failed"]) == (1, 1, 1)
    code, listed = run_json(capsys, "documents", "--store", store)
    assert code == 1
    failed = [(d["document_id"], d["code"]) for d in listed["documents"]]
    assert failed == [("broken.pdf", "unreadable_document")]
    assert {k: listed["statistics"][k] for k in ("scanned", "added", "unchanged", "failed")} == {
        "scanned": 4,
        "added": 1,
        "unchanged": 1,
        "failed": 2,
    }

    (tmp_path / "broken.pdf").unlink()
    (tmp_path / "q3.pdf").unlink()
    (tmp_path / "new.md").write_text("# New\n\nA new page.")
    assert main(["sync", str(tmp_path), "--store", store, "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == "1 stored document is not in the folder; --prune removes it: q3.pdf"
    assert main(["documents", "--store", store, "--status", "ok"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:-1]] == ["ok       new.md", "ok       q3.pdf"]
    assert out[-1].startswith(
        f"store '{store}': 5 scanned, 2 added, 0 updated, 1 unchanged, 0 deleted, 2 failed, 0 skipped since "
    )
