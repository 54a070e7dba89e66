"""Paged listings (documents, stores, a document's chunks): the page size's bounds, and the opaque cursors,
each the last key of a page in URL-safe base64."""

from __future__ import annotations

import base64
import binascii
import re

from retrieval_core.documents.exceptions import InvalidCursorError
from retrieval_core.documents.prepare import STORE_NAME
from retrieval_core.exceptions import InvalidRequestError

DEFAULT_PAGE = 100
MAX_PAGE = 1000
MAX_CURSOR = 2048  # characters; a cursor of ours holds a key of at most 1,024 bytes
MAX_STORE_PREFIX = 128  # a store name's length: a longer prefix matches no store
MAX_CHUNK_INDEX = 2**31 - 1  # chunks.chunk_index is a PostgreSQL integer
_CHUNK_INDEX = re.compile(r"[0-9]{1,10}")


def check_page_limit(limit: int) -> None:
    """A 422 naming `limit` unless it is between 1 and MAX_PAGE."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequestError.for_field("limit", f"must be between 1 and {MAX_PAGE}", "value_error")


def encode_cursor(last_key: str) -> str:
    """The opaque cursor of the page after `last_key` (a document id, a store name, a chunk index)."""
    return base64.urlsafe_b64encode(last_key.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The key a cursor continues after; InvalidCursorError (422) naming the cause if it is not ours."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        decoded = base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise InvalidCursorError("not_base64", "is not URL-safe base64") from None
    try:
        key = decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidCursorError("not_text", "does not decode to UTF-8 text") from None
    if "\x00" in key:  # no key of ours holds one: PostgreSQL text cannot
        raise InvalidCursorError("not_a_key", "holds a NUL character, which no key has")
    return key


def store_cursor(cursor: str) -> str:
    """The store name a store list's cursor continues after; InvalidCursorError (422) when it holds none."""
    name = decode_cursor(cursor)
    if not STORE_NAME.fullmatch(name):
        raise InvalidCursorError("not_a_store_name", "does not continue a store list: it holds no store name")
    return name


def chunk_cursor(cursor: str) -> int:
    """The chunk index a chunk list's cursor continues after; InvalidCursorError (422) when it holds none."""
    key = decode_cursor(cursor)
    if not _CHUNK_INDEX.fullmatch(key) or int(key) > MAX_CHUNK_INDEX:
        raise InvalidCursorError(
            "not_a_chunk_index", "does not continue a chunk list: it holds no chunk index"
        )
    return int(key)
