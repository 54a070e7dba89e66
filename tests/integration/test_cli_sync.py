"""`retrieval ingest`, `sync` and `delete` run as a user runs them, against the embedded PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval_core.cli.main import main
from retrieval_core.documents.service import DocumentService
from retrieval_core.exceptions import StoreNotFoundError
from tests.files import (
    corrupt_pdf_bytes,
    jsonl_bytes,
    markdown_bytes,
    pdf_bytes,
    png_bytes,
    text_bytes,
    zip_bytes,
)


@pytest.fixture()
def documents(service: Any) -> DocumentService:
    from retrieval_core.container import get_document_service

    return get_document_service()


def new_store() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def put(root: Path, name: str, data: bytes | str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json", "--no-progress"])
    return code, json.loads(capsys.readouterr().out)


def paths(report: dict[str, Any], kind: str) -> list[str]:
    return [item["path"] for item in report[kind]]


def stored(documents: DocumentService, store: str) -> dict[str, dict[str, Any]]:
    page, _ = documents.list_documents(store, limit=1000)
    return {d.id: {"source": d.source, "metadata": d.metadata, "chunks": d.chunk_count} for d in page}


def top_document(service: Any, store: str, query: str) -> str:
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest

    # Through the search cache: a stale cached answer after a write would fail the test.
    request = RetrieveRequest(query=query, store=store, similarity_top_k=1, grade=0.0)
    response, _ = service.retrieve(request, grant=OPEN_GRANT)
    return str(response.results[0].metadata["documentId"])


def test_ingest_reads_every_format_whatever_the_case_lists_skips_and_fails_on_a_corrupt_pdf(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "Guide.MD", markdown_bytes("# Guide\n\nRotate the API keys every ninety days.\n"))
    put(tmp_path, "notes/FAQ.TXT", text_bytes("Expenses are reimbursed within two weeks.\n"))
    put(tmp_path, "Report.PDF", pdf_bytes(["Quarterly revenue grew by twelve percent."], title="Report"))
    put(tmp_path, "broken.pdf", corrupt_pdf_bytes())
    put(tmp_path, "logo.png", png_bytes())
    put(tmp_path, "bundle.zip", zip_bytes({"a.txt": "inside a zip"}))
    put(tmp_path, ".hidden.md", "# Secret\n\nnot for the store")
    store = new_store()

    code, report = run_json(capsys, "ingest", str(tmp_path), "--store", store)

    assert code == 1  # a file failed
    assert paths(report, "added") == ["Guide.MD", "Report.PDF", "notes/FAQ.TXT"]
    assert [f["path"] for f in report["failed"]] == ["broken.pdf"]
    assert report["failed"][0]["code"] == "unreadable_document"
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    assert set(skipped) == {".hidden.md", "bundle.zip", "logo.png"}
    assert "image/png" in skipped["logo.png"] and "application/zip" in skipped["bundle.zip"]
    assert skipped[".hidden.md"] == "hidden file"
    assert report["totals"]["documentsWritten"] == 3
    assert set(stored(documents, store)) == {"Guide.MD", "Report.PDF", "notes/FAQ.TXT"}
    assert top_document(service, store, "how often are API keys rotated") == "Guide.MD"
    assert top_document(service, store, "revenue growth last quarter") == "Report.PDF"


def test_the_human_report_names_every_skipped_and_failed_file(
    service: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "a.md", "# A\n\nAlpha text.")
    put(tmp_path, "logo.png", png_bytes())
    put(tmp_path, "broken.pdf", corrupt_pdf_bytes())
    store = new_store()
    assert main(["ingest", str(tmp_path), "--store", store, "--no-progress"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("skipped       logo.png: cannot read content of type 'image/png'") for line in out
    )
    assert any(line.startswith("failed        broken.pdf: [unreadable_document]") for line in out)
    assert out[-1] == (
        f"added 1, updated 0, unchanged 0, deleted 0, skipped 1, failed 1: 1 document written (1 chunk) "
        f"in store '{store}'"
    )


def test_a_failed_first_ingest_leaves_no_empty_store(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "broken.pdf", corrupt_pdf_bytes())
    put(tmp_path, "logo.png", png_bytes())
    store = new_store()
    code, report = run_json(capsys, "ingest", str(tmp_path), "--store", store)
    assert code == 1
    assert (report["totals"]["failed"], report["totals"]["skipped"], report["added"]) == (1, 1, [])
    with pytest.raises(StoreNotFoundError):
        documents.get_store(store)
    assert main(["stores"]) == 0
    assert store not in capsys.readouterr().out


def test_single_files_named_by_their_path_never_collide(
    service: Any,
    documents: DocumentService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    put(tmp_path, "x/readme.md", "# X\n\nThe x service restarts nightly.")
    put(tmp_path, "y/readme.md", "# Y\n\nThe y service never restarts.")
    monkeypatch.chdir(tmp_path)
    store = new_store()
    assert main(["ingest", "x/readme.md", "--store", store, "--no-progress"]) == 0
    assert main(["ingest", "y/readme.md", "--store", store, "--no-progress"]) == 0
    assert main(["ingest", "y/readme.md", "--store", store, "--id", "guides/y", "--no-progress"]) == 0
    capsys.readouterr()
    assert set(stored(documents, store)) == {"x/readme.md", "y/readme.md", "guides/y"}


def test_sync_adds_updates_leaves_unchanged_and_prunes_with_a_truthful_dry_run(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "tree"
    put(root, "a.md", "# Alpha\n\nThe alpha team owns billing.")
    put(root, "b.md", "# Beta\n\nThe beta team owns search.")
    put(root, "sub/c.txt", "Gamma runs the data platform.")
    store = new_store()

    code, first = run_json(capsys, "sync", str(root), "--store", store)
    assert (code, paths(first, "added"), first["totals"]["documentsWritten"]) == (
        0,
        ["a.md", "b.md", "sub/c.txt"],
        3,
    )
    documents.write_source(store, _api_source("api-note", "Written through the HTTP API."))

    put(root, "a.md", "# Alpha\n\nThe alpha team now owns payroll.")
    (root / "b.md").unlink()
    put(root, "d.md", "# Delta\n\nDelta handles on-call.")

    code, plan = run_json(capsys, "sync", str(root), "--store", store, "--prune", "--dry-run")
    assert code == 0 and plan["dryRun"] is True
    assert (paths(plan, "added"), paths(plan, "updated"), paths(plan, "unchanged")) == (
        ["d.md"],
        ["a.md"],
        ["sub/c.txt"],
    )
    # Prune mirrors the tree: a document another path wrote is deleted too.
    assert [d["sourceId"] for d in plan["deleted"]] == ["api-note", "b.md"]
    assert set(stored(documents, store)) == {"a.md", "b.md", "sub/c.txt", "api-note"}  # nothing written
    assert top_document(service, store, "who owns billing") == "a.md"

    code, done = run_json(capsys, "sync", str(root), "--store", store, "--prune")
    assert code == 0
    assert (paths(done, "added"), paths(done, "updated"), paths(done, "unchanged")) == (
        ["d.md"],
        ["a.md"],
        ["sub/c.txt"],
    )
    assert done["deleted"] == [
        {"sourceId": "api-note", "documents": ["api-note"]},
        {"sourceId": "b.md", "documents": ["b.md"]},
    ]
    assert done["totals"]["documentsWritten"] == 2
    assert set(stored(documents, store)) == {"a.md", "d.md", "sub/c.txt"}
    assert top_document(service, store, "who owns payroll") == "a.md"

    code, again = run_json(capsys, "sync", str(root), "--store", store, "--prune")
    assert code == 0
    assert (again["totals"]["unchanged"], again["totals"]["documentsWritten"], again["deleted"]) == (3, 0, [])


def test_sync_without_prune_keeps_what_left_the_tree_and_prefix_scopes_prune(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handbook, wiki = tmp_path / "handbook", tmp_path / "wiki"
    put(handbook, "leave.md", "# Leave\n\nTwenty days of paid leave.")
    put(handbook, "travel.md", "# Travel\n\nBook trains for trips under four hours.")
    put(wiki, "travel.md", "# Wiki travel\n\nThe wiki page on travel.")
    store = new_store()
    assert run_json(capsys, "sync", str(handbook), "--store", store, "--prefix", "handbook/")[0] == 0
    assert run_json(capsys, "sync", str(wiki), "--store", store, "--prefix", "wiki/")[0] == 0
    (handbook / "leave.md").unlink()

    assert (
        run_json(capsys, "sync", str(handbook), "--store", store, "--prefix", "handbook/")[1]["deleted"] == []
    )
    code, pruned = run_json(
        capsys, "sync", str(handbook), "--store", store, "--prefix", "handbook/", "--prune"
    )
    assert code == 0 and [d["sourceId"] for d in pruned["deleted"]] == ["handbook/leave.md"]
    assert set(stored(documents, store)) == {"handbook/travel.md", "wiki/travel.md"}


def test_sidecars_set_change_and_remove_metadata_without_re_embedding(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "policy.md", "# Policy\n\nLaptops are replaced every three years.")
    sidecar = put(tmp_path, "policy.md.metadata.json", '{"metadataAttributes": {"team": "it", "year": 2024}}')
    store = new_store()
    code, first = run_json(capsys, "sync", str(tmp_path), "--store", store)
    assert code == 0 and paths(first, "added") == ["policy.md"]
    assert (
        stored(documents, store)["policy.md"]["metadata"] | {"team": "it", "year": 2024}
        == (stored(documents, store)["policy.md"]["metadata"])
    )

    sidecar.write_text('{"metadataAttributes": {"team": "security"}}', "utf-8")
    code, second = run_json(capsys, "sync", str(tmp_path), "--store", store)
    assert second["updated"] == [
        {"path": "policy.md", "sourceId": "policy.md", "documents": 1, "chunks": 0, "metadataOnly": True}
    ]
    assert second["totals"]["documentsWritten"] == 0  # nothing re-embedded
    metadata = stored(documents, store)["policy.md"]["metadata"]
    assert metadata["team"] == "security" and "year" not in metadata

    sidecar.unlink()
    run_json(capsys, "sync", str(tmp_path), "--store", store)
    assert "team" not in stored(documents, store)["policy.md"]["metadata"]

    sidecar.write_text("not json", "utf-8")
    code, bad = run_json(capsys, "sync", str(tmp_path), "--store", store)
    assert code == 1 and bad["failed"][0]["path"] == "policy.md.metadata.json"


def test_delete_says_what_it_removed_and_fails_when_nothing_was(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "guide.md", "# Guide\n\nRotate keys.")
    put(tmp_path, "faq.md", "# FAQ\n\nQuestions.")
    store = new_store()
    assert main(["ingest", str(tmp_path), "--store", store, "--no-progress"]) == 0
    capsys.readouterr()

    assert main(["delete", "--store", store, "guide.md", "nope.md"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"deleted 1 document from store '{store}': guide.md; not found: nope.md"
    )
    assert main(["delete", "--store", store, "guide.md", "nope.md"]) == 1
    assert (
        capsys.readouterr().out.strip()
        == f"deleted 0 documents from store '{store}'; not found: guide.md, nope.md"
    )
    assert main(["delete", "--store", "no-such-store", "x"]) == 2
    assert "store 'no-such-store' not found" in capsys.readouterr().err
    assert set(stored(documents, store)) == {"faq.md"}


def test_sync_refuses_a_single_file_and_reports_a_missing_path(
    service: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "a.md", "# A\n\ntext")
    assert main(["sync", str(tmp_path / "a.md"), "--store", new_store(), "--no-progress"]) == 2
    assert "use ingest" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path / "absent"), "--store", new_store(), "--no-progress"]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def _api_source(source_id: str, text: str) -> Any:
    from retrieval_core.documents.models import SourceInput

    return SourceInput(source_id, text.encode(), "text/plain")


def test_a_beir_corpus_keeps_its_record_ids_and_sync_updates_only_changed_records(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        {
            "_id": "d1",
            "title": "Tides",
            "text": "The moon's pull causes ocean tides.",
            "metadata": {"year": 2020},
        },
        {"_id": "d2", "title": "Volcanoes", "text": "Magma rises through the crust.", "metadata": {}},
    ]
    corpus = put(tmp_path, "corpus.jsonl", jsonl_bytes(records))
    store = new_store()
    code, report = run_json(capsys, "ingest", str(corpus), "--store", store)
    assert code == 0 and report["added"][0]["documents"] == 2
    docs = stored(documents, store)
    assert set(docs) == {"d1", "d2"}  # qrels map by these ids (bench/eval.py)
    assert docs["d1"]["metadata"]["year"] == 2020 and docs["d1"]["source"] == report["added"][0]["sourceId"]
    assert top_document(service, store, "what causes tides") == "d1"

    records[1]["text"] = "Lava flows from volcanic eruptions."
    corpus.write_bytes(jsonl_bytes([*records, {"_id": "d3", "text": "A third passage."}]))
    code, report = run_json(capsys, "ingest", str(corpus), "--store", store)
    assert code == 0 and report["updated"][0]["documents"] == 3
    assert report["totals"]["documentsWritten"] == 2  # d2 changed, d3 new; d1 not re-embedded


@pytest.fixture()
def s3(moto: Any, aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's S3 with a fresh bucket; the CLI reaches it through S3_ENDPOINT_URL."""
    from retrieval_core.settings import get_settings

    monkeypatch.setenv("S3_ENDPOINT_URL", moto.endpoint_url)
    get_settings.cache_clear()
    client = moto.client("s3")
    client.create_bucket(Bucket=(bucket := f"docs-{uuid.uuid4().hex[:8]}"))
    client.bucket = bucket
    yield client
    monkeypatch.delenv("S3_ENDPOINT_URL")
    get_settings.cache_clear()


def test_sync_from_an_s3_prefix(
    s3: Any, service: Any, documents: DocumentService, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = s3.bucket
    s3.put_object(Bucket=bucket, Key="handbook/", Body=b"")  # a console "folder"
    s3.put_object(
        Bucket=bucket, Key="handbook/guide.md", Body=b"# Guide\n\nRotate the API keys every ninety days."
    )
    pdf = pdf_bytes(["Laptops are replaced every three years."], title="Hardware")
    s3.put_object(Bucket=bucket, Key="handbook/it/Hardware.PDF", Body=pdf, ContentType="binary/octet-stream")
    s3.put_object(
        Bucket=bucket,
        Key="handbook/it/Hardware.PDF.metadata.json",
        Body=b'{"metadataAttributes": {"team": "it"}}',
    )
    s3.put_object(Bucket=bucket, Key="handbook/logo.png", Body=png_bytes())
    s3.put_object(Bucket=bucket, Key="handbookish/elsewhere.md", Body=b"# Not under the prefix")
    store = new_store()
    root = f"s3://{bucket}/handbook"

    code, report = run_json(capsys, "sync", root, "--store", store)
    assert code == 0 and report["root"] == f"s3://{bucket}/handbook/"
    assert paths(report, "added") == ["guide.md", "it/Hardware.PDF"]
    assert report["skipped"][0]["path"] == "logo.png" and "image/png" in report["skipped"][0]["reason"]
    docs = stored(documents, store)
    assert set(docs) == {"guide.md", "it/Hardware.PDF"}
    assert docs["it/Hardware.PDF"]["metadata"]["team"] == "it"
    assert top_document(service, store, "when are laptops replaced") == "it/Hardware.PDF"

    s3.delete_object(Bucket=bucket, Key="handbook/guide.md")
    s3.put_object(Bucket=bucket, Key="handbook/it/Hardware.PDF", Body=pdf_bytes(["Phones: every two years."]))
    code, report = run_json(capsys, "sync", root, "--store", store, "--prune")
    assert code == 0 and paths(report, "updated") == ["it/Hardware.PDF"]
    assert report["deleted"] == [{"sourceId": "guide.md", "documents": ["guide.md"]}]
    assert set(stored(documents, store)) == {"it/Hardware.PDF"}


def test_s3_listing_is_paginated_and_errors_are_reported(
    s3: Any, service: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:  # more than one ListObjectsV2 page (1,000 keys)
        list(
            pool.map(
                lambda n: s3.put_object(Bucket=s3.bucket, Key=f"many/{n:04d}.txt", Body=b"x"), range(1005)
            )
        )
    code, plan = run_json(capsys, "sync", f"s3://{s3.bucket}/many", "--store", new_store(), "--dry-run")
    assert code == 0 and len(plan["added"]) == 1005 and plan["added"][-1]["path"] == "1004.txt"

    assert main(["sync", "s3://no-such-bucket-here/x", "--store", new_store(), "--no-progress"]) == 2
    assert "cannot list s3://no-such-bucket-here/x/: NoSuchBucket" in capsys.readouterr().err


def test_a_new_store_takes_its_definition_from_the_first_sync(
    service: Any, documents: DocumentService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path, "a.md", "# A\n\nHalf-precision vectors halve the index.")
    store = new_store()
    argv = [
        "sync",
        str(tmp_path),
        "--store",
        store,
        "--storage",
        "halfvec",
        "--display-name",
        "Team Händbook",
    ]
    assert run_json(capsys, *argv)[0] == 0
    info = documents.get_store(store)
    assert (info.storage, info.display_name, info.document_count) == ("halfvec", "Team Händbook", 1)
    assert top_document(service, store, "what halves the index") == "a.md"


def test_a_file_naming_another_files_record_fails_alone_and_sync_converges_once_the_old_file_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], documents: DocumentService
) -> None:
    store = new_store()
    record = json.dumps({"_id": "d1", "text": "Expense reports are due within 30 days."})
    put(tmp_path, "a.jsonl", record)
    assert run_json(capsys, "sync", str(tmp_path), "--store", store, "--prune")[0] == 0
    # The record moves to b.jsonl, beside a new file that has nothing to do with it.
    (tmp_path / "a.jsonl").unlink()
    put(tmp_path, "b.jsonl", record)
    put(tmp_path, "notes.md", "# Notes\n\nBadges are collected at the front desk.")
    code, report = run_json(capsys, "sync", str(tmp_path), "--store", store, "--prune")
    assert code == 1
    assert [(f["path"], f["code"]) for f in report["failed"]] == [("b.jsonl", "document_of_another_source")]
    assert "'a.jsonl'" in report["failed"][0]["message"]
    assert stored(documents, store).keys() == {"notes.md"}  # a.jsonl pruned, notes.md written
    code, report = run_json(capsys, "sync", str(tmp_path), "--store", store, "--prune")
    assert code == 0 and report["failed"] == []
    assert {k: v["source"] for k, v in stored(documents, store).items()} == {
        "d1": "b.jsonl",
        "notes.md": "notes.md",
    }
    documents.delete_store(store)
