"""The one normalisation of every format's text (parsers/normalize.py) and a PDF's page furniture
(parsers/page_furniture.py): what a keyword search and a reader of chunks see."""

from __future__ import annotations

import io
import time

import pytest

from retrieval_core.parsers import parse
from retrieval_core.parsers.normalize import normalize_line, normalize_text
from retrieval_core.parsers.page_furniture import without_page_furniture
from tests.files import (
    Heading,
    book_pdf,
    csv_bytes,
    docx_bytes,
    html_bytes,
    jsonl_bytes,
    markdown_bytes,
    pdf_bytes,
    text_bytes,
)

# Characters

LIGATURES = "The user pro\ufb01le sets the work\ufb02ow."


def test_nfkc_spells_ligatures_and_full_width_forms_with_plain_letters() -> None:
    assert normalize_text(LIGATURES) == "The user profile sets the workflow."
    assert normalize_text("\uff50\uff52\uff4f\uff46\uff49\uff4c\uff45 \uff11\uff12") == "profile 12"
    # Compatibility forms lose what sets them apart: a superscript is a digit, an ellipsis three dots.
    assert normalize_text("x\u00b2 and 10\u2076\u2026") == "x2 and 106..."


@pytest.mark.parametrize(
    ("file_name", "data"),
    [
        ("a.txt", text_bytes(LIGATURES)),
        ("a.md", markdown_bytes(f"# Guide\n\n{LIGATURES}\n")),
        ("a.html", html_bytes(f"<main><h1>Guide</h1><p>{LIGATURES}</p></main>")),
        ("a.docx", docx_bytes([Heading("Guide"), LIGATURES])),
        ("a.csv", csv_bytes([{"id": "1", "text": LIGATURES}])),
        ("a.jsonl", jsonl_bytes([{"_id": "1", "text": LIGATURES}])),
    ],
    # Named by the file: a DOCX's bytes hold the time it was made, and xdist's workers must collect one id.
    ids=["txt", "md", "html", "docx", "csv", "jsonl"],
)
def test_every_format_is_normalised(file_name: str, data: bytes) -> None:
    [document] = parse(data, None, file_name).documents
    assert "The user profile sets the workflow." in document.text
    assert "\ufb01" not in document.text


def test_titles_and_section_paths_are_normalised_to_one_line() -> None:
    data = markdown_bytes("# Pro\ufb01le\u00a0 set\u200bup\n\n## \uff21PI\n\nText.\n")
    [document] = parse(data, None, "guide.md").documents
    assert document.title == "Profile setup"
    assert [block.metadata["section"] for block in document.blocks] == ["Profile setup > API"]
    assert normalize_line("  A\tB\u2028C\x00 ") == "A B C"


def test_whitespace_collapses_inside_lines_and_keeps_paragraphs_and_indentation() -> None:
    text = "one\u00a0 \t two  \nthree\u200b \n \n\n\n\n    indented  code\r\nlast\x00\x0cpage"
    assert normalize_text(text) == "one two\nthree\n\n    indented code\nlast\n\npage"


# De-hyphenation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Lowercase halves, no compound word: one word broken by a hyphenator.
        ("The environ-\nment is set.", "The environment is set."),
        ("The environ- \n  ment is set.", "The environment is set."),
        # A known compound word on either side, or a half shorter than hyphenators leave.
        ("A well-\nknown name.", "A well-known name."),
        ("A user-\ndefined type.", "A user-defined type."),
        ("Send an e-\nmail.", "Send an e-mail."),
        ("A built-\nin type.", "A built-in type."),
        # The last part of a hyphenated compound.
        ("A state-of-the-\nart model.", "A state-of-the-art model."),
        # A soft hyphen is a break by definition.
        ("soft\u00ad\nware", "software"),
        # Not a lowercase letter after the break: left as it is.
        ("Anglo-\nSaxon", "Anglo-\nSaxon"),
        ("COVID-\n19", "COVID-\n19"),
        ("a list -\nitem", "a list -\nitem"),
        # The document's own words decide first.
        ("The data-\nbase, and the database.", "The database, and the database."),
        ("A non-\nstandard and nonstandard.", "A nonstandard and nonstandard."),
        ("To co-\noperate, co-operate.", "To co-operate, co-operate."),
    ],
)
def test_a_word_broken_at_a_line_end_is_joined_by_the_rule(text: str, expected: str) -> None:
    assert normalize_text(text) == expected


def test_de_hyphenation_reads_the_words_of_the_whole_document() -> None:
    data = markdown_bytes("# One\n\nThe co-\noperate case.\n\n# Two\n\nThey cooperate.\n")
    [document] = parse(data, None, "a.md").documents
    assert "The cooperate case." in document.blocks[0].text


def test_a_word_broken_at_the_end_of_a_page_is_joined_on_that_page() -> None:
    data = pdf_bytes(["Set up the environ-", "ment first. Then a well-", "known step. Then-", "Ready."])
    [document] = parse(data, "application/pdf").documents
    assert [block.text for block in document.blocks] == [
        "Set up the environment",
        "first. Then a well-known",
        "step. Then-",
        "Ready.",
    ]


@pytest.mark.parametrize(
    "text",
    ["a" * 200_000, "a-" * 100_000, " \t" * 100_000 + "x", "word-" + " " * 200_000, "a\u00ad" * 100_000],
    ids=["one long word", "a hyphen chain", "a run of spaces", "spaces after a hyphen", "soft hyphens"],
)
def test_normalising_takes_time_in_proportion_to_the_text(text: str) -> None:
    # Linear: about 0.05 s each on a loaded machine; a pattern that backtracks takes minutes.
    started = time.monotonic()
    normalize_text(text)
    normalize_line(text)
    without_page_furniture([text] * 3)
    assert time.monotonic() - started < 5


# Page furniture


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def test_running_headers_footers_and_page_numbers_go() -> None:
    texts = [
        f"ACME Handbook\nAbout {word}.\nmore on {word}\nPage {n} of 6\n{n}"
        for n, word in enumerate(WORDS[:6], 1)
    ]
    assert without_page_furniture(texts) == [f"About {word}.\nmore on {word}" for word in WORDS[:6]]


def test_a_running_header_whose_chapter_changes_goes_by_its_label() -> None:
    headers = ["Chapter 1: Vectors", "Chapter 1: Vectors", "Chapter 2: Arrays", "Chapter 3: Lists"]
    pairs = zip(headers, WORDS[:4], strict=True)
    texts = [f"{header} {n}\nOn {word}." for n, (header, word) in enumerate(pairs, 1)]
    texts.append("Chapter 4\nLoops\nOn loops.")
    kept = without_page_furniture(texts)
    assert kept[:4] == [f"On {word}." for word in WORDS[:4]]
    # A chapter's own heading is only the label: it stays.
    assert kept[4] == "Chapter 4\nLoops\nOn loops."


def test_only_lines_at_the_edges_go_and_never_past_a_kept_line() -> None:
    texts = [f"Header\nFirst {word}.\nHeader\nLast {word}.\nFooter" for word in WORDS[:4]]
    assert without_page_furniture(texts) == [f"First {word}.\nHeader\nLast {word}." for word in WORDS[:4]]


def test_long_lines_are_body_text_even_when_they_repeat() -> None:
    """A page of one long line, and paragraphs opening alike ("Revision 3. ..."), are kept whole."""
    body = "The travel handbook says receipts are uploaded within thirty days of the trip. " * 3
    texts = [f"Revision 3. Page {n} of the handbook. {body}" for n in range(1, 6)]
    assert without_page_furniture(texts) == texts
    with_header = [f"Handbook {n}\n{text}" for n, text in enumerate(texts, 1)]
    assert without_page_furniture(with_header) == texts


def test_a_line_on_too_few_pages_stays() -> None:
    two = ["Report\nPage one.", "Report\nPage two."]
    assert without_page_furniture(two) == two
    # Three pages of ten is the least share that counts: two of ten stay.
    texts = [("Note\n" if n < 2 else "") + f"On {word}." for n, word in enumerate(WORDS)]
    assert without_page_furniture(texts) == texts
    texts = [("Note\n" if n < 3 else "") + f"On {word}." for n, word in enumerate(WORDS)]
    assert without_page_furniture(texts) == [f"On {word}." for word in WORDS]


BOOK = [
    (
        "Introduction",
        [
            "R is an integrated suite of software facilities.",
            "The term environ-\nment is meant as a planned and\ncoherent system.",
            "Each user has a profile file.",
            "Figures flow into the text.",
            "Lists hold objects.",
            "Frames hold lists.",
        ],
    ),
    (
        "Simple manipulations",
        [
            "R operates on named data structures.",
            "Vectors are used in arithmetic.",
            "Arrays have dimensions.",
            "Factors are categories.",
            "Final words.",
            "The end.",
        ],
    ),
]


def test_a_typeset_book_reads_without_ligatures_hyphen_breaks_or_running_heads() -> None:
    from pypdf import PdfReader

    data = book_pdf(BOOK, title="An Introduction to R")
    raw = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)
    # The file is what TeX makes: ligature glyphs, broken words, running heads on every page.
    assert "pro\ufb01le" in raw and "environ-\nment" in raw
    assert "Chapter 1: Introduction 3" in raw and "Page 12 of 12" in raw
    [document] = parse(data, "application/pdf").documents
    assert "\ufb01" not in document.text and "\ufb02" not in document.text
    assert "a profile file" in document.text and "The term environment is" in document.text
    for running in ("Chapter 1:", "Chapter 2:", "Page ", "An Introduction to R"):
        assert running not in document.text
    assert [block.text.split("\n")[0] for block in document.blocks][:2] == [
        "1 Introduction",
        "The term environment is meant as a planned and",
    ]
