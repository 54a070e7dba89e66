"""The opaque cursors of paged document listings: the last id of a page, URL-safe base64."""

from __future__ import annotations

import base64
import binascii

from retrieval_core.exceptions import InvalidRequestError


def encode_cursor(last_id: str) -> str:
    """The opaque cursor of the page after `last_id`."""
    return base64.urlsafe_b64encode(last_id.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The id a cursor continues after; a 422 naming `cursor` when it is not one of ours."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise InvalidRequestError.for_field("cursor", "not a cursor of this service", "value_error") from None
