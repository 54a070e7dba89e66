"""OCR engines for scanned PDF pages (OCR_ENGINE): Amazon Textract, or tesseract's command line.

Both implement `parsers.scanned_pages.OcrEngine`; the parsers call them and never import them. Neither
is needed unless OCR_ENGINE names it: with `none` (the default) nothing here is imported.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval_core.parsers.scanned_pages import OcrEngine


@lru_cache(maxsize=4)
def ocr_engine(name: str, max_pages: int) -> OcrEngine | None:
    """The process's engine for OCR_ENGINE `name` (None for `none`); built once, its client on first use."""
    if name == "textract":
        from retrieval_core.ocr.textract import TextractOcr

        return TextractOcr(max_pages)
    if name == "tesseract":
        from retrieval_core.ocr.tesseract import TesseractOcr

        return TesseractOcr(max_pages)
    return None
