"""The one way the core builds a boto3 client, and what a failed botocore call says.

boto3 and botocore are imported when the first client is built or the first failure is read, never at
import time: every Lambda handler imports this module, and boto3 alone costs a cold start hundreds of
milliseconds. Each caller names its own endpoint, timeouts and retries: they were chosen per use (a cache
that fails open wants short timeouts; a handler replying to SQS wants AWS's retries).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from retrieval_core.clients.retry import MAX_DETAIL_CHARS, is_retryable_aws_error

if TYPE_CHECKING:
    from botocore.exceptions import BotoCoreError, ClientError

RetryMode = Literal["legacy", "standard", "adaptive"]
FailureKind = Literal["no-credentials", "answered", "unreachable", "refused-locally"]

# Codes AWS answers a signature or permission refusal with, whatever the HTTP status.
_CREDENTIALS_REFUSED_CODES = frozenset({"AccessDeniedException", "UnrecognizedClientException"})


@dataclass(frozen=True, kw_only=True)
class AwsClientOptions:
    """How one client reaches its service. None: botocore's default (or what the environment sets)."""

    endpoint_url: str | None = None
    region: str | None = None
    connect_timeout_s: float | None = None
    read_timeout_s: float | None = None
    retry_mode: RetryMode | None = None
    # Every attempt, the first included (botocore's `total_max_attempts`; its `max_attempts` counts
    # only the retries).
    attempts: int | None = None
    max_pool_connections: int | None = None
    # A boto3 session of the client's own instead of boto3's default one, which is not safe to build
    # clients from in several threads at once.
    own_session: bool = False


def fail_open_options(endpoint_url: str | None) -> AwsClientOptions:
    """For calls whose failure lets the request through (the cache, the rate-limit counters): 1 s
    timeouts and one retry, since a slow answer would cost more than a missed one."""
    return AwsClientOptions(
        endpoint_url=endpoint_url, connect_timeout_s=1, read_timeout_s=1, retry_mode="standard", attempts=2
    )


def handler_options(endpoint_url: str | None, read_timeout_s: float) -> AwsClientOptions:
    """For the Lambda handlers' own calls (SQS replies, S3 reads, idempotency records): 2 s to connect,
    AWS's standard retries, 4 attempts in all."""
    return AwsClientOptions(
        endpoint_url=endpoint_url,
        connect_timeout_s=2,
        read_timeout_s=read_timeout_s,
        retry_mode="standard",
        attempts=4,
    )


def own_retries_options(
    region: str | None, endpoint_url: str | None, timeout_s: float, max_pool_connections: int | None = None
) -> AwsClientOptions:
    """For a provider client that retries on its own (Bedrock embeddings and rerank): one attempt per
    call, `timeout_s` to connect and to read, a session of its own."""
    return AwsClientOptions(
        region=region,
        endpoint_url=endpoint_url,
        connect_timeout_s=timeout_s,
        read_timeout_s=timeout_s,
        attempts=1,
        max_pool_connections=max_pool_connections,
        own_session=True,
    )


def aws_client(service: str, options: AwsClientOptions | None = None) -> Any:
    """A boto3 client for `service` (e.g. "dynamodb"), configured by `options`; boto3 imported here."""
    import boto3
    from botocore.config import Config

    options = options or AwsClientOptions()
    settings: dict[str, Any] = {}
    if options.connect_timeout_s is not None:
        settings["connect_timeout"] = options.connect_timeout_s
    if options.read_timeout_s is not None:
        settings["read_timeout"] = options.read_timeout_s
    if options.max_pool_connections is not None:
        settings["max_pool_connections"] = options.max_pool_connections
    retries: dict[str, Any] = {}
    if options.retry_mode is not None:
        retries["mode"] = options.retry_mode
    if options.attempts is not None:
        retries["total_max_attempts"] = options.attempts
    if retries:
        settings["retries"] = retries
    # Typed loosely: the per-service stubs take a literal service name, and most are not installed.
    maker: Any = boto3.session.Session() if options.own_session else boto3
    return maker.client(
        service,
        region_name=options.region,
        endpoint_url=options.endpoint_url,
        config=Config(**settings) if settings else None,
    )


def lazy_aws_client(service: str, options: AwsClientOptions | None = None) -> Callable[[], Any]:
    """A getter of one client, built (and boto3 imported) on its first call, then shared by every thread.

    A failed build (no region, say) is not kept: the next call tries again.
    """
    lock = threading.Lock()
    built: list[Any] = []

    def get() -> Any:
        with lock:
            if not built:
                built.append(aws_client(service, options))
            return built[0]

    return get


@dataclass(frozen=True)
class AwsFailure:
    """A failed botocore call, told without anything that could name a credential.

    `kind`: no credentials found; the service answered with an error; it could not be reached (or did
    not answer in time); or botocore refused to send the call (partial credentials, a bad parameter).
    `code` is the AWS error code when the service answered, the exception's type name otherwise.
    """

    kind: FailureKind
    code: str
    status: int = 0
    # The service's own message, at most MAX_DETAIL_CHARS; empty when it refused the credentials,
    # since AWS messages on auth failures can name the access key id.
    message: str = ""
    timed_out: bool = False

    @property
    def retryable(self) -> bool:
        """Worth another attempt: throttled, a server error or transient fault, or not reached."""
        if self.kind == "answered":
            return is_retryable_aws_error(self.status, self.code)
        return self.kind == "unreachable"

    @property
    def credentials_refused(self) -> bool:
        """The service refused the signature or the permissions."""
        return self.kind == "answered" and _refuses_credentials(self.status, self.code)

    @property
    def reason(self) -> str:
        """The code, and the HTTP status when the service answered."""
        return f"{self.code} (HTTP {self.status})" if self.kind == "answered" else self.code

    @property
    def details(self) -> dict[str, Any]:
        """The error details a provider's error carries."""
        return {"status": self.status, "code": self.code}

    def answered_message(
        self, label: str, *, service: str, permissions: str, answered_by: str, after: str = ""
    ) -> str:
        """What an answered error means for `label`: a credentials refusal names the IAM `permissions`."""
        if self.credentials_refused:
            return (
                f"{label}: {service} refused the credentials ({self.code}, HTTP {self.status}); check the "
                f"IAM permissions ({permissions}) and model access"
            )
        return f"{label}: {answered_by} answered {self.code} (HTTP {self.status}){after}: {self.message}"


def aws_failure(exc: BotoCoreError | ClientError) -> AwsFailure:
    """What a botocore exception says about the call that raised it."""
    from botocore import exceptions as boto_errors

    name = type(exc).__name__
    if isinstance(exc, boto_errors.NoCredentialsError):
        return AwsFailure("no-credentials", name)
    if isinstance(exc, boto_errors.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "Unknown"))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if _refuses_credentials(status, code):
            return AwsFailure("answered", code, status)
        return AwsFailure("answered", code, status, str(error.get("Message", ""))[:MAX_DETAIL_CHARS])
    if isinstance(exc, boto_errors.ConnectionError | boto_errors.HTTPClientError):
        timed_out = isinstance(exc, boto_errors.ReadTimeoutError | boto_errors.ConnectTimeoutError)
        return AwsFailure("unreachable", name, timed_out=timed_out)
    return AwsFailure("refused-locally", name)


def _refuses_credentials(status: int, code: str) -> bool:
    return status in (401, 403) or code in _CREDENTIALS_REFUSED_CODES
