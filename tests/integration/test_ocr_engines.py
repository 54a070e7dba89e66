"""OCR of scanned PDFs through the write path: Textract through real boto3 against a fake Textract (moto's
DetectDocumentText answers every document with nothing: tests/fakes/textract.py), and tesseract as a
stand-in executable the test puts on PATH. The service runs without either while OCR_ENGINE is `none`.
"""

from __future__ import annotations

import base64
import io
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.cli.main import main
from retrieval_core.clients.aws import AwsClientOptions, aws_client
from retrieval_core.exceptions import ConfigurationError
from retrieval_core.grants import OPEN_GRANT
from retrieval_core.ocr.tesseract import TesseractOcr
from retrieval_core.ocr.textract import TextractOcr
from retrieval_core.parsers import parse
from retrieval_core.parsers.exceptions import OcrFailedError, OcrRefusedError
from retrieval_core.schemas.retrieve import RetrieveRequest
from tests.fakes.tesseract import install_tesseract
from tests.fakes.textract import FakeTextract, textract_error
from tests.files import scanned_pdf
from tests.writing import doc_url

pytestmark = pytest.mark.usefixtures("aws_env")


@pytest.fixture(scope="module")
def textract() -> Iterator[FakeTextract]:
    # One server for the module: the process keeps one Textract engine (and client) per OCR_ENGINE.
    with FakeTextract() as server:
        yield server


@pytest.fixture()
def fake_textract(textract: FakeTextract) -> FakeTextract:
    textract.reset()
    textract.pages.clear()
    return textract


def textract_engine(server: FakeTextract, max_pages: int = 20) -> TextractOcr:
    options = AwsClientOptions(endpoint_url=server.url, retry_mode="standard", attempts=3)
    return TextractOcr(max_pages, client=lambda: aws_client("textract", options))


def chunk_metadata(client: TestClient, store: str, document_id: str) -> list[dict[str, Any]]:
    found = client.post(
        "/api/v1/rag/retrieve",
        json={"query": "invoice total", "store": store, "grade": 0.0, "similarityTopK": 10},
    ).json()
    return [r["metadata"] for r in found["results"] if r["metadata"]["documentId"] == document_id]


# Textract.


def test_textract_reads_each_scanned_page_as_a_one_page_pdf_and_its_lines_become_the_text(
    fake_textract: FakeTextract,
) -> None:
    from pypdf import PdfReader

    fake_textract.pages.extend([["Invoice 2024-117", "Total due: 420 EUR"], ["Paid by transfer"]])
    data = scanned_pdf([None, "A typed cover note.", None])
    [document] = parse(data, None, "invoice.pdf", ocr=textract_engine(fake_textract)).documents
    assert [(b.text, b.metadata) for b in document.blocks] == [
        (
            "Invoice 2024-117\nTotal due: 420 EUR",
            {"pageNumber": 1, "textSource": "ocr", "ocrEngine": "textract"},
        ),
        ("A typed cover note.", {"pageNumber": 2}),
        ("Paid by transfer", {"pageNumber": 3, "textSource": "ocr", "ocrEngine": "textract"}),
    ]
    sent = fake_textract.documents()
    assert [len(PdfReader(io.BytesIO(d)).pages) for d in sent] == [1, 1]
    # Each one-page PDF is the scanned page itself: its image, no text.
    assert all(PdfReader(io.BytesIO(d)).pages[0].extract_text() == "" for d in sent)


def test_a_page_textract_calls_unsupported_is_refused_for_good(fake_textract: FakeTextract) -> None:
    fake_textract.script(
        textract_error(400, "UnsupportedDocumentException", "Request has unsupported document format")
    )
    with pytest.raises(OcrRefusedError) as caught:
        parse(scanned_pdf([None]), None, "scan.pdf", ocr=textract_engine(fake_textract))
    assert (caught.value.status_code, caught.value.code) == (422, "ocr_refused")
    assert "UnsupportedDocumentException" in caught.value.message and len(fake_textract.requests) == 1


def test_textract_throttling_is_retried_then_a_502_and_a_refused_role_names_the_permission(
    fake_textract: FakeTextract,
) -> None:
    engine = textract_engine(fake_textract)
    fake_textract.script(*[textract_error(400, "ThrottlingException", "Rate exceeded")] * 2)
    [document] = parse(scanned_pdf([None]), None, "scan.pdf", ocr=engine).documents
    assert document.blocks[0].text == "scanned line 3" and len(fake_textract.requests) == 3

    fake_textract.reset()
    fake_textract.fail_always(429, "Rate exceeded")
    with pytest.raises(OcrFailedError) as caught:
        parse(scanned_pdf([None]), None, "scan.pdf", ocr=engine)
    assert (caught.value.status_code, caught.value.code) == (502, "ocr_failed")
    assert "ThrottlingException" in caught.value.message and len(fake_textract.requests) == 3

    fake_textract.reset()
    fake_textract.fail_always(403, "User is not authorized to perform: textract:DetectDocumentText")
    with pytest.raises(OcrFailedError) as caught:
        parse(scanned_pdf([None]), None, "scan.pdf", ocr=engine)
    assert "AccessDeniedException" in caught.value.message
    assert "IAM permission textract:DetectDocumentText" in caught.value.message


def test_a_scanned_pdf_put_over_http_is_ocrd_with_textract_and_its_chunks_say_so(
    client: TestClient, store: str, fake_textract: FakeTextract, configure: Any
) -> None:
    body = {"content": base64.b64encode(scanned_pdf([None, None])).decode(), "fileName": "invoice.pdf"}
    refused = client.put(doc_url(store, "invoice.pdf"), json=body)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "no_text_layer"
    assert fake_textract.requests == []

    configure(OCR_ENGINE="textract", AWS_ENDPOINT_URL_TEXTRACT=fake_textract.url)
    fake_textract.pages.extend([["Invoice 2024-117", "Total due: 420 EUR"], []])
    written = client.put(doc_url(store, "invoice.pdf"), json=body)
    assert written.status_code == 201, written.text
    assert written.json()["chunkCount"] == 1  # the second page: nothing found, no chunk
    [metadata] = chunk_metadata(client, store, "invoice.pdf")
    assert (metadata["pageNumber"], metadata["textSource"], metadata["ocrEngine"]) == (1, "ocr", "textract")


# tesseract.


@pytest.fixture()
def tesseract_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    install_tesseract(folder)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder


def test_tesseract_reads_the_images_of_each_scanned_page(tesseract_on_path: Path) -> None:
    engine = TesseractOcr(20)
    for image, text in [("gray", "scanned gray 8x8 image"), ("bilevel", "scanned bilevel 8x8 image")]:
        [document] = parse(scanned_pdf([None], image=image), None, "scan.pdf", ocr=engine).documents
        assert [(b.text, b.metadata["ocrEngine"]) for b in document.blocks] == [(text, "tesseract")]


def test_tesseract_failing_is_a_502_and_missing_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_tesseract(tmp_path / "failing", behaviour="fail")
    monkeypatch.setenv("PATH", str(tmp_path / "failing"))
    with pytest.raises(OcrFailedError) as failed:
        parse(scanned_pdf([None]), None, "scan.pdf", ocr=TesseractOcr(20))
    assert failed.value.status_code == 502 and "Unknown format" in failed.value.message

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigurationError, match="no `tesseract` is on PATH"):
        parse(scanned_pdf([None]), None, "scan.pdf", ocr=TesseractOcr(20))


def test_ingest_fails_a_scan_without_ocr_and_reads_it_with_tesseract(
    service: Any, tesseract_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], configure: Any
) -> None:
    from retrieval_core.container import get_document_service

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "scan.pdf").write_bytes(scanned_pdf([None, "A typed cover note."][::-1]))
    (folder / "only-images.pdf").write_bytes(scanned_pdf([None, None]))
    store = f"ocr-{uuid.uuid4().hex[:10]}"

    code = main(["ingest", str(folder), "--store", store, "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [(f["path"], f["code"]) for f in report["failed"]] == [("only-images.pdf", "no_text_layer")]
    assert "OCR is not enabled" in report["failed"][0]["message"]
    assert [a["path"] for a in report["added"]] == ["scan.pdf"] and report["skipped"] == []

    configure(OCR_ENGINE="tesseract")
    code = main(["ingest", str(folder), "--store", store, "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert [a["path"] for a in report["added"]] == ["only-images.pdf"]
    page, _ = get_document_service().list_documents(store)
    assert {d.id for d in page} == {"scan.pdf", "only-images.pdf"}
    request = RetrieveRequest(query="scanned gray image", store=store, similarity_top_k=5, grade=0.0)
    results, _ = service.retrieve(request, grant=OPEN_GRANT)
    ocrd = [r for r in results.results if r.metadata["documentId"] == "only-images.pdf"]
    assert sorted((r.metadata["pageNumber"], r.content) for r in ocrd) == [
        (1, "scanned gray 8x8 image"),
        (2, "scanned gray 8x8 image"),
    ]
    assert {(r.metadata["textSource"], r.metadata["ocrEngine"]) for r in ocrd} == {("ocr", "tesseract")}
