"""The boto3 client factory: what each option becomes in botocore, the shared lazy getter, and how a
failed botocore call is told."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from botocore import exceptions as boto_errors

from retrieval_core.clients import aws
from retrieval_core.clients.aws import AwsClientOptions, aws_client, aws_failure, lazy_aws_client


def _config(client: Any) -> tuple[object, ...]:
    config = client.meta.config
    return (config.connect_timeout, config.read_timeout, config.retries, config.max_pool_connections)


def test_options_reach_botocore_and_attempts_count_the_first_one() -> None:
    client = aws_client(
        "dynamodb",
        AwsClientOptions(
            endpoint_url="http://127.0.0.1:1",
            region="eu-west-1",
            connect_timeout_s=1,
            read_timeout_s=2,
            retry_mode="standard",
            attempts=2,
            max_pool_connections=4,
        ),
    )

    assert _config(client) == (1, 2, {"mode": "standard", "total_max_attempts": 2}, 4)
    assert (client.meta.endpoint_url, client.meta.region_name) == ("http://127.0.0.1:1", "eu-west-1")


def test_no_options_leave_botocores_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    assert _config(aws_client("s3")) == _config(boto3.client("s3"))
    assert _config(aws_client("s3", AwsClientOptions(own_session=True))) == _config(boto3.client("s3"))


def test_the_lazy_getter_builds_one_client_for_every_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []

    def slow_build(service: str, options: AwsClientOptions | None = None) -> object:
        time.sleep(0.05)  # long enough for every thread to arrive while the first one builds
        built.append(object())
        return built[-1]

    monkeypatch.setattr(aws, "aws_client", slow_build)
    get = lazy_aws_client("sqs")
    assert built == []  # nothing until the first call

    start = threading.Barrier(8)
    seen: list[object] = []

    def call() -> None:
        start.wait()
        seen.append(get())

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(built) == 1
    assert seen == built * 8


def test_the_lazy_getter_tries_again_after_a_failed_build(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def build(service: str, options: AwsClientOptions | None = None) -> str:
        calls.append(service)
        if len(calls) == 1:
            raise boto_errors.NoRegionError()
        return "client"

    monkeypatch.setattr(aws, "aws_client", build)
    get = lazy_aws_client("bedrock-runtime")

    with pytest.raises(boto_errors.NoRegionError):
        get()
    assert get() == "client"
    assert get() == "client"
    assert calls == ["bedrock-runtime", "bedrock-runtime"]


def _client_error(status: int, code: str, message: str) -> boto_errors.ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return boto_errors.ClientError(response, "InvokeModel")


def test_a_refusal_of_the_credentials_keeps_no_message() -> None:
    failure = aws_failure(_client_error(403, "AccessDeniedException", "User AKIAFAKE is not authorized"))

    assert (failure.kind, failure.credentials_refused, failure.retryable) == ("answered", True, False)
    assert failure.message == ""
    assert failure.details == {"status": 403, "code": "AccessDeniedException"}
    text = failure.answered_message(
        "Label", service="Bedrock", permissions="bedrock:X", answered_by="Bedrock"
    )
    assert "AKIAFAKE" not in text
    assert text == (
        "Label: Bedrock refused the credentials (AccessDeniedException, HTTP 403); check the IAM "
        "permissions (bedrock:X) and model access"
    )
    # The code alone is enough, whatever the status.
    assert aws_failure(_client_error(400, "UnrecognizedClientException", "key AKIAFAKE")).credentials_refused


def test_an_answered_error_keeps_a_bounded_message_and_says_whether_to_retry() -> None:
    throttled = aws_failure(_client_error(429, "ThrottlingException", "slow down " + "x" * 1000))
    invalid = aws_failure(_client_error(400, "ValidationException", "bad input"))

    assert throttled.retryable and not invalid.retryable
    assert throttled.reason == "ThrottlingException (HTTP 429)"
    assert len(throttled.message) == 300
    assert invalid.answered_message(
        "Label", service="Bedrock", permissions="p", answered_by="Rerank", after=" after 2 attempts"
    ) == ("Label: Rerank answered ValidationException (HTTP 400) after 2 attempts: bad input")


@pytest.mark.parametrize(
    ("exc", "kind", "timed_out", "retryable"),
    [
        (boto_errors.NoCredentialsError(), "no-credentials", False, False),
        (boto_errors.ReadTimeoutError(endpoint_url="http://x"), "unreachable", True, True),
        (boto_errors.ConnectTimeoutError(endpoint_url="http://x"), "unreachable", True, True),
        (boto_errors.EndpointConnectionError(endpoint_url="http://x"), "unreachable", False, True),
        (boto_errors.PartialCredentialsError(provider="env", cred_var="x"), "refused-locally", False, False),
    ],
    ids=["no-credentials", "read-timeout", "connect-timeout", "unreachable", "partial-credentials"],
)
def test_botocores_own_errors_are_told_by_kind(
    exc: boto_errors.BotoCoreError, kind: str, timed_out: bool, retryable: bool
) -> None:
    failure = aws_failure(exc)

    assert (failure.kind, failure.timed_out, failure.retryable) == (kind, timed_out, retryable)
    assert failure.code == type(exc).__name__ == failure.reason
