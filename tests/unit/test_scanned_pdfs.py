"""Scanned PDFs: told apart from empty ones, refused with their own code, and read through an OCR engine.

The engines themselves (Textract, tesseract) are tested against a fake Textract and a stand-in tesseract
in tests/integration/test_ocr_engines.py; here an engine of the test's own reads pages, which is what
the parser sees of any engine.
"""

from __future__ import annotations

import io
import time

import pytest

from retrieval_core.parsers import parse
from retrieval_core.parsers.budget import ParseBudget, ParseMeter
from retrieval_core.parsers.detect import PDF
from retrieval_core.parsers.exceptions import (
    DocumentLimitError,
    DocumentParseError,
    EmptyDocumentError,
    NoTextLayerError,
    OcrRefusedError,
)
from retrieval_core.parsers.scanned_pages import ScannedPage
from tests.files import JPEG_SIGNATURE, blank_pdf, pdf_bytes, scanned_pdf


class PageReader:
    """An OCR engine that answers each page from `texts` (by page number) and records what it was given."""

    name = "scripted"

    def __init__(self, texts: dict[int, str], max_pages: int = 20, delay_s: float = 0.0) -> None:
        self.texts = texts
        self.max_pages = max_pages
        self.delay_s = delay_s
        self.pages: list[int] = []
        self.documents: list[bytes] = []

    def read_page(self, page: ScannedPage, timeout_s: float) -> str:
        self.pages.append(page.number)
        self.documents.append(page.as_pdf())
        if self.delay_s > timeout_s:
            time.sleep(timeout_s)
            raise TimeoutError
        return self.texts.get(page.number, "")


# Telling a scan from an empty PDF.


@pytest.mark.parametrize("image", ["gray", "bilevel", "jpeg", "cmyk", "inline"])
def test_a_pdf_of_images_without_text_is_no_text_layer_not_empty(image: str) -> None:
    with pytest.raises(NoTextLayerError) as caught:
        parse(scanned_pdf([None, None, None], image=image), None, "scan.pdf")
    error = caught.value
    assert (error.status_code, error.code) == (422, "no_text_layer")
    assert "no text layer: a scanned PDF? OCR is not enabled" in error.message
    assert "OCR_ENGINE" in error.message
    assert error.details == {"contentType": PDF, "scannedPages": 3, "ocrEngine": None}


def test_a_pdf_whose_pages_draw_nothing_or_lines_only_is_an_empty_document() -> None:
    for data in (blank_pdf(2), pdf_bytes(["", " "])):
        with pytest.raises(EmptyDocumentError) as caught:
            parse(data, None, "blank.pdf")
        assert caught.value.code == "empty_document"


def test_text_pages_of_a_partly_scanned_pdf_are_read_and_its_scanned_pages_left_out_without_ocr() -> None:
    [document] = parse(scanned_pdf(["The cover letter.", None, "The appendix."]), None, "mixed.pdf").documents
    assert [(b.text, b.metadata) for b in document.blocks] == [
        ("The cover letter.", {"pageNumber": 1}),
        ("The appendix.", {"pageNumber": 3}),
    ]


def test_a_truncated_scan_is_unreadable_not_a_missing_text_layer() -> None:
    data = scanned_pdf([None, None], image="gray")
    with pytest.raises(DocumentParseError) as caught:
        parse(data[: len(data) // 2], None, "scan.pdf")
    assert caught.value.code == "unreadable_document"


def test_an_encrypted_scan_is_told_as_such_once_it_opens() -> None:
    from pypdf import PdfReader, PdfWriter

    def encrypted(user_password: str) -> bytes:
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(scanned_pdf([None]))))
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-256")
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()

    with pytest.raises(DocumentParseError, match="needs a password"):
        parse(encrypted("secret"), None, "locked-scan.pdf")
    with pytest.raises(NoTextLayerError):
        parse(encrypted(""), None, "restricted-scan.pdf")


# Reading scanned pages through an engine.


def test_ocr_reads_only_the_scanned_pages_and_says_so_in_their_metadata() -> None:
    engine = PageReader({2: "Invoice 2024-117\nTotal due: 420 EUR"})
    data = scanned_pdf(["The cover letter.", None, "The appendix.", None], title="Invoice")
    [document] = parse(data, None, "invoice.pdf", ocr=engine).documents
    assert engine.pages == [2, 4]
    assert [(b.text, b.metadata) for b in document.blocks] == [
        ("The cover letter.", {"pageNumber": 1}),
        (
            "Invoice 2024-117\nTotal due: 420 EUR",
            {"pageNumber": 2, "textSource": "ocr", "ocrEngine": "scripted"},
        ),
        ("The appendix.", {"pageNumber": 3}),
    ]
    assert document.title == "Invoice" and document.metadata["pageCount"] == 4
    # Each page reaches the engine as a one-page PDF of its own.
    from pypdf import PdfReader

    assert [len(PdfReader(io.BytesIO(d)).pages) for d in engine.documents] == [1, 1]


def test_a_scan_ocr_finds_no_text_on_is_no_text_layer_naming_the_engine() -> None:
    with pytest.raises(NoTextLayerError) as caught:
        parse(scanned_pdf([None, None]), None, "scan.pdf", ocr=PageReader({}))
    assert "OCR (scripted) found no text" in caught.value.message
    assert caught.value.details["ocrEngine"] == "scripted"


def test_more_scanned_pages_than_ocr_max_pages_is_a_limit_naming_the_setting_before_any_is_read() -> None:
    engine = PageReader({1: "a"}, max_pages=2)
    with pytest.raises(DocumentLimitError) as caught:
        parse(scanned_pdf([None, None, None]), None, "scan.pdf", ocr=engine)
    assert caught.value.details["limit"] == "OCR_MAX_PAGES" and caught.value.details["value"] == "3"
    assert engine.pages == []


def test_ocr_keeps_to_the_parse_deadline() -> None:
    engine = PageReader({1: "a", 2: "b"}, delay_s=60)
    meter = ParseMeter(ParseBudget(parse_timeout_s=0.3))
    started = time.monotonic()
    with pytest.raises(DocumentLimitError) as caught:
        parse(scanned_pdf([None, None]), None, "scan.pdf", meter, ocr=engine)
    assert caught.value.details["limit"] == "PARSE_TIMEOUT_S"
    assert time.monotonic() - started < 5 and engine.pages == [1]


# What a page gives an engine that opens image files.


def test_a_scanned_page_gives_its_images_as_files_an_ocr_program_opens() -> None:
    from pypdf import PdfReader

    def images(image: str) -> list[tuple[str, bytes]]:
        [page] = PdfReader(io.BytesIO(scanned_pdf([None], image=image))).pages
        return [(i.suffix, i.data) for i in ScannedPage(1, page).images("tesseract")]

    [(suffix, data)] = images("gray")
    assert suffix == ".pgm" and data == b"P5\n8 8\n255\n" + bytes(range(0, 256, 4))
    [(suffix, data)] = images("bilevel")
    # PBM's 1 is black, DeviceGray's 0: each row 0x0f (four black, four white pixels) becomes 0xf0.
    assert suffix == ".pbm" and data == b"P4\n8 8\n" + b"\xf0" * 8
    [(suffix, data)] = images("jpeg")
    assert suffix == ".jpg" and data.startswith(JPEG_SIGNATURE)
    with pytest.raises(OcrRefusedError) as caught:
        images("cmyk")
    assert caught.value.code == "ocr_refused" and caught.value.details["pageNumber"] == 1
