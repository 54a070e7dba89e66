"""Reading ingest queue messages (S3 notifications, EventBridge, SNS, test events) and sidecars."""

from __future__ import annotations

import json
from typing import Any

import pytest

from retrieval_core.documents.exceptions import S3EventError, SidecarError
from retrieval_core.documents.s3_events import ObjectChange, Target, read_message, target_of
from retrieval_core.documents.sidecar import read_sidecar


def notification(key: str, event_name: str = "ObjectCreated:Put", **object_fields: Any) -> str:
    """The body S3 sends to SQS, as documented (notification-content-structure)."""
    obj = {"key": key, "size": 1024, "eTag": "d41d8cd98f00b204e9800998ecf8427e", **object_fields}
    if event_name.startswith("ObjectRemoved"):
        obj.pop("eTag")
        obj.pop("size")
    return json.dumps(
        {
            "Records": [
                {
                    "eventVersion": "2.1",
                    "eventSource": "aws:s3",
                    "awsRegion": "us-east-1",
                    "eventTime": "2026-11-23T20:00:00.000Z",
                    "eventName": event_name,
                    "s3": {
                        "s3SchemaVersion": "1.0",
                        "configurationId": "ingest",
                        "bucket": {"name": "docs-bucket", "arn": "arn:aws:s3:::docs-bucket"},
                        "object": obj,
                    },
                }
            ]
        }
    )


def eventbridge(key: str, detail_type: str = "Object Created", sequencer: str = "0062E99A88DC407460") -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "17793124-05d4-b198-2fde-7ededc63b103",
            "detail-type": detail_type,
            "source": "aws.s3",
            "account": "123456789012",
            "time": "2026-11-23T20:00:00Z",
            "region": "us-east-1",
            "resources": ["arn:aws:s3:::docs-bucket"],
            "detail": {
                "version": "0",
                "bucket": {"name": "docs-bucket"},
                "object": {
                    "key": key,
                    "size": 5,
                    "etag": "b1946ac92492d2347c6235b4d2611184",
                    "sequencer": sequencer,
                },
                "reason": "PutObject",
            },
        }
    )


def only_change(body: str) -> ObjectChange:
    message = read_message(body)
    assert message.ignored == []
    (change,) = message.changes
    return change


def test_a_notification_key_is_url_decoded_with_plus_for_space() -> None:
    change = only_change(
        notification("handbook/HR+policies/caf%C3%A9+%2B+tips.pdf", sequencer="0055AED6DCD90281E5")
    )
    assert change.key == "handbook/HR policies/café + tips.pdf"
    assert change.bucket == "docs-bucket"
    assert change.action == "created"
    assert change.sequencer == "0055AED6DCD90281E5"
    assert change.etag == "d41d8cd98f00b204e9800998ecf8427e"
    assert change.target == Target(
        "handbook", "HR policies/café + tips.pdf", "HR policies/café + tips.pdf", False
    )


def test_an_eventbridge_key_is_taken_as_is() -> None:
    change = only_change(eventbridge("handbook/a+b c%2B.txt"))
    assert change.key == "handbook/a+b c%2B.txt"
    assert change.action == "created" and change.event_name == "Object Created"
    assert change.sequencer == "0062E99A88DC407460"
    assert change.etag == "b1946ac92492d2347c6235b4d2611184"


@pytest.mark.parametrize(
    ("event_name", "action"),
    [
        ("ObjectCreated:Put", "created"),
        ("ObjectCreated:CompleteMultipartUpload", "created"),
        ("ObjectCreated:Copy", "created"),
        ("ObjectRemoved:Delete", "removed"),
        ("ObjectRemoved:DeleteMarkerCreated", "removed"),
        ("LifecycleExpiration:Delete", "removed"),
    ],
)
def test_created_and_removed_event_names(event_name: str, action: str) -> None:
    change = only_change(notification("s/k.txt", event_name, sequencer="00AB"))
    assert change.action == action
    assert (change.etag is None) == (action == "removed")


def test_removed_and_created_events_of_one_key_have_different_idempotency_keys() -> None:
    put = only_change(notification("s/k.txt", "ObjectCreated:Put", sequencer="00AB"))
    delete = only_change(notification("s/k.txt", "ObjectRemoved:Delete", sequencer="00AC"))
    again = only_change(notification("s/k.txt", "ObjectCreated:Put", sequencer="00AB"))
    assert put.idempotency_key == again.idempotency_key
    assert put.idempotency_key != delete.idempotency_key
    assert put.idempotency_key == {
        "bucket": "docs-bucket",
        "key": "s/k.txt",
        "sequencer": "00AB",
        "event": "ObjectCreated:Put",
    }


def test_eventbridge_object_deleted_is_a_removal() -> None:
    change = only_change(eventbridge("s/k.txt", "Object Deleted"))
    assert change.action == "removed" and change.etag is None


def test_test_events_and_other_event_kinds_are_acknowledged_without_changes() -> None:
    test_event = {
        "Service": "Amazon S3",
        "Event": "s3:TestEvent",
        "Time": "2026-11-23T20:00:00.000Z",
        "Bucket": "b",
    }
    for body in (
        json.dumps(test_event),
        notification("s/k.txt", "ObjectRestore:Completed"),
        notification("s/k.txt", "ObjectTagging:Put"),
        eventbridge("s/k.txt", "Object Tags Added"),
    ):
        message = read_message(body)
        assert message.changes == [] and len(message.ignored) == 1, body


def test_an_s3_event_relayed_by_sns_is_read() -> None:
    body = json.dumps(
        {"Type": "Notification", "MessageId": "m", "Message": notification("s/k.txt", sequencer="01")}
    )
    assert only_change(body).key == "s/k.txt"


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        json.dumps({"requestId": "r", "query": "q"}),
        json.dumps({"Records": "nope"}),
        json.dumps({"Records": [{"eventSource": "aws:sqs"}]}),
        json.dumps({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {}}]}),
        notification("").replace('"key": ""', '"key": 5'),
        json.dumps(
            {"source": "aws.s3", "detail-type": "Object Created", "detail": {"bucket": {"name": "b"}}}
        ),
    ],
)
def test_what_is_not_an_s3_event_is_an_error(body: str) -> None:
    with pytest.raises(S3EventError):
        read_message(body)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("store/path/to/file.pdf", Target("store", "path/to/file.pdf", "path/to/file.pdf", False)),
        ("store/a.pdf.metadata.json", Target("store", "a.pdf", "a.pdf.metadata.json", True)),
        ("store/dir/b.md.metadata.json", Target("store", "dir/b.md", "dir/b.md.metadata.json", True)),
        ("store/.metadata.json", None),
        ("file-at-root.pdf", None),
        ("store/", None),
        ("/leading-slash.pdf", None),
    ],
)
def test_the_first_key_segment_is_the_store_and_the_rest_the_document(
    key: str, expected: Target | None
) -> None:
    assert target_of(key) == expected


def test_file_name_is_the_last_segment() -> None:
    target = target_of("store/path/to/file.pdf")
    assert target is not None and target.file_name == "file.pdf"


def test_sidecar_plain_and_typed_values() -> None:
    sidecar = {
        "metadataAttributes": {
            "department": "HR",
            "year": 2024,
            "public": True,
            "tags": ["policy", "leave"],
            "owner": {"value": {"type": "STRING", "stringValue": "Ana"}, "includeForEmbedding": True},
            "score": {"value": {"type": "NUMBER", "numberValue": 4.5}},
            "draft": {"value": {"type": "BOOLEAN", "booleanValue": False}},
            "labels": {"value": {"type": "STRING_LIST", "stringListValue": ["a", "b"]}},
        }
    }
    assert read_sidecar(json.dumps(sidecar).encode()) == {
        "department": "HR",
        "year": 2024,
        "public": True,
        "tags": ["policy", "leave"],
        "owner": "Ana",
        "score": 4.5,
        "draft": False,
        "labels": ["a", "b"],
    }


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe not utf-8",
        b"{not json",
        b"[]",
        b'{"department": "HR"}',
        b'{"metadataAttributes": {"a": {"nested": {"deep": 1}}}}',
        b'{"metadataAttributes": {"a": {"value": {"type": "DATE", "dateValue": "2024"}}}}',
    ],
)
def test_a_malformed_sidecar_is_a_sidecar_error(data: bytes) -> None:
    with pytest.raises(SidecarError):
        read_sidecar(data)
