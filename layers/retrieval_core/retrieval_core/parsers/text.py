"""Plain text, and the one way every text format is decoded. Pure: no I/O."""

from __future__ import annotations

import codecs

from retrieval_core.parsers.base import Block, ParsedDocument, ParsedFile, error_summary
from retrieval_core.parsers.detect import TEXT
from retrieval_core.parsers.exceptions import DocumentParseError

# Longest first: the UTF-32 LE mark begins with the UTF-16 LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_text(data: bytes, content_type: str, charset: str | None = None) -> str:
    """The text of `data`: a byte order mark decides, else the declared charset, else UTF-8.

    Bytes that are not valid in that encoding are a DocumentParseError, never replaced by U+FFFD:
    mojibake in an index is worse than a clear refusal. Line ends become `\\n`.
    """
    encoding, body = next(
        ((name, data[len(bom) :]) for bom, name in _BOMS if data.startswith(bom)), (None, data)
    )
    if encoding is None:
        encoding = charset or "utf-8"
        try:
            codec = codecs.lookup(encoding)
        except (LookupError, ValueError):  # ValueError: a NUL or a lone surrogate in the name
            raise DocumentParseError(content_type, f"unknown charset {encoding[:40]!a}") from None
        # Python also names bytes-to-bytes and str-to-str transforms codecs (base64, zlib, rot13...):
        # what it does not mark as a text encoding is no charset.
        if not getattr(codec, "_is_text_encoding", True):
            raise DocumentParseError(content_type, f"charset {encoding[:40]!a} is not a text encoding")
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as error:
        hint = "" if charset else "; declare its charset (e.g. '; charset=windows-1252') or save it as UTF-8"
        raise DocumentParseError(
            content_type, f"not valid {encoding} text (byte {error.start + len(data) - len(body)}){hint}"
        ) from None
    except (UnicodeError, ValueError) as error:  # 'undefined' decodes nothing; others fail their own way
        raise DocumentParseError(
            content_type, f"cannot decode with charset {encoding[:40]!a} ({error_summary(error)})"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_text(data: bytes, charset: str | None) -> ParsedFile:
    """Plain text: one block, the whole text."""
    text = decode_text(data, TEXT, charset)
    return ParsedFile(TEXT, [ParsedDocument([Block(text.strip())], metadata={"contentType": TEXT})])
