"""PDF: one block per page with its 1-based `pageNumber`, read by pypdf. Pure: no I/O.

A PDF encrypted with an empty user password (one that only restricts printing or copying) opens in
any viewer without a prompt, so it is decrypted and read; AES needs the `cryptography` package.
Pages without a text layer (scans) give no text: there is no OCR.
"""

from __future__ import annotations

import io
from typing import Any

from retrieval_core.parsers.base import Block, ParsedDocument, ParsedFile, error_summary
from retrieval_core.parsers.detect import PDF
from retrieval_core.parsers.exceptions import DocumentParseError


def read_pdf(data: bytes, charset: str | None) -> ParsedFile:
    """One block per page that has text; title from the document information, else empty."""
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError

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
        blocks: list[Block] = []
        for number, page in enumerate(pages, start=1):
            text = _page_text(page, number)
            if text.strip():
                blocks.append(Block(text.strip(), {"pageNumber": number}))
        title = _title(reader)
        page_count = len(pages)
    except DocumentParseError:
        raise
    # pypdf meets broken files with many kinds of exception (its own, KeyError, ValueError,
    # RecursionError...); every one is the same answer for the caller: this file cannot be read.
    except Exception as error:  # noqa: BLE001
        raise DocumentParseError(PDF, f"damaged or truncated ({error_summary(error)})") from None
    document = ParsedDocument(blocks, title=title, metadata={"contentType": PDF, "pageCount": page_count})
    return ParsedFile(PDF, [document])


def _page_text(page: Any, number: int) -> str:
    try:
        text: str = page.extract_text()
    except Exception as error:  # noqa: BLE001  (see read_pdf)
        raise DocumentParseError(PDF, f"page {number} is damaged ({error_summary(error)})") from None
    return text


def _title(reader: Any) -> str:
    info = reader.metadata
    title = info.title if info is not None else None
    return " ".join(str(title).split()) if title else ""
