"""Every parser keeps to its document's budget: hostile files are refused, naming the limit and its setting,
within a bounded time and memory; and parsing work grows linearly with the input."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from retrieval_core.container import parse_budget
from retrieval_core.documents.models import SourceInput
from retrieval_core.documents.prepare import prepare_source
from retrieval_core.parsers import DEFAULT_BUDGET, ParseBudget, ParseMeter, parse
from retrieval_core.parsers.exceptions import DocumentLimitError, WriteCancelledError
from retrieval_core.settings import Settings
from tests.files import (
    csv_bytes,
    html_bytes,
    jsonl_bytes,
    paragraph_bomb_docx,
    pdf_bytes,
    shared_stream_pdf,
    text_bytes,
)

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def refused(data: bytes, name: str, budget: ParseBudget = DEFAULT_BUDGET) -> DocumentLimitError:
    with pytest.raises(DocumentLimitError) as caught:
        parse(data, None, name, ParseMeter(budget))
    return caught.value


def test_the_default_budget_is_the_settings_defaults() -> None:
    assert parse_budget(Settings(_env_file=None)) == DEFAULT_BUDGET


def test_pages_sharing_one_huge_content_stream_count_it_each_time() -> None:
    # Ten pages drawing one 200 KB stream: 2 MB to read, from a file of about 2.5 KB.
    data = shared_stream_pdf(pages=10, stream_bytes=200_000)
    assert len(data) < 3_000
    error = refused(data, "shared.pdf", ParseBudget(max_content_bytes=MIB))
    assert error.code == "document_limit_exceeded" and error.status_code == 422
    assert error.details["limit"] == "DOCUMENT_MAX_CONTENT_BYTES"
    # The sixth page's use of the stream goes over: 6 x 199,984 bytes.
    assert "content-stream bytes 1,199,904, over the 1,048,576 DOCUMENT_MAX_CONTENT_BYTES" in error.message


def test_the_attack_pdf_is_refused_before_its_first_page_is_read() -> None:
    # 6.9 KB: ten pages sharing one 2 MB stream, which once took 36 s of CPU to answer.
    data = shared_stream_pdf(pages=10, stream_bytes=2_000_000)
    started = time.monotonic()
    error = refused(data, "attack.pdf", ParseBudget(max_content_bytes=MIB))
    assert time.monotonic() - started < 1.0
    assert error.details["value"] == "1,999,985"


def test_a_form_drawn_many_times_counts_each_time_it_is_drawn() -> None:
    data = shared_stream_pdf(pages=1, stream_bytes=100_000, form_draws=50)
    error = refused(data, "forms.pdf", ParseBudget(max_content_bytes=MIB))
    assert error.details["limit"] == "DOCUMENT_MAX_CONTENT_BYTES"


def test_pdf_pages_and_operators_have_their_limits() -> None:
    assert refused(pdf_bytes(["a", "b", "c"]), "p.pdf", ParseBudget(max_pages=2)).details == {
        "contentType": "application/pdf",
        "limit": "DOCUMENT_MAX_PAGES",
        "maxValue": "2",
        "value": "3",
    }
    data = shared_stream_pdf(pages=1, stream_bytes=100_000)
    assert refused(data, "o.pdf", ParseBudget(max_operators=5_000)).details["limit"] == (
        "DOCUMENT_MAX_OPERATORS"
    )


def test_reading_stops_at_the_deadline_between_pages() -> None:
    data = shared_stream_pdf(pages=40, stream_bytes=50_000)
    started = time.monotonic()
    error = refused(data, "slow.pdf", ParseBudget(parse_timeout_s=0.3))
    assert time.monotonic() - started < 1.5
    assert error.details["limit"] == "PARSE_TIMEOUT_S"
    assert "reading it took" in error.message and "over the 0.3 s PARSE_TIMEOUT_S" in error.message


def test_reading_stops_at_the_deadline_inside_one_page() -> None:
    # One page of a 2 MB stream: pypdf tokenizes it whole (seconds) before the first operator is seen, so
    # only the checkpoint in its tokenizer stops it in time. A pypdf that drops that hook fails here.
    data = shared_stream_pdf(pages=1, stream_bytes=2_000_000)
    started = time.monotonic()
    error = refused(data, "one-page.pdf", ParseBudget(max_content_bytes=4 * MIB, parse_timeout_s=0.3))
    assert time.monotonic() - started < 1.0
    assert error.details["limit"] == "PARSE_TIMEOUT_S"


def test_markdown_is_read_within_the_deadline_inside_its_parser() -> None:
    # 800,000 `[`: markdown-it's one call took 6 s; its block and inline loops are checkpoints now.
    started = time.monotonic()
    error = refused(b"[" * 800_000, "brackets.md", ParseBudget(parse_timeout_s=0.3))
    assert time.monotonic() - started < 1.0
    assert error.details["limit"] == "PARSE_TIMEOUT_S"


def test_a_docx_of_millions_of_empty_paragraphs_is_refused_fast() -> None:
    data = paragraph_bomb_docx(3_000_000)
    assert len(data) < 100_000  # 18 MB of XML, zipped
    started = time.monotonic()
    error = refused(data, "bomb.docx")
    assert time.monotonic() - started < 1.0
    assert error.details["limit"] == "DOCUMENT_MAX_ELEMENTS"
    assert re.search(r"XML elements [\d,]+, over the 500,000 DOCUMENT_MAX_ELEMENTS", error.message)


def test_a_docx_refused_for_its_elements_never_builds_its_tree(tmp_path: Path) -> None:
    # In a process of its own: the peak resident memory of the whole refusal, imports included (VmHWM: the
    # high-water mark of this program alone; ru_maxrss would carry over the forking pytest's).
    bomb = tmp_path / "bomb.docx"
    bomb.write_bytes(paragraph_bomb_docx(3_000_000))
    script = (
        "import sys\n"
        "from retrieval_core.parsers import parse\n"
        "from retrieval_core.parsers.exceptions import DocumentLimitError\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "try:\n"
        "    parse(data, None, 'bomb.docx')\n"
        "except DocumentLimitError:\n"
        "    status = open('/proc/self/status').read()\n"
        "    print(int(status.split('VmHWM:')[1].split()[0]) // 1024)\n"
    )
    path = f"{REPO / 'layers' / 'retrieval_core'}:{REPO}"
    result = subprocess.run(
        [sys.executable, "-c", script, str(bomb)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": path},
        check=True,
    )
    # Building the tree of 3 million paragraphs takes gigabytes; the refusal, what the imports take.
    assert int(result.stdout) < 100, result.stdout


def test_a_docx_that_unzips_past_its_limit_is_refused() -> None:
    data = paragraph_bomb_docx(1, padding_bytes=2 * MIB)
    error = refused(data, "big.docx", ParseBudget(max_unzipped_bytes=MIB))
    assert error.details["limit"] == "DOCUMENT_MAX_UNZIPPED_BYTES"


def test_html_with_twenty_thousand_empty_main_elements_reads_in_linear_time() -> None:
    body = "<main></main>" * 20_000 + "<main><p>The text.</p></main>"
    started = time.monotonic()
    [document] = parse(html_bytes(body), None, "mains.html").documents
    assert time.monotonic() - started < 1.0  # was 7.6 s: a list-membership test per ancestor
    assert document.text == "The text."


def test_main_elements_deep_in_the_page_are_found_in_linear_time() -> None:
    # Each <main> under 500 levels: looking at every ancestor of each took 2.5 s; each is looked at once.
    body = "<div>" * 500 + "<main></main>" * 20_000 + "<main><p>Deep.</p></main>" + "</div>" * 500
    started = time.monotonic()
    [document] = parse(html_bytes(body), None, "deep-mains.html").documents
    assert time.monotonic() - started < 1.0
    assert document.text == "Deep."


def test_html_elements_and_nesting_have_their_limits() -> None:
    many = html_bytes("<p>x</p>" * 2_000)
    assert refused(many, "many.html", ParseBudget(max_elements=1_000)).details["limit"] == (
        "DOCUMENT_MAX_ELEMENTS"
    )
    deep = html_bytes("<div>" * 100 + "x" + "</div>" * 100)
    assert refused(deep, "deep.html", ParseBudget(max_depth=50)).details["limit"] == "DOCUMENT_MAX_DEPTH"


def test_a_csv_cell_of_4_mb_is_refused_at_once() -> None:
    data = csv_bytes([{"id": "1", "text": "word " * 800_000}])
    started = time.monotonic()
    error = refused(data, "big.csv")
    assert time.monotonic() - started < 1.0
    assert "line 2: characters in a cell 4,000,000, over the 1,000,000 DOCUMENT_MAX_FIELD_CHARS" in (
        error.message
    )


def test_csv_columns_and_jsonl_fields_have_their_limit() -> None:
    wide = ",".join(f"c{i}" for i in range(5_000)).encode() + b",text\n" + b"1," * 5_000 + b"t\n"
    assert refused(wide, "wide.csv").details == {
        "contentType": "text/csv",
        "limit": "DOCUMENT_MAX_COLUMNS",
        "maxValue": "1,000",
        "value": "5,001",
    }
    record = {"text": "t", **{f"k{i}": i for i in range(20)}}
    error = refused(jsonl_bytes([record]), "wide.jsonl", ParseBudget(max_columns=10))
    assert "line 1: fields 21" in error.message


def test_rows_are_read_within_the_deadline() -> None:
    data = csv_bytes([{"text": f"row {i}"} for i in range(50_000)])
    started = time.monotonic()
    parse(data, None, "rows.csv", ParseMeter(ParseBudget(parse_timeout_s=600)))
    whole = time.monotonic() - started
    started = time.monotonic()
    assert refused(data, "rows.csv", ParseBudget(parse_timeout_s=0.05)).details["limit"] == "PARSE_TIMEOUT_S"
    # Stopped at the deadline, not after reading every row: against the whole read on the same machine,
    # so that a busy one slows both alike.
    assert time.monotonic() - started < max(0.5 * whole, 0.2)


def test_chunks_per_document_have_their_limit() -> None:
    source = SourceInput("long.txt", text_bytes("word " * 30_000), "text/plain", "long.txt")
    with pytest.raises(DocumentLimitError) as caught:
        prepare_source(source, 1000, 0, "m", ParseBudget(max_chunks=100))
    assert caught.value.details["limit"] == "DOCUMENT_MAX_CHUNKS"
    assert "document 'long.txt': chunks 150, over the 100 DOCUMENT_MAX_CHUNKS" in caught.value.message


def test_a_cancelled_write_stops_at_its_next_checkpoint() -> None:
    cancelled = threading.Event()
    cancelled.set()
    data = shared_stream_pdf(pages=10, stream_bytes=200_000)
    started = time.monotonic()
    with pytest.raises(WriteCancelledError) as caught:
        prepare_source(SourceInput("s.pdf", data, None, "s.pdf"), 1000, 0, "m", cancelled=cancelled)
    assert time.monotonic() - started < 0.5
    assert (caught.value.status_code, caught.value.code) == (499, "client_closed_request")


def test_ordinary_files_are_read_as_before() -> None:
    [document] = parse(pdf_bytes(["One.", "Two."]), None, "a.pdf", ParseMeter(DEFAULT_BUDGET)).documents
    assert [b.metadata["pageNumber"] for b in document.blocks] == [1, 2]
    assert parse(paragraph_bomb_docx(1_000), None, "a.docx").documents[0].text == "Intro."
