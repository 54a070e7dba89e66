"""Read documents of every supported format into blocks of text. Pure: no database, no AWS client.

One face: `parse(data, content_type, name) -> ParsedFile`. The format is decided from the declared
content type, the file name's suffix (case-insensitively) and the bytes themselves
(`detect_content_type`). Each format has its own module, and every module's output goes through one
normalisation (`normalize.normalize_document`: NFKC, de-hyphenation, whitespace). The libraries the
modules use (pypdf, python-docx, lxml, markdown-it-py) are imported on first use, and so is each format's
module: a handler that serves no document PUT (a GET of a store, a DELETE) never loads a reader.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from retrieval_core.parsers.base import Block, ParsedDocument, ParsedFile
from retrieval_core.parsers.budget import DEFAULT_BUDGET, ParseBudget, ParseMeter
from retrieval_core.parsers.detect import (
    CSV,
    DOCX,
    HTML,
    JSONL,
    MARKDOWN,
    PDF,
    SUPPORTED_CONTENT_TYPES,
    TEXT,
    charset,
    detect_content_type,
)
from retrieval_core.parsers.exceptions import EmptyDocumentError

if TYPE_CHECKING:
    from retrieval_core.parsers.scanned_pages import OcrEngine
    from retrieval_core.parsers.tables import TableOptions

__all__ = [
    "CSV",
    "DEFAULT_BUDGET",
    "DOCX",
    "HTML",
    "JSONL",
    "MARKDOWN",
    "PARSER_VERSION",
    "PDF",
    "SUPPORTED_CONTENT_TYPES",
    "TEXT",
    "Block",
    "ParseBudget",
    "ParseMeter",
    "ParsedDocument",
    "ParsedFile",
    "detect_content_type",
    "parse",
]

# Bumped whenever parse() gives other text or metadata for the same bytes, so that stored sources
# read by an older version can be told apart and read again ("made under other settings").
PARSER_VERSION = "2"

Reader = Callable[..., ParsedFile]

# Each format's reader, as (module, function, the parse() option it takes after the meter, if any):
# imported when a file of that format is first read.
_READERS: dict[str, tuple[str, str, str | None]] = {
    PDF: ("retrieval_core.parsers.pdf", "read_pdf", "ocr"),
    HTML: ("retrieval_core.parsers.html_page", "read_html", None),
    DOCX: ("retrieval_core.parsers.docx", "read_docx", None),
    CSV: ("retrieval_core.parsers.records", "read_csv", "table"),
    JSONL: ("retrieval_core.parsers.records", "read_jsonl", "table"),
    MARKDOWN: ("retrieval_core.parsers.markdown", "read_markdown", None),
    TEXT: ("retrieval_core.parsers.text", "read_text", None),
}


def reader(content_type: str) -> Reader:
    """The function that reads files of `content_type` (one of SUPPORTED_CONTENT_TYPES): called with the
    bytes, the charset, the meter, then the option `_READERS` names for it, when one is given."""
    module, function, _ = _READERS[content_type]
    found: Reader = getattr(import_module(module), function)
    return found


def parse(
    data: bytes,
    content_type: str | None = None,
    name: str | None = None,
    meter: ParseMeter | None = None,
    ocr: OcrEngine | None = None,
    table: TableOptions | None = None,
) -> ParsedFile:
    """The documents in `data`, a PDF's scanned pages read by `ocr` (None: not read); `table`: which columns
    of a CSV or JSON Lines file make each record's id, title, text and metadata (None: the defaults of
    parsers/tables.py). Raises UnsupportedContentTypeError (415), DocumentParseError (422) for a corrupt or
    encrypted file, NoTextLayerError (422) for a PDF of scanned pages with no text found on them,
    EmptyDocumentError (422) when there is no text, UnknownColumnError (422) for a named column the table
    lacks, and DocumentLimitError (422) for a file over `meter`'s budget (by default DEFAULT_BUDGET); OCR
    errors as `OcrEngine.read_page` says."""
    chosen = detect_content_type(data, content_type, name)
    if not data.strip():
        raise EmptyDocumentError(chosen)
    meter = meter or ParseMeter(DEFAULT_BUDGET)
    meter.content_type = chosen
    taken = _READERS[chosen][2]
    option = {"ocr": ocr, "table": table}[taken] if taken else None
    extra = () if option is None else (option,)  # None: the reader's own default
    parsed = reader(chosen)(data, charset(content_type), meter, *extra)
    from retrieval_core.parsers.normalize import normalize_document

    # One normalisation for every format (parsers/normalize.py); it also drops NUL, which PostgreSQL
    # text cannot hold (some PDFs and UTF-16 files carry them).
    documents = []
    for document in parsed.documents:
        normalized = normalize_document(document, meter.tick)
        if normalized.blocks:
            documents.append(normalized)
    if not documents:
        raise EmptyDocumentError(chosen)
    return ParsedFile(chosen, documents, parsed.skipped_records)
