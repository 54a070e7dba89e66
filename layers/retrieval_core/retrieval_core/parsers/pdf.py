"""PDF: one block per page with its 1-based `pageNumber`, read by pypdf. Pure: no I/O.

A PDF encrypted with an empty user password (one that only restricts printing or copying) opens in
any viewer without a prompt, so it is decrypted and read; AES needs the `cryptography` package.
Pages that draw images and show no text are scans (parsers/scanned_pages.py): read by the OCR engine
given, else, when no page has text, a NoTextLayerError.

The budget (parsers/budget.py) bounds the pages, the content-stream bytes (decoded, counted each time a
page or a form draws one: ten pages may share one huge stream) and the operators read; each page's
bytes are counted before pypdf parses them, and the deadline is checked between operators and, inside
pypdf's tokenizer, between tokens (it parses a whole stream, seconds for a few MB, before the first
operator is seen).
"""

from __future__ import annotations

import io
from contextvars import ContextVar
from typing import Any

from retrieval_core.exceptions import RetrievalError
from retrieval_core.parsers.base import Block, ParsedDocument, ParsedFile, error_summary
from retrieval_core.parsers.budget import ParseMeter
from retrieval_core.parsers.detect import PDF
from retrieval_core.parsers.exceptions import DocumentParseError, NoTextLayerError
from retrieval_core.parsers.scanned_pages import OcrEngine, PageMarks, read_scanned

# The meter of the PDF this context is reading, for pypdf's tokenizer (`_tokens_are_checkpoints`).
_READING: ContextVar[ParseMeter | None] = ContextVar("pdf_meter", default=None)


def read_pdf(data: bytes, charset: str | None, meter: ParseMeter, ocr: OcrEngine | None = None) -> ParsedFile:
    """One block per page with text (scanned ones: read by `ocr`); title from the document information."""
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError

    _tokens_are_checkpoints()
    reading = _READING.set(meter)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except DependencyError:
                raise DocumentParseError(
                    PDF, "encrypted with AES, which needs the cryptography package"
                ) from None
            if opened == PasswordType.NOT_DECRYPTED:
                raise DocumentParseError(PDF, "encrypted: it needs a password to open")
        pages = reader.pages
        meter.within("max_pages", len(pages), "pages")
        blocks: list[Block] = []
        scanned: list[int] = []
        for number, page in enumerate(pages, start=1):
            meter.check()
            text, marks = _page_text(page, number, meter)
            if text.strip():
                blocks.append(Block(text.strip(), {"pageNumber": number}))
            elif marks.scanned:
                scanned.append(number)
        title = _title(reader)
        page_count = len(pages)
    except RetrievalError:
        raise
    # pypdf meets broken files with many kinds of exception (its own, KeyError, ValueError,
    # RecursionError...); every one is the same answer for the caller: this file cannot be read.
    except Exception as error:  # noqa: BLE001
        raise DocumentParseError(PDF, f"damaged or truncated ({error_summary(error)})") from None
    finally:
        _READING.reset(reading)
    if scanned and ocr is not None:
        blocks = read_scanned(pages, scanned, blocks, ocr, meter)
    if scanned and not blocks:
        raise NoTextLayerError(PDF, len(scanned), ocr.name if ocr is not None else None)
    document = ParsedDocument(blocks, title=title, metadata={"contentType": PDF, "pageCount": page_count})
    return ParsedFile(PDF, [document])


def _page_text(page: Any, number: int, meter: ParseMeter) -> tuple[str, PageMarks]:
    marks = PageMarks()
    try:
        forms = _form_sizes(page)
        meter.add("max_content_bytes", _stream_size(page.get_contents()), "content-stream bytes")

        def visit(operator: bytes, operands: Any, *_: Any) -> None:
            meter.add("max_operators", 1, "content-stream operators")
            meter.tick()
            marks.see(operator, operands, forms)
            if operator == b"Do" and operands:
                meter.add("max_content_bytes", forms.get(operands[0], 0), "content-stream bytes")

        text: str = page.extract_text(visitor_operand_before=visit)
    except RetrievalError:
        raise
    except Exception as error:  # noqa: BLE001  (see read_pdf)
        raise DocumentParseError(PDF, f"page {number} is damaged ({error_summary(error)})") from None
    return text, marks


def _tokens_are_checkpoints() -> None:
    """Make each token pypdf's content-stream tokenizer reads a checkpoint of the PDF being read (once per
    process; outside `read_pdf` the tokenizer is unchanged). Its per-token limit check is the one hook; a
    pypdf without it leaves the checkpoints between operators only, and fails
    test_reading_stops_at_the_deadline_inside_one_page, so an upgrade cannot drop it unseen."""
    from pypdf.generic import ContentStream

    check_limits = ContentStream.__dict__.get("_check_limits")
    if not isinstance(check_limits, staticmethod) or getattr(check_limits.__func__, "metered", False):
        return
    original = check_limits.__func__

    def metered(**limits: Any) -> Any:
        meter = _READING.get()
        if meter is not None:
            meter.tick()
        return original(**limits)

    metered.metered = True  # type: ignore[attr-defined]
    ContentStream._check_limits = staticmethod(metered)  # type: ignore[method-assign]


def _form_sizes(page: Any) -> dict[Any, int]:
    """The decoded size of each form XObject the page's resources name: drawn with `Do`, a form's stream
    is parsed again each time."""
    resources = page.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    if xobjects is None:
        return {}
    sizes = {}
    for name, reference in xobjects.get_object().items():
        xobject = reference.get_object()
        if xobject.get("/Subtype") == "/Form":
            sizes[name] = _stream_size(xobject)
    return sizes


def _stream_size(stream: Any) -> int:
    return len(stream.get_data()) if stream is not None else 0


def _title(reader: Any) -> str:
    info = reader.metadata
    title = info.title if info is not None else None
    return " ".join(str(title).split()) if title else ""
