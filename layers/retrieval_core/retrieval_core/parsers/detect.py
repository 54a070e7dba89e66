"""Which format a file is in: the declared content type, the name's suffix and the bytes themselves.

What the bytes say, when they say something definite (a `%PDF-` header, a zip holding
`word/document.xml`, an HTML document's opening tag, binary data), wins over any claim. Otherwise a
specific declared type wins over the suffix, and the suffix over a generic declared type
(`application/octet-stream`, `text/plain`). Pure: no I/O.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

from retrieval_core.parsers.exceptions import DocumentParseError, UnsupportedContentTypeError

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
HTML = "text/html"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
CSV = "text/csv"
JSONL = "application/x-ndjson"

SUPPORTED_CONTENT_TYPES: tuple[str, ...] = (PDF, DOCX, HTML, MARKDOWN, TEXT, CSV, JSONL)
TEXT_TYPES = frozenset({HTML, MARKDOWN, TEXT, CSV, JSONL})

SUFFIXES = {
    ".pdf": PDF,
    ".docx": DOCX,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": HTML,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": TEXT,
    ".text": TEXT,
    ".csv": CSV,
    ".tsv": CSV,  # read as CSV: the delimiter is found from the header
    ".jsonl": JSONL,
    ".ndjson": JSONL,
}
ALIASES = {
    "application/x-pdf": PDF,
    "application/xhtml+xml": HTML,
    "text/x-markdown": MARKDOWN,
    "application/csv": CSV,
    "text/x-csv": CSV,
    "text/tab-separated-values": CSV,
    "application/jsonl": JSONL,
    "application/jsonlines": JSONL,
    "application/x-jsonlines": JSONL,
    "application/ndjson": JSONL,
    "text/jsonl": JSONL,
    "text/x-ndjson": JSONL,
}
# Declared types that say nothing at all: the suffix, then the bytes, decide.
UNKNOWN = frozenset({"", "application/octet-stream", "binary/octet-stream"})

_BINARY_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "application/x-ole-storage"),
)
# An HTML document's start: an XML declaration and comments may come before the doctype or <html>.
_HTML_START = re.compile(
    r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.I | re.S
)
_SNIFF_BYTES = 8192


def media_type(content_type: str | None) -> str:
    """The declared type without parameters, lower-cased, aliases mapped to the canonical name."""
    bare = (content_type or "").split(";")[0].strip().lower()
    return ALIASES.get(bare, bare)


def charset(content_type: str | None) -> str | None:
    """The `charset` parameter of a declared content type, if any."""
    for param in (content_type or "").split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip("\"'"):
            return value.strip().strip("\"'")
    return None


def suffix_type(name: str | None) -> str | None:
    """The format the name's suffix stands for (case-insensitive), or None."""
    if not name or "." not in name.rsplit("/", 1)[-1]:
        return None
    return SUFFIXES.get("." + name.rsplit(".", 1)[-1].lower())


def detect_content_type(data: bytes, declared: str | None, name: str | None) -> str:
    """The supported content type `data` is read as; UnsupportedContentTypeError (415) if none.

    Raises DocumentParseError (422) for a file that claims to be a PDF or DOCX and is binary data
    of another kind (e.g. a password-protected Word file, which is not a zip).
    """
    bare = media_type(declared)
    claimed = _claimed(bare, name)
    if not data.strip():
        return claimed or TEXT  # nothing to sniff: an empty PDF is still reported as a PDF
    head = data[:_SNIFF_BYTES]
    if _is_pdf(data) or (claimed == PDF and b"%PDF-" in data[:1024]):
        return PDF
    if head.startswith(b"PK\x03\x04"):
        if _is_docx(data):
            return DOCX
        if claimed == DOCX:
            raise DocumentParseError(DOCX, "a zip archive without word/document.xml, not a Word document")
        raise UnsupportedContentTypeError("application/zip", SUPPORTED_CONTENT_TYPES)
    # UTF-16 and UTF-32 text is full of NUL bytes: binary only when no charset says it is such text.
    wide = (charset(declared) or "").lower().replace("_", "-").startswith(("utf-16", "utf-32"))
    if not wide and _is_binary(head):
        if claimed == DOCX and head.startswith(b"\xd0\xcf\x11\xe0"):
            raise DocumentParseError(DOCX, "encrypted with a password, or a legacy .doc file (not .docx)")
        if claimed in (PDF, DOCX):
            kind = "PDF (no %PDF- header)" if claimed == PDF else "Word document (not a zip archive)"
            raise DocumentParseError(claimed, f"the bytes are not a {kind}")
        sniffed = next((kind for sig, kind in _BINARY_SIGNATURES if head.startswith(sig)), None)
        raise UnsupportedContentTypeError(
            sniffed or bare or "application/octet-stream", SUPPORTED_CONTENT_TYPES
        )
    if _HTML_START.match(_sniff_text(head)):
        return HTML
    if claimed in TEXT_TYPES:
        return claimed
    if bare in UNKNOWN and _looks_like_jsonl(head):
        return JSONL
    if claimed is None and bare not in UNKNOWN and not bare.startswith("text/"):
        raise UnsupportedContentTypeError(bare, SUPPORTED_CONTENT_TYPES)
    return TEXT


def _claimed(bare: str, name: str | None) -> str | None:
    """What the declared type and the name say, before the bytes are looked at."""
    if bare in SUPPORTED_CONTENT_TYPES and bare != TEXT:
        return bare
    by_suffix = suffix_type(name)
    if by_suffix is not None:
        return by_suffix
    if bare.startswith("text/"):
        return TEXT
    return None


def _is_pdf(data: bytes) -> bool:
    """`%PDF-` first; or, as viewers allow, after some junk in the first KiB of a file that is not text
    (so a Markdown page about the PDF format is not taken for one)."""
    if data.lstrip()[:5] == b"%PDF-":
        return True
    if b"%PDF-" not in data[:1024]:
        return False
    try:
        data[:_SNIFF_BYTES].decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start < _SNIFF_BYTES - 4  # not merely a character cut at the sniff's end
    return False


def _is_docx(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "word/document.xml" in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        # A truncated archive has no central directory; its local headers still name the parts.
        return b"word/document.xml" in data


def _is_binary(head: bytes) -> bool:
    """NUL bytes (and no UTF-16 or UTF-32 byte order mark) mean binary data, not text."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        return False
    return b"\x00" in head or any(head.startswith(sig) for sig, _ in _BINARY_SIGNATURES)


def _sniff_text(head: bytes) -> str:
    if head.startswith(b"\xff\xfe"):
        return head[2:].decode("utf-16-le", errors="ignore")
    if head.startswith(b"\xfe\xff"):
        return head[2:].decode("utf-16-be", errors="ignore")
    return head.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="ignore")


def _looks_like_jsonl(head: bytes) -> bool:
    """Undeclared data whose first line is a JSON object is JSON Lines."""
    first = _sniff_text(head).lstrip().split("\n", 1)[0].strip()
    if not (first.startswith("{") and first.endswith("}")):
        return False
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False
