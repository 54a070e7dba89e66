"""Read an ingest queue message: an S3 event notification, an S3 event delivered by EventBridge, an
S3 event relayed by SNS, or S3's test event. Pure: no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote_plus

from retrieval_core.documents.exceptions import S3EventError

SIDECAR_SUFFIX = ".metadata.json"

Action = Literal["created", "removed"]

# S3 event notification names (`eventName`), by prefix. LifecycleExpiration: only when a user subscribes
# to it; our template sends ObjectCreated:* and ObjectRemoved:* (both include every way in or out).
_NOTIFICATION_ACTIONS: dict[str, Action] = {
    "ObjectCreated:": "created",
    "ObjectRemoved:": "removed",
    "LifecycleExpiration:": "removed",
}
# EventBridge `detail-type`s of S3 (the rule only forwards these two).
_EVENTBRIDGE_ACTIONS: dict[str, Action] = {"Object Created": "created", "Object Deleted": "removed"}


@dataclass(frozen=True, slots=True)
class Target:
    """Where an object key leads: `<store>/<source id>`, or a sidecar `<store>/<source id>.metadata.json`."""

    store: str
    source_id: str  # for a sidecar: the source its metadata is for
    object_key: str  # the key inside the store (a sidecar's own): what S3's sequencer orders
    sidecar: bool

    @property
    def file_name(self) -> str:
        """The last path segment of the source id: the document's `fileName`."""
        return self.source_id.rsplit("/", 1)[-1]


def target_of(key: str) -> Target | None:
    """The store and source a key names; None when it has no store segment or nothing after it."""
    store, _, rest = key.partition("/")
    if not store or not rest:
        return None
    if rest.endswith(SIDECAR_SUFFIX):
        source_id = rest[: -len(SIDECAR_SUFFIX)]
        return Target(store, source_id, rest, sidecar=True) if source_id else None
    return Target(store, rest, rest, sidecar=False)


@dataclass(frozen=True, slots=True)
class ObjectChange:
    """One object created or removed, as its event told it."""

    bucket: str
    key: str  # decoded: the key as S3 stores it
    action: Action
    event_name: str  # eventName (ObjectCreated:Put) or detail-type (Object Created)
    sequencer: str | None  # S3's per-key order; absent from some S3 emulators and compatible stores
    etag: str | None  # the created object's ETag; None for removals
    event_time: str | None = None
    # Who made the change and the S3 request that made it, as the event tells (the audit trail's).
    principal: str | None = None  # userIdentity.principalId; EventBridge: detail.requester
    request_id: str | None = None  # responseElements.x-amz-request-id; EventBridge: detail.request-id

    @property
    def target(self) -> Target | None:
        """See `target_of`."""
        return target_of(self.key)

    @property
    def idempotency_key(self) -> dict[str, str]:
        """What makes this event itself: bucket, key, sequencer (else time and ETag) and event name."""
        order = self.sequencer or f"{self.event_time or ''}|{self.etag or ''}"
        return {"bucket": self.bucket, "key": self.key, "sequencer": order, "event": self.event_name}


@dataclass(frozen=True, slots=True)
class Message:
    """What one SQS message holds: the object changes, and what was acknowledged without work."""

    changes: list[ObjectChange] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def read_message(body: str) -> Message:
    """The changes in one SQS message body. Raises S3EventError for anything that is not an S3 event."""
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        raise S3EventError(f"message body is not JSON ({exc.msg})") from exc
    if not isinstance(payload, dict):
        raise S3EventError("message body is not a JSON object")
    # S3 -> SNS -> SQS without raw delivery: the S3 event is the SNS envelope's Message string.
    if payload.get("Type") == "Notification" and isinstance(payload.get("Message"), str):
        return read_message(payload["Message"])
    if payload.get("Event") == "s3:TestEvent":
        return Message(ignored=[f"S3 test event for bucket {payload.get('Bucket')!r}"])
    if "Records" in payload:
        return _read_notification(payload["Records"])
    if payload.get("source") == "aws.s3" and "detail-type" in payload:
        return _read_eventbridge(payload)
    raise S3EventError("message is neither an S3 event notification nor an S3 EventBridge event")


def _read_notification(records: Any) -> Message:
    if not isinstance(records, list):
        raise S3EventError("Records is not a list")
    message = Message()
    for index, record in enumerate(records):
        where = f"Records[{index}]"
        if not isinstance(record, dict) or record.get("eventSource") != "aws:s3":
            raise S3EventError(f"{where} is not an S3 event record")
        event_name = _text(record, "eventName", where)
        action = next((a for p, a in _NOTIFICATION_ACTIONS.items() if event_name.startswith(p)), None)
        if action is None:
            message.ignored.append(f"S3 event {event_name} does not change documents")
            continue
        s3 = _object(record, "s3", where)
        bucket = _text(_object(s3, "bucket", f"{where}.s3"), "name", f"{where}.s3.bucket")
        obj = _object(s3, "object", f"{where}.s3")
        message.changes.append(
            ObjectChange(
                bucket=bucket,
                # Notifications URL-encode keys, with `+` for a space (a literal `+` is %2B).
                key=unquote_plus(_text(obj, "key", f"{where}.s3.object")),
                action=action,
                event_name=event_name,
                sequencer=_optional_text(obj, "sequencer"),
                etag=_optional_text(obj, "eTag") if action == "created" else None,
                event_time=_optional_text(record, "eventTime"),
                principal=_optional_text(_optional_object(record, "userIdentity"), "principalId"),
                request_id=_optional_text(_optional_object(record, "responseElements"), "x-amz-request-id"),
            )
        )
    return message


def _read_eventbridge(payload: dict[str, Any]) -> Message:
    detail_type = _text(payload, "detail-type", "event")
    action = _EVENTBRIDGE_ACTIONS.get(detail_type)
    if action is None:
        return Message(ignored=[f"S3 EventBridge event {detail_type!r} does not change documents"])
    detail = _object(payload, "detail", "event")
    obj = _object(detail, "object", "detail")
    change = ObjectChange(
        bucket=_text(_object(detail, "bucket", "detail"), "name", "detail.bucket"),
        key=_text(obj, "key", "detail.object"),  # EventBridge keys are not URL-encoded
        action=action,
        event_name=detail_type,
        sequencer=_optional_text(obj, "sequencer"),
        etag=(_optional_text(obj, "etag") or _optional_text(obj, "eTag")) if action == "created" else None,
        event_time=_optional_text(payload, "time"),
        principal=_optional_text(detail, "requester"),
        request_id=_optional_text(detail, "request-id"),
    )
    return Message(changes=[change])


def _object(parent: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = parent.get(name)
    if not isinstance(value, dict):
        raise S3EventError(f"{where}.{name} is missing or not an object")
    return value


def _optional_object(parent: dict[str, Any], name: str) -> dict[str, Any]:
    value = parent.get(name)
    return value if isinstance(value, dict) else {}


def _text(parent: dict[str, Any], name: str, where: str) -> str:
    value = parent.get(name)
    if not isinstance(value, str) or not value:
        raise S3EventError(f"{where}.{name} is missing or not a non-empty string")
    return value


def _optional_text(parent: dict[str, Any], name: str) -> str | None:
    value = parent.get(name)
    return value if isinstance(value, str) and value else None
