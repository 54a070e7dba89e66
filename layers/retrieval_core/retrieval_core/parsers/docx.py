"""DOCX (Word): paragraphs and tables in document order, one block per heading section. Pure: no I/O.

Read by python-docx. Word's built-in "Heading 1".."Heading 9" styles give the `section` path; page
headers, footers, footnotes and comments are not read.
"""

from __future__ import annotations

import io
import zipfile
from typing import TYPE_CHECKING

from retrieval_core.parsers.base import ParsedDocument, ParsedFile, error_summary
from retrieval_core.parsers.detect import DOCX
from retrieval_core.parsers.exceptions import DocumentParseError
from retrieval_core.parsers.sections import SectionBlocks

if TYPE_CHECKING:
    from docx.table import Table

# A DOCX is a zip: a few KB can unpack to gigabytes. Refused before python-docx unpacks it.
MAX_UNZIPPED_BYTES = 256 * 1024 * 1024


def read_docx(data: bytes, charset: str | None) -> ParsedFile:
    """Blocks per heading section; title from the core properties, else the Title style or first heading."""
    import docx
    from docx.table import Table

    _check_unzipped_size(data)
    sections = SectionBlocks()
    titles: dict[str, str] = {}
    try:
        document = docx.Document(io.BytesIO(data))
        # Paragraph.style looks the style up anew each time (milliseconds a paragraph): names once.
        style_names = {style.style_id: style.name or "" for style in document.styles}
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                sections.text(_table_text(item))
                continue
            style_id = item._p.style
            style = style_names.get(style_id, "") if style_id else ""
            level = _heading_level(style)
            if style == "Title":
                titles.setdefault("style", " ".join(item.text.split()))
            elif level:
                titles.setdefault("heading", " ".join(item.text.split()))
                sections.heading(level, item.text)
            else:
                sections.text(item.text)
        titles["core"] = " ".join((document.core_properties.title or "").split())
    # python-docx meets a damaged package with exceptions of zipfile, lxml, its own and KeyError; each
    # means the same to the caller: this file cannot be read.
    except Exception as error:  # noqa: BLE001
        raise DocumentParseError(DOCX, f"damaged ({error_summary(error)})") from None
    title = titles["core"] or titles.get("style") or titles.get("heading") or ""
    return ParsedFile(DOCX, [ParsedDocument(sections.finish(), title=title, metadata={"contentType": DOCX})])


def _heading_level(style: str) -> int:
    """1..9 for Word's "Heading N" styles, else 0."""
    prefix, _, number = style.partition(" ")
    return int(number) if prefix == "Heading" and number.isdigit() and 1 <= int(number) <= 9 else 0


def _table_text(table: Table) -> str:
    """One line per row, cells separated by ` | `; a merged cell is written once."""
    lines = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _check_unzipped_size(data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unzipped = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise DocumentParseError(DOCX, f"damaged or truncated ({error_summary(error)})") from None
    if unzipped > MAX_UNZIPPED_BYTES:
        limit = MAX_UNZIPPED_BYTES // (1024 * 1024)
        raise DocumentParseError(DOCX, f"unzips to more than {limit} MiB")
