"""How large an answer may be where it travels: one SQS message (queue replies), one Lambda response
(batch answers). Pure: no I/O.

SQS accepts messages of up to 1 MiB on queues created with its current default, but a queue's
MaximumMessageSize may be lower, and was 256 KiB by default before 2025: a reply is bounded by the
smaller size, so it fits whichever allowed reply queue it goes to.
"""

from __future__ import annotations

import json
from typing import Any

SQS_MESSAGE_BYTES = 262_144
# The reply's message attributes (requestId of at most 128 characters, status) count against the message.
SQS_ATTRIBUTE_BYTES = 1_024
LAMBDA_PAYLOAD_BYTES = 6_000_000
# A synchronous Lambda response: the HTTP API's envelope (status, headers) around the body.
RESPONSE_ENVELOPE_BYTES = 65_536


def sqs_body_bytes(body: str) -> int:
    """Bytes of an SQS message body (UTF-8), as SQS counts them."""
    return len(body.encode("utf-8"))


def lambda_body_bytes(body: Any) -> int:
    """Bytes `body` takes in a Lambda response payload: its JSON, escaped again as the payload's `body`.

    Measured at the worst the runtime may serialise it: every non-ASCII character as `\\uXXXX`.
    """
    return len(json.dumps(json.dumps(body, ensure_ascii=False, separators=(",", ":"))))
