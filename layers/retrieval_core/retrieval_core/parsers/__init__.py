"""Read documents of every supported format into blocks of text. Pure: no database, no AWS client.

One face: `parse(data, content_type, name) -> ParsedFile`. The format is decided from the declared
content type, the file name's suffix (case-insensitively) and the bytes themselves
(`detect_content_type`). Each format has its own module; the libraries they use (pypdf,
python-docx, lxml, markdown-it-py) are imported on first use, so importing this package is cheap.
"""

from __future__ import annotations

from collections.abc import Callable

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
from retrieval_core.parsers.docx import read_docx
from retrieval_core.parsers.exceptions import EmptyDocumentError
from retrieval_core.parsers.html_page import read_html
from retrieval_core.parsers.markdown import read_markdown
from retrieval_core.parsers.pdf import read_pdf
from retrieval_core.parsers.records import read_csv, read_jsonl
from retrieval_core.parsers.tables import DEFAULT_TABLE_OPTIONS, TableOptions
from retrieval_core.parsers.text import read_text

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
    "TableOptions",
    "detect_content_type",
    "parse",
]

# Bumped whenever parse() gives other text or metadata for the same bytes, so that stored sources
# read by an older version can be told apart and read again ("made under other settings").
PARSER_VERSION = "2"

_READERS: dict[str, Callable[[bytes, str | None, ParseMeter], ParsedFile]] = {
    PDF: read_pdf,
    HTML: read_html,
    DOCX: read_docx,
    MARKDOWN: read_markdown,
    TEXT: read_text,
}
# Row formats: one document per record, shaped by the caller's TableOptions.
_TABLE_READERS: dict[str, Callable[[bytes, str | None, ParseMeter, TableOptions], ParsedFile]] = {
    CSV: read_csv,
    JSONL: read_jsonl,
}


def parse(
    data: bytes,
    content_type: str | None = None,
    name: str | None = None,
    meter: ParseMeter | None = None,
    table: TableOptions = DEFAULT_TABLE_OPTIONS,
) -> ParsedFile:
    """The documents in `data`; `table`: which columns of a CSV or JSON Lines file make each record's
    id, title, text and metadata (other formats ignore it). Raises UnsupportedContentTypeError (415),
    DocumentParseError (422) for a corrupt or encrypted file, EmptyDocumentError (422) when there is no
    text, UnknownColumnError (422) for a named column the table lacks, and DocumentLimitError (422) for
    a file over `meter`'s budget (by default DEFAULT_BUDGET)."""
    chosen = detect_content_type(data, content_type, name)
    if not data.strip():
        raise EmptyDocumentError(chosen)
    meter = meter or ParseMeter(DEFAULT_BUDGET)
    meter.content_type = chosen
    if chosen in _TABLE_READERS:
        parsed = _TABLE_READERS[chosen](data, charset(content_type), meter, table)
    else:
        parsed = _READERS[chosen](data, charset(content_type), meter)
    # PostgreSQL text cannot hold NUL; some PDFs and UTF-16 files carry them.
    documents = [_without_nul(document) for document in parsed.documents]
    documents = [document for document in documents if document.blocks]
    if not documents:
        raise EmptyDocumentError(chosen)
    return ParsedFile(chosen, documents, parsed.skipped_records)


def _without_nul(document: ParsedDocument) -> ParsedDocument:
    blocks = [Block(b.text.replace("\x00", "").strip(), b.metadata) for b in document.blocks]
    return ParsedDocument(
        [b for b in blocks if b.text],
        document.title.replace("\x00", ""),
        document.metadata,
        document.record_id,
        document.record_number,
    )
