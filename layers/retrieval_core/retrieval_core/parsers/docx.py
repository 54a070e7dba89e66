"""DOCX (Word): paragraphs and tables in document order, one block per heading section. Pure: no I/O.

Read by python-docx. Word's built-in "Heading 1".."Heading 9" styles give the `section` path; page
headers, footers, footnotes and comments are not read.

The budget (parsers/budget.py) is checked before python-docx builds its tree, which costs hundreds of
bytes an element: the parts' unzipped size, then their XML elements, counted by streaming through each
part (a few KB of zip can hold millions of empty paragraphs). Nesting needs no count of ours: the XML
parser python-docx uses refuses more than 256 levels (422 `unreadable_document`).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from typing import IO, TYPE_CHECKING

from retrieval_core.parsers.base import ParsedDocument, ParsedFile, error_summary
from retrieval_core.parsers.budget import ParseMeter
from retrieval_core.parsers.detect import DOCX
from retrieval_core.parsers.exceptions import DocumentLimitError, DocumentParseError, WriteCancelledError
from retrieval_core.parsers.sections import SectionBlocks

if TYPE_CHECKING:
    from docx.table import Table

_READ_BYTES = 1024 * 1024


def read_docx(data: bytes, charset: str | None, meter: ParseMeter) -> ParsedFile:
    """Blocks per heading section; title from the core properties, else the Title style or first heading."""
    import docx
    from docx.table import Table

    _check_size(data, meter)
    sections = SectionBlocks()
    titles: dict[str, str] = {}
    try:
        document = docx.Document(io.BytesIO(data))
        # Paragraph.style looks the style up anew each time (milliseconds a paragraph): names once.
        style_names = {style.style_id: style.name or "" for style in document.styles}
        for item in document.iter_inner_content():
            meter.tick()
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
    except (DocumentLimitError, WriteCancelledError):
        raise
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


def _check_size(data: bytes, meter: ParseMeter) -> None:
    """The parts' unzipped bytes, then the XML elements of every XML part, within the budget."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
            meter.within("max_unzipped_bytes", sum(p.file_size for p in parts), "unzipped bytes")
            for part in parts:
                if part.filename.endswith((".xml", ".rels")):
                    with archive.open(part) as stream:
                        _count_elements(stream, meter)
    except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError) as error:
        raise DocumentParseError(DOCX, f"damaged or truncated ({error_summary(error)})") from None


def _count_elements(stream: IO[bytes], meter: ParseMeter) -> None:
    """Count a part's elements by their start tags, streaming: `<` not followed by `/`, `?` or `!`.

    Well-formed XML has no other `<` outside comments and CDATA (which are counted too: the count can
    only be high). No Python object per element: building one per element, even to drop it, costs
    the garbage collector of a large process seconds for a few hundred thousand.
    """
    previous = b""
    while block := stream.read(_READ_BYTES):
        meter.check()
        # A tag's `<` may end one block and its `/`, `?` or `!` begin the next.
        text = previous[-1:] + block
        starts = text.count(b"<") - text.count(b"</") - text.count(b"<?") - text.count(b"<!")
        meter.add("max_elements", starts - (previous[-1:] == b"<"), "XML elements")
        previous = block
