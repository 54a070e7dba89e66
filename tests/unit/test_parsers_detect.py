"""Format detection: suffixes, declared types and the bytes themselves, which win when they are definite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_core.parsers import parse
from retrieval_core.parsers.detect import (
    CSV,
    DOCX,
    HTML,
    JSONL,
    MARKDOWN,
    PDF,
    SUPPORTED_CONTENT_TYPES,
    TEXT,
    detect_content_type,
)
from retrieval_core.parsers.exceptions import DocumentParseError, UnsupportedContentTypeError
from tests.files import markdown_bytes, pdf_bytes, png_bytes, text_bytes, zip_bytes


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.pdf", PDF),
        ("A.PDF", PDF),
        ("notes.md", MARKDOWN),
        ("NOTES.MD", MARKDOWN),
        ("x.markdown", MARKDOWN),
        ("page.HTM", HTML),
        ("page.html", HTML),
        ("data.CSV", CSV),
        ("corpus.jsonl", JSONL),
        ("events.ndjson", JSONL),
        ("readme.txt", TEXT),
        ("dir.with.dots/readme", TEXT),
    ],
)
def test_suffix_decides_for_text_without_a_declared_type(name: str, expected: str) -> None:
    data = pdf_bytes(["x"]) if expected == PDF else b"some words, here"
    assert detect_content_type(data, None, name) == expected


def test_a_txt_that_is_really_a_pdf_is_read_as_pdf() -> None:
    parsed = parse(pdf_bytes(["Hidden report."]), "text/plain", "report.txt")
    assert parsed.content_type == PDF
    assert parsed.documents[0].blocks[0].metadata == {"pageNumber": 1}


def test_pdf_header_after_junk_is_a_pdf_but_text_about_pdf_headers_is_not() -> None:
    assert detect_content_type(b"X-Mailer: gateway\r\n" + pdf_bytes(["x"]), None, "mail.bin") == PDF
    page = markdown_bytes("# PDF internals\n\nEvery file starts with `%PDF-1.7`.\n")
    assert detect_content_type(page, None, "pdf-internals.md") == MARKDOWN


def test_octet_stream_and_no_type_are_sniffed() -> None:
    assert detect_content_type(pdf_bytes(["x"]), "application/octet-stream", None) == PDF
    assert detect_content_type(b"<!DOCTYPE html><html><p>x</p></html>", None, None) == HTML
    assert detect_content_type(b'{"id": 1, "text": "a"}\n{"id": 2}\n', "binary/octet-stream", "blob") == JSONL
    assert detect_content_type(b"just words", None, None) == TEXT


def test_html_markers_beat_a_lying_suffix() -> None:
    page = b'<?xml version="1.0"?>\n<!-- saved --><html><body><p>x</p></body></html>'
    assert detect_content_type(page, "text/plain", "saved.txt") == HTML
    assert detect_content_type(b"\xef\xbb\xbf<!doctype HTML>\n<p>x", None, "page.md") == HTML


def test_declared_type_with_parameters_and_aliases() -> None:
    assert detect_content_type(b"# T", "text/markdown; charset=utf-8", None) == MARKDOWN
    assert detect_content_type(b"# T", "text/x-markdown", None) == MARKDOWN
    assert detect_content_type(b"{}", "application/jsonl", None) == JSONL


def test_a_specific_declared_type_beats_the_suffix_but_plain_text_does_not() -> None:
    assert detect_content_type(b"a,b\n1,2\n", "text/csv", "export.txt") == CSV
    assert detect_content_type(markdown_bytes("# T"), "text/plain", "notes.md") == MARKDOWN
    assert detect_content_type(b"print(1)", "text/x-python", "run.py") == TEXT


def test_png_is_415_listing_every_supported_type() -> None:
    with pytest.raises(UnsupportedContentTypeError) as caught:
        parse(png_bytes(), "image/png", "photo.png")
    error = caught.value
    assert error.status_code == 415
    assert error.details["supported"] == list(SUPPORTED_CONTENT_TYPES)
    for kind in SUPPORTED_CONTENT_TYPES:
        assert kind in error.message


def test_png_named_txt_is_still_415() -> None:
    with pytest.raises(UnsupportedContentTypeError) as caught:
        parse(png_bytes(), None, "photo.txt")
    assert caught.value.details["contentType"] == "image/png"


def test_other_zip_and_unknown_binary_are_415() -> None:
    with pytest.raises(UnsupportedContentTypeError):
        parse(zip_bytes({"xl/workbook.xml": "<workbook/>"}), None, "sheet.xlsx")
    with pytest.raises(UnsupportedContentTypeError):
        parse(bytes(range(256)) * 4, "application/octet-stream", None)


def test_a_declared_non_text_type_we_do_not_read_is_415() -> None:
    with pytest.raises(UnsupportedContentTypeError):
        parse(b'{"a": 1}', "application/json", None)


def test_binary_claiming_to_be_pdf_is_a_422() -> None:
    with pytest.raises(DocumentParseError, match="not a PDF"):
        parse(b"\x00\x01\x02garbage" * 10, "application/pdf", "x.pdf")


def test_utf16_text_is_not_taken_for_binary() -> None:
    assert parse(text_bytes("hello", "utf-16-le", bom=True), None, None).content_type == TEXT


def test_a_docx_claim_on_an_encrypted_office_file_names_encryption() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    with pytest.raises(DocumentParseError, match="encrypted"):
        parse(ole, DOCX, "locked.docx")
    with pytest.raises(UnsupportedContentTypeError):
        parse(ole, None, "legacy.doc")


READERS = ("pdf", "docx", "html_page", "markdown", "records", "text")


def test_importing_parsers_loads_no_parser_library_and_no_reader() -> None:
    """A handler that reads no file (a store GET, a DELETE) pays for no format at its cold start."""
    loaded = [*("pypdf", "docx", "lxml", "markdown_it"), *(f"retrieval_core.parsers.{m}" for m in READERS)]
    probe = f"import sys, retrieval_core.parsers; print(sorted(m for m in {loaded!r} if m in sys.modules))"
    core = Path(__file__).resolve().parents[2] / "layers" / "retrieval_core"
    env = {**os.environ, "PYTHONPATH": str(core)}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
