"""Errors of reading a document: a format no parser reads, a file that cannot be read, no text."""

from __future__ import annotations

from retrieval_core.exceptions import InvalidRequestError, RetrievalError


class UnsupportedContentTypeError(RetrievalError):
    """A document whose format no parser reads; the message names the ones we read."""

    status_code = 415
    code = "unsupported_content_type"

    def __init__(self, content_type: str, supported: tuple[str, ...]) -> None:
        super().__init__(
            f"cannot read content of type '{content_type}'; supported: {', '.join(supported)}",
            {"contentType": content_type, "supported": list(supported)},
        )


class DocumentParseError(InvalidRequestError):
    """A document in a supported format that cannot be read: corrupt, encrypted, not what it claims."""

    code = "unreadable_document"

    def __init__(self, content_type: str, reason: str) -> None:
        super().__init__(
            f"cannot read this {content_type} document: {reason}",
            {"contentType": content_type, "reason": reason},
        )


class EmptyDocumentError(InvalidRequestError):
    """A document that yields no text to index."""

    code = "empty_document"

    def __init__(self, content_type: str) -> None:
        super().__init__(f"the {content_type} document holds no text to index", {"contentType": content_type})


class DocumentLimitError(InvalidRequestError):
    """A document over one of its parsing budgets (parsers/budget.py): too many pages, elements, rows'
    fields, chunks, too deeply nested, too large unpacked, or too slow to read."""

    code = "document_limit_exceeded"

    def __init__(self, content_type: str, what: str, value: str, limit: str, setting: str) -> None:
        kind = f"this {content_type} document" if content_type else "this document"
        super().__init__(
            f"{kind} is over a parsing limit: {what} {value}, over the {limit} {setting} allows; "
            f"split the document, or raise {setting}",
            {"contentType": content_type, "limit": setting, "maxValue": limit, "value": value},
        )


class WriteCancelledError(RetrievalError):
    """The client went away while its document was being read: the work stopped, nothing was written."""

    status_code = 499
    code = "client_closed_request"

    def __init__(self) -> None:
        super().__init__("the client closed the connection before the write ended; nothing was written")


class NoTextLayerError(InvalidRequestError):
    """A PDF whose pages draw images but show no text: a scan, with no text layer to index and no OCR
    that read one (OCR_ENGINE unset, or its engine found no text)."""

    code = "no_text_layer"

    def __init__(self, content_type: str, scanned_pages: int, ocr_engine: str | None = None) -> None:
        pages = f"{scanned_pages} page{'' if scanned_pages == 1 else 's'} of images"
        if ocr_engine is None:
            reason = (
                f"no text layer: a scanned PDF? OCR is not enabled ({pages}, no text); set OCR_ENGINE "
                '(docs/formats.md, "Scanned PDFs and OCR") or upload a PDF with a text layer'
            )
        else:
            reason = f"no text layer ({pages}), and OCR ({ocr_engine}) found no text on them"
        super().__init__(
            f"cannot index this {content_type} document: {reason}",
            {"contentType": content_type, "scannedPages": scanned_pages, "ocrEngine": ocr_engine},
        )


class OcrRefusedError(InvalidRequestError):
    """A scanned page the OCR engine cannot be given or refused (too large, an image kind it does not read):
    a property of the document, so retrying does not help."""

    code = "ocr_refused"

    def __init__(self, engine: str, page: int, reason: str) -> None:
        super().__init__(
            f"OCR ({engine}) cannot read page {page} of this PDF: {reason}",
            {"ocrEngine": engine, "pageNumber": page, "reason": reason},
        )


class OcrFailedError(RetrievalError):
    """The OCR engine failed on a page (unreachable, throttled, refused our credentials, crashed): nothing
    was written, and the same document may be read once the engine answers again."""

    status_code = 502
    code = "ocr_failed"

    def __init__(self, engine: str, page: int, reason: str) -> None:
        super().__init__(
            f"OCR ({engine}) failed on page {page}: {reason}",
            {"ocrEngine": engine, "pageNumber": page, "reason": reason},
        )


class UnknownColumnError(InvalidRequestError):
    """A column named in the table options (text, id, title or metadata) that the table does not have."""

    code = "unknown_column"

    def __init__(self, content_type: str, option: str, column: str, columns: list[str]) -> None:
        shown = ", ".join(columns[:40]) + (f" and {len(columns) - 40} more" if len(columns) > 40 else "")
        super().__init__(
            f"{option}: this {content_type} document has no column '{column[:80]}'; "
            f"its columns: {shown or 'none'}",
            {"contentType": content_type, "option": option, "column": column, "columns": columns[:200]},
        )


class TableOptionsError(InvalidRequestError):
    """Table options that cannot apply to any table: an empty column name, too many metadata columns."""

    code = "invalid_table_options"

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option}: {reason}", {"option": option, "reason": reason})
