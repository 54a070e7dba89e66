"""Real files of every supported format, made by the tests: no binary fixtures are checked in.

Each function returns the bytes of a file a user could have made with ordinary tools. Import them from
any test: `from tests.files import pdf_bytes`. `sample_files()` gives one small file of each format.
"""

from __future__ import annotations

import csv
import io
import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Heading:
    """A heading of `level` (1 = top), for `docx_bytes`."""

    text: str
    level: int = 1


@dataclass(frozen=True)
class Table:
    """A table given as rows of cell texts, for `docx_bytes`."""

    rows: Sequence[Sequence[str]]


def pdf_bytes(
    pages: Sequence[str],
    title: str | None = None,
    password: str | None = None,
    owner_password: str | None = None,
) -> bytes:
    """A PDF with one page per string (lines split on `\\n`, Latin-1 text in Helvetica).

    `title` goes in the document information. `password` encrypts it with AES-256 for that user
    password; `password=""` with an `owner_password` makes the common "restricted" PDF that opens
    without a prompt.
    """
    document = _plain_pdf(pages, title)
    if password is None:
        return document
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(document)))
    writer.encrypt(user_password=password, owner_password=owner_password or "owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def corrupt_pdf_bytes() -> bytes:
    """A PDF cut off halfway through, as an interrupted download leaves it."""
    document = pdf_bytes(["The first page of a report.", "The second page."], title="Report")
    return document[: len(document) // 2]


def _plain_pdf(pages: Sequence[str], title: str | None) -> bytes:
    """A minimal, valid PDF 1.4: catalog, page tree, a standard font, one content stream per page."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _PDF_FONT]
    kids: list[int] = []
    for text in pages:
        shown = b" T* ".join(b"(" + _pdf_string(line) + b") Tj" for line in text.split("\n"))
        stream = b"BT /F1 12 Tf 14 TL 72 720 Td " + shown + b" ET"
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects)
        )
        kids.append(len(objects))
    return _paged_pdf(objects, kids, title)


def _paged_pdf(objects: list[bytes], kids: Sequence[int], title: str | None) -> bytes:
    """A PDF of `objects` whose second (left empty) becomes the page tree of `kids`; `title` in its info."""
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % kid for kid in kids),
        len(kids),
    )
    info = b""
    if title is not None:
        objects.append(b"<< /Title (" + _pdf_string(title) + b") /Producer (tests.files) >>")
        info = b" /Info %d 0 R" % len(objects)
    return _pdf_file(objects, info)


def _pdf_file(objects: Sequence[bytes], info: bytes) -> bytes:
    """A PDF of `objects` (numbered from 1; the first is the catalog), its xref table and trailer."""
    body = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, content in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n%s\nendobj\n" % (number, content)
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    body += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    body += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        info,
        xref,
    )
    return bytes(body)


_PDF_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return escaped.encode("cp1252")


def docx_bytes(items: Sequence[str | Heading | Table], title: str | None = None) -> bytes:
    """A Word document made with python-docx: paragraphs (str), headings and tables, in order.

    `title` goes in the core properties (File > Properties > Title).
    """
    import docx

    document = docx.Document()
    for item in items:
        if isinstance(item, Heading):
            document.add_heading(item.text, level=item.level)
        elif isinstance(item, Table):
            columns = max(len(row) for row in item.rows)
            table = document.add_table(rows=len(item.rows), cols=columns)
            for r, row in enumerate(item.rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
        else:
            document.add_paragraph(item)
    document.core_properties.title = title or ""
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def html_bytes(body: str, title: str | None = None, encoding: str = "utf-8") -> bytes:
    """An HTML5 page: `<title>`, a `<meta charset>` naming `encoding`, and `body` as the body's markup."""
    head = f'<meta charset="{encoding}">' + (f"<title>{title}</title>" if title is not None else "")
    page = f"<!DOCTYPE html>\n<html lang='en'><head>{head}</head>\n<body>\n{body}\n</body></html>\n"
    return page.encode(encoding)


def markdown_bytes(text: str) -> bytes:
    """A Markdown file (UTF-8)."""
    return text.encode("utf-8")


def text_bytes(text: str, encoding: str = "utf-8", bom: bool = False) -> bytes:
    """A plain text file in `encoding`; `bom` puts the byte order mark first (`utf-16` always has one)."""
    marks = {"utf-8": b"\xef\xbb\xbf", "utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}
    return (marks.get(encoding, b"") if bom else b"") + text.encode(encoding)


def csv_bytes(rows: Sequence[Mapping[str, Any]], delimiter: str = ",", bom: bool = False) -> bytes:
    """A CSV export: a header of every key seen (first-seen order), one line per row, UTF-8.

    `bom` adds the byte order mark Excel writes with "CSV UTF-8".
    """
    columns = list(dict.fromkeys(key for row in rows for key in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, delimiter=delimiter, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return (b"\xef\xbb\xbf" if bom else b"") + out.getvalue().encode("utf-8")


def rows_csv(rows: int) -> bytes:
    """A CSV export of `rows` records (id, a short text, a number: about 25 bytes a row), built fast."""
    lines = ["id,text,n", *(f"r{i},row {i} of the export,{i % 97}" for i in range(rows))]
    return ("\n".join(lines) + "\n").encode()


def jsonl_bytes(records: Sequence[Mapping[str, Any]]) -> bytes:
    """JSON Lines: one JSON object per line, UTF-8 (as a BEIR corpus.jsonl)."""
    return b"".join(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n" for record in records)


def png_bytes(width: int = 2, height: int = 2) -> bytes:
    """A real (grey) PNG image: a format no parser reads."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (
            struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + b"\x80" * width for _ in range(height)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def zip_bytes(files: Mapping[str, str]) -> bytes:
    """A zip archive of text files (not a Word document unless it holds word/document.xml)."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return out.getvalue()


def shared_stream_pdf(pages: int, stream_bytes: int, form_draws: int = 0) -> bytes:
    """A few KB of PDF that costs much to read: `pages` pages sharing one compressed content stream of about
    `stream_bytes` bytes of text operators; with `form_draws`, one page drawing that stream as a form
    XObject that many times instead."""
    unit = b"BT /F1 1 Tf 0 0 Td (a) Tj ET\n"
    stream = zlib.compress(unit * (stream_bytes // len(unit)), 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        _PDF_FONT,
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    resources = b"/Font << /F1 3 0 R >>"
    contents = b"4 0 R"
    if form_draws:
        objects[3] = (
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream)
        )
        draws = b"/Fm1 Do\n" * form_draws
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(draws), draws))
        resources += b" /XObject << /Fm1 4 0 R >>"
        contents = b"5 0 R"
    kids = []
    for _ in range(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << %s >> /Contents %s >>"
            % (resources, contents)
        )
        kids.append(len(objects))
    return _paged_pdf(objects, kids, None)


# A JPEG's first bytes (start of image, then a JFIF segment): what a scanner's DCTDecode stream begins with.
JPEG_SIGNATURE = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"


def scanned_pdf(pages: Sequence[str | None], image: str = "gray", title: str | None = None) -> bytes:
    """A PDF as a scanner makes it: each None is a page that draws one 8x8 image and shows no text (no
    text layer); each string a page of text, as in `pdf_bytes`. `image`: `gray` (8-bit DeviceGray,
    FlateDecode), `bilevel` (1-bit DeviceGray, as fax-like scans), `jpeg` (DCTDecode), `cmyk` (8-bit
    DeviceCMYK), or `inline` (an inline image in the content stream instead of an XObject)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _PDF_FONT]
    kids: list[int] = []
    for text in pages:
        resources = b"/Font << /F1 3 0 R >>"
        if text is not None:
            stream = b"BT /F1 12 Tf 72 720 Td (" + _pdf_string(text) + b") Tj ET"
        elif image == "inline":
            stream = b"q 612 0 0 792 0 0 cm BI /W 8 /H 8 /CS /G /BPC 8 ID " + bytes(range(64)) + b" EI Q"
        else:
            objects.append(_image_xobject(image))
            resources += b" /XObject << /Im1 %d 0 R >>" % len(objects)
            stream = b"q 612 0 0 792 0 0 cm /Im1 Do Q"
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << %s >> /Contents %d 0 R >>"
            % (resources, len(objects))
        )
        kids.append(len(objects))
    return _paged_pdf(objects, kids, title)


def _image_xobject(kind: str) -> bytes:
    space, bits, filters, data = {
        "gray": (b"/DeviceGray", 8, b"/FlateDecode", zlib.compress(bytes(range(0, 256, 4)))),
        "bilevel": (b"/DeviceGray", 1, b"/FlateDecode", zlib.compress(b"\x0f" * 8)),
        "jpeg": (b"/DeviceGray", 8, b"/DCTDecode", JPEG_SIGNATURE + bytes(64)),
        "cmyk": (b"/DeviceCMYK", 8, b"/FlateDecode", zlib.compress(bytes(256))),
    }[kind]
    return b"<< /Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace %s /BitsPerComponent %d " % (
        space,
        bits,
    ) + b"/Filter %s /Length %d >>\nstream\n%s\nendstream" % (filters, len(data), data)


def blank_pdf(pages: int) -> bytes:
    """A PDF of `pages` pages that draw a line each and hold neither text nor images: empty, not scanned."""
    stream = b"0 0 m 612 792 l S"
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    kids = []
    for _ in range(pages):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R >>")
        kids.append(len(objects))
    return _paged_pdf(objects, kids, None)


def paragraph_bomb_docx(paragraphs: int, padding_bytes: int = 0) -> bytes:
    """A Word document of one paragraph of text and `paragraphs` empty ones (a few bytes each, zipped), and
    `padding_bytes` of spaces at the end of its XML: small to send, large to unpack."""
    import zipfile

    out = io.BytesIO()
    source = zipfile.ZipFile(io.BytesIO(docx_bytes(["Intro."])))
    with source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            body = source.read(info)
            if info.filename == "word/document.xml":
                body = body.replace(b"<w:body>", b"<w:body>" + b"<w:p/>" * paragraphs, 1)
                body += b" " * padding_bytes
            archive.writestr(info.filename, body)
    return out.getvalue()


def sample_files() -> dict[str, tuple[str, bytes]]:
    """One small file of each supported format: content type → (file name, bytes)."""
    return {
        "application/pdf": (
            "guide.pdf",
            pdf_bytes(["Install on Linux with apt.", "Configure it."], title="Guide"),
        ),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document": (
            "guide.docx",
            docx_bytes([Heading("Install"), "Install on Linux with apt."], title="Guide"),
        ),
        "text/html": (
            "guide.html",
            html_bytes("<main><h1>Install</h1><p>Install on Linux with apt.</p></main>", "Guide"),
        ),
        "text/markdown": (
            "guide.md",
            markdown_bytes("# Guide\n\n## Install\n\nInstall on Linux with apt.\n"),
        ),
        "text/plain": ("guide.txt", text_bytes("Install on Linux with apt.\n")),
        "text/csv": (
            "faq.csv",
            csv_bytes([{"id": "q1", "title": "Install", "text": "Use apt.", "year": "2024"}]),
        ),
        "application/x-ndjson": (
            "corpus.jsonl",
            jsonl_bytes([{"_id": "d1", "title": "Install", "text": "Use apt.", "metadata": {"year": 2024}}]),
        ),
    }
