"""Shape checks of the Lambda events the handlers take, so a malformed event is answered, never raised on.

API Gateway and SQS never send these; a direct `lambda invoke`, a test harness or a misrouted trigger
can. An HTTP API event must be payload format 2.0 as Mangum reads it; an SQS record needs a string
`messageId` and `body`. Pure: no AWS client, no web framework.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any


def http_event_problem(event: object) -> str | None:
    """Why `event` is not an HTTP API (payload 2.0) event we can serve; None when it is one."""
    if not isinstance(event, dict):
        return "the event is not a JSON object"
    if event.get("version") != "2.0":
        return 'the event is not an HTTP API payload format 2.0 event (version must be "2.0")'
    context = event.get("requestContext")
    if not isinstance(context, dict):
        return "requestContext is missing or not an object"
    http = context.get("http")
    if not isinstance(http, dict) or not isinstance(http.get("method"), str):
        return "requestContext.http.method is missing or not a string"
    if not isinstance(event.get("rawPath"), str):
        return "rawPath is missing or not a string"
    for name in ("rawQueryString", "routeKey"):
        if name in event and not isinstance(event[name], str):
            return f"{name} is not a string"
    for name in ("headers", "queryStringParameters", "pathParameters", "stageVariables"):
        if event.get(name) is not None and not _string_map(event[name]):
            return f"{name} is not an object of strings"
    cookies = event.get("cookies")
    if cookies is not None and not (isinstance(cookies, list) and all(isinstance(c, str) for c in cookies)):
        return "cookies is not a list of strings"
    return _body_problem(event)


def _body_problem(event: dict[str, Any]) -> str | None:
    body, encoded = event.get("body"), event.get("isBase64Encoded", False)
    if not isinstance(encoded, bool):
        return "isBase64Encoded is not a boolean"
    if body is None:
        return None
    if not isinstance(body, str):
        return "body is not a string"
    if encoded:
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return "body is marked isBase64Encoded but is not valid base64"
    return None


def _string_map(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


@dataclass
class SqsBatch:
    """An SQS event split into the records a processor can take and the ones it cannot."""

    records: list[dict[str, Any]] = field(default_factory=list)
    # messageIds of malformed records: reported as failures, so they are retried and then dead-lettered.
    failed_ids: list[str] = field(default_factory=list)
    # Why records (or the whole event) were set aside, for the log.
    problems: list[str] = field(default_factory=list)


def split_sqs_event(event: object) -> SqsBatch:
    """The usable records of `event`; malformed ones are failed by messageId, or only logged without one."""
    batch = SqsBatch()
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        batch.problems.append("the event has no Records list")
        return batch
    for index, record in enumerate(records):
        problem = _record_problem(record)
        if problem is None:
            batch.records.append(record)
            continue
        message_id = record.get("messageId") if isinstance(record, dict) else None
        if isinstance(message_id, str) and message_id:
            batch.failed_ids.append(message_id)
            batch.problems.append(f"record {message_id}: {problem}")
        else:
            batch.problems.append(f"record {index}: {problem}")
    return batch


def _record_problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return "not an object"
    message_id = record.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        return "messageId is missing or not a string"
    if not isinstance(record.get("body"), str):
        return "body is missing or not a string"
    attributes = record.get("messageAttributes")
    if attributes is not None and not (
        isinstance(attributes, dict) and all(isinstance(a, dict) for a in attributes.values())
    ):
        return "messageAttributes is not an object of objects"
    return None
