"""functions/ingest invoked like Lambda with events/sqs-ingest-*.json, and its wiring in template.yaml.

The events are SQS-wrapped S3 notifications as S3 sends them (URL-encoded keys, sequencers, a test
event). The objects they name are uploaded to moto S3 with the same bytes, so their ETags match; the
documents land in the embedded PostgreSQL and are searched with the local model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval_core.grants import OPEN_GRANT
from tests.conftest import EVENTS_DIR, REPO_ROOT
from tests.servers import MotoServer, create_idempotency_table
from tests.template import SECRET_ARN, deployed, grants, resource_key, role_statements

TEMPLATE = REPO_ROOT / "template.yaml"
BUCKET = "documents-5c1f0a2e-8b3d-11f0-9a7c-0affd1e2c3b4"
KEY = "handbook/policies/travel expenses+été.txt"
TEXT = b"Expense reports are due within 30 days of the trip. Receipts over 25 EUR must be attached.\n"
SIDECAR = (
    b'{\n  "metadataAttributes": {\n    "department": "Finance",\n    "year": 2026,\n    "owner": {\n'
    b'      "value": {\n        "type": "STRING",\n        "stringValue": "Ana Ruiz"\n      },\n'
    b'      "includeForEmbedding": true\n    }\n  }\n}\n'
)


class FakeLambdaContext:
    function_name = "ingest"
    function_version = "1"
    memory_limit_in_mb = 2048
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:ingest:live"
    aws_request_id = "0f3e3a52-5a4b-4c8e-9d37-0d1f2f6c7a11"
    log_group_name = "/aws/lambda/ingest"
    log_stream_name = "2026/11/22/[1]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text())
    return event


def object_of(event: dict[str, Any], index: int = -1) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(event["Records"][index]["body"])["Records"][0]["s3"]["object"]
    return obj


def template() -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    parsed: dict[str, Any] = yaml_parse(TEMPLATE.read_text())
    return parsed


@pytest.fixture()
def handler_for(
    service: Any, moto: MotoServer, aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """functions/ingest/app.py's handler for a bucket, configured as template.yaml configures it, on moto.

    The events name store `handbook`, which the documents events also use: it starts absent.
    """
    from retrieval_core import container
    from retrieval_core.settings import get_settings

    documents = container.get_document_service()

    def drop_handbook() -> None:
        if "handbook" in {s.name for s in documents.list_stores(prefix="handbook")[0]}:
            documents.delete_store("handbook")

    def build(bucket: str) -> Any:
        moto.client("s3").create_bucket(Bucket=bucket)
        table = f"idempotency-{uuid.uuid4().hex[:8]}"
        create_idempotency_table(moto.client("dynamodb"), table)
        for key, value in {
            "IDEMPOTENCY_TABLE_NAME": table,
            "DOCUMENTS_BUCKET": bucket,
            "S3_ENDPOINT_URL": moto.endpoint_url,
            "DYNAMODB_ENDPOINT_URL": moto.endpoint_url,
        }.items():
            monkeypatch.setenv(key, value)
        get_settings.cache_clear()
        path = REPO_ROOT / "functions" / "ingest" / "app.py"
        spec = importlib.util.spec_from_file_location("lambda_function_ingest", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.handler

    drop_handbook()
    yield build
    monkeypatch.undo()
    get_settings.cache_clear()
    drop_handbook()


@pytest.fixture()
def ingest_handler(handler_for: Any) -> Any:
    """The handler for the stack's own bucket, which the sqs-ingest-* notifications name."""
    return handler_for(BUCKET)


def test_the_events_are_what_s3_sends_for_the_objects_the_test_uploads() -> None:
    put, sidecar = load_event("sqs-ingest-put.json"), load_event("sqs-ingest-sidecar.json")
    assert object_of(put)["key"] == "handbook/policies/travel+expenses%2B%C3%A9t%C3%A9.txt"
    assert object_of(put)["eTag"] == hashlib.md5(TEXT).hexdigest()
    assert object_of(sidecar)["eTag"] == hashlib.md5(SIDECAR).hexdigest()
    for name in ("sqs-ingest-put.json", "sqs-ingest-sidecar.json", "sqs-ingest-delete.json"):
        for record in load_event(name)["Records"]:
            assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"].endswith(
                "IngestQueue-9Q8R7S6T5U4V"
            )
            assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()


def test_put_sidecar_delete_and_poison_events_as_a_user_sees_them(
    service: Any, moto: MotoServer, ingest_handler: Any
) -> None:
    from retrieval_core import container
    from retrieval_core.schemas.retrieve import RetrieveRequest

    def search() -> list[Any]:
        request = RetrieveRequest.model_validate(
            {"query": "When are expense reports due?", "store": "handbook", "grade": 0.0}
        )
        response, _ = service.retrieve(request, grant=OPEN_GRANT)
        return list(response.results)

    s3 = moto.client("s3")
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=TEXT, ContentType="text/plain")
    s3.put_object(Bucket=BUCKET, Key=f"{KEY}.metadata.json", Body=SIDECAR, ContentType="application/json")

    # The test event is acknowledged; the put becomes a document.
    response = ingest_handler(load_event("sqs-ingest-put.json"), FakeLambdaContext())
    assert response == {"batchItemFailures": []}
    (result,) = search()
    assert result.metadata["documentId"] == "policies/travel expenses+été.txt"
    assert result.metadata["fileName"] == "travel expenses+été.txt"
    assert result.content.startswith("Expense reports are due within 30 days")

    # The sidecar adds its metadata (Bedrock's plain and typed values).
    assert ingest_handler(load_event("sqs-ingest-sidecar.json"), FakeLambdaContext()) == {
        "batchItemFailures": []
    }
    (result,) = search()
    assert result.metadata["department"] == "Finance" and result.metadata["year"] == 2026
    assert result.metadata["owner"] == "Ana Ruiz"

    # Both objects deleted: the sidecar's metadata and the document go.
    s3.delete_object(Bucket=BUCKET, Key=f"{KEY}.metadata.json")
    s3.delete_object(Bucket=BUCKET, Key=KEY)
    assert ingest_handler(load_event("sqs-ingest-delete.json"), FakeLambdaContext()) == {
        "batchItemFailures": []
    }
    assert search() == []
    documents, _ = container.get_document_service().list_documents("handbook")
    assert documents == []

    # Poison: a record without an object and a body that is not JSON are retried; a key outside the
    # `<store>/<id>` layout is acknowledged.
    poison = load_event("sqs-ingest-poison.json")
    response = ingest_handler(poison, FakeLambdaContext())
    assert response == {
        "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in poison["Records"][:2]]
    }


IDEMPOTENCY_ACTIONS = ("GetItem", "PutItem", "UpdateItem", "DeleteItem")


def test_the_template_wires_bucket_queue_dead_letters_and_function() -> None:
    parsed = template()
    resources, globals_fn = parsed["Resources"], parsed["Globals"]["Function"]

    bucket = resources["DocumentsBucket"]
    assert bucket["Condition"] == "CreateDocumentsBucket"
    assert bucket["DependsOn"] == "IngestQueuePolicy"
    props = bucket["Properties"]
    assert all(props["PublicAccessBlockConfiguration"].values())
    encryption = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    notifications = props["NotificationConfiguration"]["QueueConfigurations"]
    assert {n["Event"] for n in notifications} == {"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}
    assert all(n["Queue"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]} for n in notifications)

    queue = resources["IngestQueue"]["Properties"]
    function = resources["IngestFunction"]["Properties"]
    timeout = function.get("Timeout", globals_fn["Timeout"])
    assert queue["VisibilityTimeout"] >= 6 * timeout
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": ["IngestDeadLetterQueue", "Arn"]},
        "maxReceiveCount": 3,
    }

    # Only the stack's bucket (by computed name and account) or the existing bucket's rule may send.
    policy = json.dumps(resources["IngestQueuePolicy"]["Properties"]["PolicyDocument"])
    assert "aws:SourceAccount" in policy and "aws:SourceArn" in policy
    assert '"Ref": "DocumentsBucket"' not in policy and "DocumentsBucket.Arn" not in policy  # no cycle
    rule = resources["DocumentsEventRule"]
    assert rule["Condition"] == "UseExistingDocumentsBucket"
    assert rule["Properties"]["EventPattern"]["detail-type"] == ["Object Created", "Object Deleted"]

    assert function["CodeUri"] == "functions/ingest/" and function["Handler"] == "app.handler"
    assert function["Layers"] == [
        {"Ref": "ParsersLayer"},
        {"Fn::If": ["UseLocalEmbedder", {"Ref": "EmbedderLayer"}, {"Ref": "AWS::NoValue"}]},
    ]
    ((source),) = function["Events"].values()
    assert source["Type"] == "SQS" and source["Properties"]["Queue"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]}
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]

    # Least privilege, as deployed: the role's own statements and the template's policies it attaches.
    model = "amazon.titan-embed-text-v2:0"
    resources = deployed(
        {"DatabaseSecretArn": SECRET_ARN, "EmbeddingProvider": "bedrock", "EmbeddingModel": model}
    )
    in_bucket = {"Fn::Sub": ["arn:aws:s3:::${Bucket}/*", {"Bucket": {"Ref": "DocumentsBucket"}}]}
    the_bucket = {"Fn::Sub": ["arn:aws:s3:::${Bucket}", {"Bucket": {"Ref": "DocumentsBucket"}}]}
    assert grants(role_statements(resources, "IngestFunctionRole")) == {
        ("s3:GetObject", resource_key(in_bucket)),
        ("s3:ListBucket", resource_key(the_bucket)),
        *{(f"dynamodb:{a}", "CacheTable.Arn") for a in ("GetItem", "PutItem")},
        *{(f"dynamodb:{a}", "IdempotencyTable.Arn") for a in IDEMPOTENCY_ACTIONS},
        ("secretsmanager:GetSecretValue", SECRET_ARN),
        ("bedrock:InvokeModel", f"arn:aws:bedrock:us-east-1::foundation-model/{model}"),
    }

    assert {"DocumentsBucketName", "IngestQueueUrl", "IngestDeadLetterQueueUrl", "CacheTableName"} <= set(
        parsed["Outputs"]
    )


def test_an_existing_buckets_eventbridge_event_as_a_user_sees_it(
    service: Any, moto: MotoServer, handler_for: Any
) -> None:
    from retrieval_core.schemas.retrieve import RetrieveRequest

    event = load_event("sqs-ingest-eventbridge.json")
    detail = json.loads(event["Records"][0]["body"])["detail"]
    text = b"Badges are renewed every two years at the reception desk of building A.\n"
    assert detail["object"]["etag"] == hashlib.md5(text).hexdigest()
    handler = handler_for("acme-knowledge-base")
    moto.client("s3").put_object(
        Bucket="acme-knowledge-base", Key=detail["object"]["key"], Body=text, ContentType="text/plain"
    )
    assert handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    request = RetrieveRequest.model_validate(
        {"query": "How often are badges renewed?", "store": "handbook", "grade": 0.0}
    )
    (result,) = service.retrieve(request, grant=OPEN_GRANT)[0].results
    assert result.metadata["documentId"] == "access/badges & keys.txt"


def test_every_ingest_event_file_is_used() -> None:
    names = {p.name for p in Path(EVENTS_DIR).glob("sqs-ingest-*.json")}
    assert names == {
        "sqs-ingest-put.json",
        "sqs-ingest-sidecar.json",
        "sqs-ingest-delete.json",
        "sqs-ingest-poison.json",
        "sqs-ingest-eventbridge.json",
    }
