"""The CloudFormation custom resource protocol (custom_resource) that Custom::DatabaseSchema speaks.

Answers go over real HTTP PUTs to a local server standing in for the pre-signed S3 URL.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_core.exceptions import DatabaseUnavailableError
from retrieval_core.lambdas.custom_resource import (
    MAX_BODY_BYTES,
    Outcome,
    Request,
    answer,
    failure_reason,
    parse_request,
    physical_resource_id,
    response_body,
)
from retrieval_core.lambdas.exceptions import CustomResourceEventError
from retrieval_core.lambdas.schema_resource import PHYSICAL_RESOURCE_ID
from tests.conftest import EVENTS_DIR
from tests.fakes.http import FakeHTTPServer, RecordedRequest, Reply


@dataclass
class FakeContext:
    """What `answer` reads of Lambda's context."""

    remaining_ms: int = 60_000
    log_stream_name: str = "2026/11/23/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS_DIR / f"cfn-migrate-{name}.json").read_text())
    return event


@pytest.fixture()
def s3() -> Iterator[FakeHTTPServer]:
    """Stands in for the pre-signed S3 URL: accepts any PUT with 200 and an empty body, as S3 does."""
    with FakeHTTPServer() as server:
        server.add_route("PUT", r"/.*", lambda request, match: Reply(200, b""))
        yield server


def aimed_at(event: dict[str, Any], server: FakeHTTPServer) -> dict[str, Any]:
    """`event` with its ResponseURL's scheme and host replaced by the local server's (path and query kept)."""
    url = event["ResponseURL"]
    return {**event, "ResponseURL": server.url + url[url.index("/", len("http://")) :]}


def only_put(server: FakeHTTPServer) -> RecordedRequest:
    (request,) = server.requests
    assert request.method == "PUT"
    return request


def succeed(request: Request, budget_s: float) -> Outcome:
    return Outcome.success({"Seen": request.request_type})


# Parsing.


@pytest.mark.parametrize("name", ["create", "update", "delete"])
def test_the_events_parse_as_cloudformation_sends_them(name: str) -> None:
    event = load(name)
    request = parse_request(event)
    assert request.request_type == name.capitalize()
    assert (
        request.logical_resource_id == "DatabaseSchema" and request.resource_type == "Custom::DatabaseSchema"
    )
    assert (
        request.stack_id.startswith("arn:aws:cloudformation:") and request.request_id in event["ResponseURL"]
    )
    assert request.properties == {"ServiceToken": event["ServiceToken"], "SchemaVersion": "16"}
    assert request.physical_resource_id == (None if name == "create" else PHYSICAL_RESOURCE_ID)
    assert request.old_properties == (
        {"ServiceToken": event["ServiceToken"], "SchemaVersion": "11"} if name == "update" else {}
    )


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"RequestId": None, "StackId": ""}, "lacks StackId, RequestId"),
        ({"RequestType": "Rollback"}, "RequestType is Create, Update or Delete, not 'Rollback'"),
        ({"ResponseURL": "file:///etc/passwd"}, "ResponseURL is not an http(s) URL"),
        ({"PhysicalResourceId": None}, "the Update request lacks PhysicalResourceId"),
        ({"ResourceProperties": ["SchemaVersion", "5"]}, "ResourceProperties is an object, not list"),
        ({"OldResourceProperties": "4"}, "OldResourceProperties is an object, not str"),
    ],
)
def test_a_malformed_request_is_refused_naming_what_is_wrong(change: dict[str, Any], says: str) -> None:
    event = {k: v for k, v in {**load("update"), **change}.items() if v is not None}
    with pytest.raises(CustomResourceEventError) as raised:
        parse_request(event)
    assert says in raised.value.message


def test_a_request_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(CustomResourceEventError, match="is an object, not list"):
        parse_request([load("create")])


def test_the_physical_resource_id_is_the_one_sent_else_the_stable_default() -> None:
    assert physical_resource_id(load("create"), PHYSICAL_RESOURCE_ID) == "retrieval-schema"
    assert physical_resource_id({**load("update"), "PhysicalResourceId": "from-before"}, "x") == "from-before"
    assert physical_resource_id({**load("delete"), "PhysicalResourceId": ""}, "x") == "x"
    assert physical_resource_id("not an event", "x") == "x"


# Response bodies.


def test_a_success_body_echoes_the_request_and_carries_data_without_a_reason() -> None:
    event = load("update")
    body = json.loads(response_body(event, Outcome.success({"SchemaVersion": "5"}), "retrieval-schema"))
    assert body == {
        "Status": "SUCCESS",
        "PhysicalResourceId": "retrieval-schema",
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": "DatabaseSchema",
        "NoEcho": False,
        "Data": {"SchemaVersion": "5"},
    }


def test_a_failure_always_has_a_reason() -> None:
    body = json.loads(response_body(load("create"), Outcome.failure(""), "retrieval-schema"))
    assert body["Status"] == "FAILED" and body["Reason"] == "failed without a reason"


def test_a_short_reason_is_sent_whole() -> None:
    reason = "DatabaseUnavailableError: could not connect to PostgreSQL"
    body = json.loads(response_body(load("create"), Outcome.failure(reason), "retrieval-schema"))
    assert body["Reason"] == reason


@pytest.mark.parametrize(
    "reason",
    [
        "x" * 10_000,
        '"quoted"\\' * 2_000,  # every character escaped: 2 bytes each in JSON
        "é漢\x01" * 3_000,  # 6 bytes each (\\uXX)
    ],
)
def test_a_long_reason_is_cut_so_that_the_body_fits_in_4096_bytes(reason: str) -> None:
    encoded = response_body(load("update"), Outcome.failure(reason), "retrieval-schema")
    assert MAX_BODY_BYTES - 6 <= len(encoded) <= MAX_BODY_BYTES
    sent = json.loads(encoded)["Reason"]
    assert sent.endswith(" [...]") and reason.startswith(sent.removesuffix(" [...]"))


@settings(max_examples=200, deadline=None)
@given(
    reason=st.text(max_size=6_000),
    data=st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=5),
)
def test_any_reason_leaves_a_valid_body_of_at_most_4096_bytes(reason: str, data: dict[str, str]) -> None:
    encoded = response_body(load("update"), Outcome("FAILED", reason, data), "retrieval-schema")
    assert len(encoded) <= MAX_BODY_BYTES
    sent = json.loads(encoded).get("Reason", "")
    assert sent == reason or (sent.endswith(" [...]") and reason.startswith(sent.removesuffix(" [...]")))


def test_a_reason_quotes_only_our_own_messages() -> None:
    ours = DatabaseUnavailableError("could not connect to PostgreSQL: 3 attempts in 2 s failed")
    assert failure_reason(ours, "stream") == (
        "DatabaseUnavailableError: could not connect to PostgreSQL: 3 attempts in 2 s failed "
        "(details: log stream stream)"
    )
    theirs = ValueError("invalid dsn postgresql://app:hunter2@db/postgres")
    assert failure_reason(theirs, None) == "ValueError: unexpected error"


# Answering over HTTP.


def test_the_answer_is_one_put_with_an_empty_content_type_to_the_presigned_url(s3: FakeHTTPServer) -> None:
    event = aimed_at(load("create"), s3)
    summary = answer(event, FakeContext(), succeed, default_physical_id=PHYSICAL_RESOURCE_ID)
    assert summary == {
        "Status": "SUCCESS",
        "PhysicalResourceId": "retrieval-schema",
        "Data": {"Seen": "Create"},
        "Delivered": True,
    }
    put = only_put(s3)
    assert put.headers["content-type"] == ""
    assert int(put.headers["content-length"]) == len(put.body)
    assert put.raw_path == event["ResponseURL"].removeprefix(s3.url)  # path and signature untouched
    assert put.json()["Status"] == "SUCCESS" and put.json()["RequestId"] == event["RequestId"]


def test_a_malformed_request_with_a_response_url_is_answered_failed(s3: FakeHTTPServer) -> None:
    event = aimed_at(load("delete"), s3)
    del event["RequestId"], event["LogicalResourceId"]
    called: list[Request] = []
    summary = answer(
        event, FakeContext(), lambda r, b: called.append(r) or succeed(r, b), default_physical_id="x"
    )
    assert not called
    body = only_put(s3).json()
    assert summary["Status"] == body["Status"] == "FAILED"
    assert body["Reason"].startswith("CustomResourceEventError: the custom resource request lacks RequestId")
    assert body["PhysicalResourceId"] == "retrieval-schema"  # the one sent: a Delete must not replace it
    assert "RequestId" not in body and body["StackId"] == event["StackId"]


def test_a_request_without_a_response_url_raises_as_nobody_can_be_answered(s3: FakeHTTPServer) -> None:
    event = load("create")
    del event["ResponseURL"]
    with pytest.raises(CustomResourceEventError, match="no http"):
        answer(event, FakeContext(), succeed, default_physical_id="x")
    assert not s3.requests


def test_an_unexpected_error_is_answered_failed_with_its_type_and_the_traceback_is_logged(
    s3: FakeHTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(request: Request, budget_s: float) -> Outcome:
        raise KeyError("password=hunter2")

    with caplog.at_level(logging.INFO):
        summary = answer(aimed_at(load("create"), s3), FakeContext(), broken, default_physical_id="x")
    reason = only_put(s3).json()["Reason"]
    assert summary["Reason"] == reason
    assert reason == "KeyError: unexpected error (details: log stream 2026/11/23/[$LATEST]0123456789abcdef)"
    assert "Traceback" in caplog.text and "broken" in caplog.text  # where it failed, for the operator
    assert "hunter2" not in reason


def test_with_less_time_than_the_reserve_the_action_is_not_started(s3: FakeHTTPServer) -> None:
    called: list[Request] = []
    summary = answer(
        aimed_at(load("update"), s3),
        FakeContext(remaining_ms=8_000),
        lambda r, b: called.append(r) or succeed(r, b),
        default_physical_id="x",
        reserve_s=10.0,
    )
    assert not called
    assert summary["Reason"] == (
        "the function had 8.0 s left, less than the 10 s kept to answer CloudFormation: raise its Timeout"
    )


def test_the_action_gets_the_remaining_time_less_the_reserve(s3: FakeHTTPServer) -> None:
    budgets: list[float] = []

    def record(request: Request, budget_s: float) -> Outcome:
        budgets.append(budget_s)
        return succeed(request, budget_s)

    answer(aimed_at(load("update"), s3), FakeContext(remaining_ms=300_000), record, default_physical_id="x")
    (budget,) = budgets
    assert 289.0 < budget <= 290.0


def test_an_action_still_running_near_the_end_is_answered_failed_in_time(s3: FakeHTTPServer) -> None:
    release = threading.Event()
    finished: list[dict[str, Any]] = []

    def stuck(request: Request, budget_s: float) -> Outcome:
        release.wait(30)
        return Outcome.success({"Late": "yes"})

    run = threading.Thread(
        target=lambda: finished.append(
            answer(
                aimed_at(load("update"), s3),
                FakeContext(remaining_ms=3_000),
                stuck,
                default_physical_id="x",
                reserve_s=1.0,
                on_timeout="run it by hand",
            )
        )
    )
    started = time.monotonic()
    run.start()
    while not s3.requests and time.monotonic() - started < 10:
        time.sleep(0.02)
    answered_after = time.monotonic() - started
    body = only_put(s3).json()
    assert body["Status"] == "FAILED"
    assert body["Reason"] == "Update did not finish within the 2 s the function had; run it by hand"
    assert 2.0 <= answered_after < 3.0  # 0.5 s before the invocation would end, the action still stuck
    assert run.is_alive()

    release.set()
    run.join(10)
    (summary,) = finished
    assert summary["Status"] == "FAILED" and summary["Data"] == {}
    assert len(s3.requests) == 1  # the late SUCCESS is not sent: CloudFormation reads one answer


def test_a_5xx_from_s3_is_retried_until_the_answer_is_accepted(s3: FakeHTTPServer) -> None:
    s3.fail_next(2, 503)
    summary = answer(aimed_at(load("create"), s3), FakeContext(), succeed, default_physical_id="x")
    assert summary["Delivered"] is True
    assert [r.method for r in s3.requests] == ["PUT"] * 3
    assert len({r.body for r in s3.requests}) == 1


def test_a_refused_answer_is_not_retried(s3: FakeHTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    s3.fail_always(403, "Request has expired")
    event = aimed_at(load("create"), s3)
    summary = answer(event, FakeContext(), succeed, default_physical_id="x")
    assert summary["Delivered"] is False and len(s3.requests) == 1
    assert "HTTP 403" in caplog.text
    assert "X-Amz-Signature" not in caplog.text  # the pre-signed URL is never logged
