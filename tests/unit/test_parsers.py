"""parse(): PDF, Markdown and plain text read into blocks that carry their page or section."""

from __future__ import annotations

import random

import pytest

from retrieval_core.documents.chunking import chunk_blocks
from retrieval_core.exceptions import RetrievalError
from retrieval_core.parsers import parse
from retrieval_core.parsers.detect import MARKDOWN, PDF, TEXT
from retrieval_core.parsers.exceptions import DocumentParseError, EmptyDocumentError
from tests.files import corrupt_pdf_bytes, markdown_bytes, pdf_bytes, sample_files, text_bytes

LONG = " ".join(f"Sentence {i} about installing the service." for i in range(40))


# PDF


def test_pdf_gives_one_block_per_page_and_every_chunk_its_page_number() -> None:
    data = pdf_bytes([f"Page one. {LONG}", f"Page two. {LONG}", f"Page three. {LONG}"], title="Manual")
    parsed = parse(data, "application/pdf", "manual.pdf")
    assert parsed.content_type == PDF
    [document] = parsed.documents
    assert document.title == "Manual"
    assert document.metadata == {"contentType": PDF, "pageCount": 3}
    assert [b.metadata for b in document.blocks] == [{"pageNumber": 1}, {"pageNumber": 2}, {"pageNumber": 3}]
    chunks = chunk_blocks(document.blocks, max_chars=300, overlap=50)
    assert len(chunks) > 9
    for chunk in chunks:
        page = chunk.metadata["pageNumber"]
        assert ["one", "two", "three"][page - 1] in document.blocks[page - 1].text
        assert chunk.text in document.blocks[page - 1].text


def test_pdf_text_is_the_pages_text() -> None:
    parsed = parse(pdf_bytes(["Hello (world) café\nsecond line"]), None, "a.pdf")
    assert parsed.documents[0].blocks[0].text == "Hello (world) café\nsecond line"


def test_pdf_without_title_has_empty_title_and_blank_pages_make_no_block() -> None:
    [document] = parse(pdf_bytes(["First.", "", "Third."]), None, "x.pdf").documents
    assert document.title == ""
    assert [b.metadata["pageNumber"] for b in document.blocks] == [1, 3]
    assert document.metadata["pageCount"] == 3


def test_pdf_encrypted_with_an_empty_user_password_is_read() -> None:
    data = pdf_bytes(["Restricted but readable."], title="Locked", password="", owner_password="boss")
    [document] = parse(data, "application/pdf", "locked.pdf").documents
    assert document.blocks[0].text == "Restricted but readable."
    assert document.title == "Locked"


def test_pdf_that_needs_a_password_is_a_422_naming_encrypted() -> None:
    with pytest.raises(DocumentParseError) as caught:
        parse(pdf_bytes(["Secret."], password="hunter2"), "application/pdf", "secret.pdf")
    assert caught.value.status_code == 422
    assert "encrypted" in caught.value.details["reason"]
    assert "encrypted" in caught.value.message


def test_truncated_pdf_is_a_short_422_not_a_traceback() -> None:
    with pytest.raises(DocumentParseError) as caught:
        parse(corrupt_pdf_bytes(), None, "report.pdf")
    assert caught.value.status_code == 422
    assert "damaged or truncated" in caught.value.details["reason"]
    assert len(caught.value.message) < 300 and "Traceback" not in caught.value.message


def test_pdf_with_pages_but_no_text_is_empty() -> None:
    with pytest.raises(EmptyDocumentError):
        parse(pdf_bytes(["", " "]), None, "scan.pdf")


# Markdown

GUIDE = """\
---
title: front matter is not text
---
Intro before any heading.

# Guide

Welcome.

## Install

```sh
# this comment is not a heading
pip install thing
```

### Linux

Use apt.

Windows
-------

Use the installer.

> # quoted, not a section

## Empty

# Appendix

The end.
"""


def test_markdown_blocks_follow_heading_paths() -> None:
    parsed = parse(markdown_bytes(GUIDE), "text/markdown", "guide.md")
    assert parsed.content_type == MARKDOWN
    [document] = parsed.documents
    assert document.title == "Guide"
    sections = [b.metadata.get("section") for b in document.blocks]
    assert sections == [
        None,
        "Guide",
        "Guide > Install",
        "Guide > Install > Linux",
        "Guide > Windows",
        "Appendix",
    ]
    install = document.blocks[2].text
    assert "# this comment is not a heading" in install and "pip install thing" in install
    assert "front matter" not in document.text
    assert "quoted, not a section" in document.blocks[4].text


def test_markdown_chunks_never_span_sections_and_carry_their_path() -> None:
    text = "# A\n\n" + LONG + "\n\n## B\n\n" + LONG + "\n\n# C\n\n" + LONG
    [document] = parse(markdown_bytes(text), None, "x.md").documents
    chunks = chunk_blocks(document.blocks, max_chars=200, overlap=40)
    by_section = {b.metadata["section"]: b.text for b in document.blocks}
    assert set(by_section) == {"A", "A > B", "C"}
    for chunk in chunks:
        assert chunk.text in by_section[chunk.metadata["section"]]


def test_markdown_title_is_the_first_h1_without_markup() -> None:
    data = markdown_bytes("## Sub first\n\ntext\n\n# The **real** `title`\n\nmore")
    [document] = parse(data, None, "a.md").documents
    assert document.title == "The real title"


@pytest.mark.parametrize("name", ["README.MD", "notes.Markdown", "x.markdown"])
def test_markdown_suffix_is_case_insensitive(name: str) -> None:
    assert parse(markdown_bytes("# T\n\nbody"), None, name).content_type == MARKDOWN


# Plain text


@pytest.mark.parametrize(
    ("data", "declared"),
    [
        (text_bytes("Grüße aus Köln"), None),
        (text_bytes("Grüße aus Köln", bom=True), None),
        (text_bytes("Grüße aus Köln", "utf-16-le", bom=True), None),
        (text_bytes("Grüße aus Köln", "utf-16-be", bom=True), None),
        ("Grüße aus Köln".encode("utf-16"), "text/plain"),
        ("Grüße aus Köln".encode("latin-1"), "text/plain; charset=ISO-8859-1"),
        ("Grüße aus Köln".encode("utf-16-le"), "text/plain; charset=UTF-16LE"),
    ],
)
def test_plain_text_decodes_bom_and_declared_charset(data: bytes, declared: str | None) -> None:
    parsed = parse(data, declared, "greeting.txt")
    assert parsed.content_type == TEXT
    assert parsed.documents[0].text == "Grüße aus Köln"
    assert parsed.documents[0].metadata == {"contentType": TEXT}


def test_text_that_is_not_utf8_and_declares_nothing_is_a_422_not_mojibake() -> None:
    with pytest.raises(DocumentParseError) as caught:
        parse("Grüße".encode("latin-1"), None, "old.txt")
    assert "not valid utf-8" in caught.value.details["reason"]


def test_unknown_charset_is_a_422() -> None:
    with pytest.raises(DocumentParseError, match="unknown charset"):
        parse(b"hello", "text/plain; charset=klingon", "a.txt")


def test_an_empty_file_is_reported_as_the_format_it_claims() -> None:
    with pytest.raises(EmptyDocumentError) as caught:
        parse(b"", None, "report.pdf")
    assert caught.value.details["contentType"] == PDF


@pytest.mark.parametrize("data", [b"", b"  \n\t ", b"\xef\xbb\xbf  \n"])
def test_empty_text_is_empty_document_error(data: bytes) -> None:
    with pytest.raises(EmptyDocumentError) as caught:
        parse(data, "text/plain", "empty.txt")
    assert caught.value.status_code == 422


def test_damaged_files_of_every_format_give_our_errors_never_a_library_exception() -> None:
    """Bytes flipped, cut or inserted: parse answers or raises a RetrievalError (a 4xx), never a 500."""
    rng = random.Random(15)
    samples = [*sample_files().values(), ("locked.pdf", pdf_bytes(["a"], password="", owner_password="o"))]
    refused = 0
    for _ in range(400):
        name, original = rng.choice(samples)
        data = bytearray(original)
        for _ in range(rng.randint(1, 12)):
            at = rng.randrange(len(data) or 1)
            if rng.random() < 0.6:
                data[at : at + 1] = bytes([rng.randrange(256)])
            else:
                del data[at : at + rng.randint(1, 64)]
        try:
            parse(bytes(data), None, name)
        except RetrievalError as error:
            assert 400 <= error.status_code < 500
            assert len(error.message) < 400 and "Traceback" not in error.message
            refused += 1
    assert refused > 50  # the damage is real: many files are refused
