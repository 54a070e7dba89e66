"""The CloudFormation custom resource protocol, for a provider that is a Lambda function.

CloudFormation invokes the function with a request (Create, Update or Delete), then waits for exactly
one answer: a JSON document PUT to the request's pre-signed S3 URL (ResponseURL). Without an answer
the stack waits for the resource's ServiceTimeout, an hour by default; so `answer` reports FAILED on
its own shortly before Lambda would end the invocation, whatever the provider is still doing.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from retrieval_core.clients.retry import Deadline, backoff_delay, is_retryable_status
from retrieval_core.exceptions import RetrievalError
from retrieval_core.lambdas.exceptions import CustomResourceEventError

logger = logging.getLogger(__name__)

RequestType = Literal["Create", "Update", "Delete"]
Status = Literal["SUCCESS", "FAILED"]
REQUEST_TYPES: tuple[RequestType, ...] = ("Create", "Update", "Delete")
# CloudFormation refuses a larger response body.
MAX_BODY_BYTES = 4096
# Seconds of the function's time kept for answering: the provider's budget ends this long before Lambda
# would end the invocation.
RESERVE_S = 10.0
_MIN_BUDGET_S = 1.0
_TRUNCATED = " [...]"
_SEND_ATTEMPTS = 4
_SEND_TIMEOUT_S = 10.0
_REQUIRED_FIELDS = ("RequestType", "ResponseURL", "StackId", "RequestId", "LogicalResourceId", "ResourceType")


@dataclass(frozen=True)
class Request:
    """A custom resource request as CloudFormation sends it."""

    request_type: RequestType
    response_url: str
    stack_id: str
    request_id: str
    logical_resource_id: str
    resource_type: str
    physical_resource_id: str | None  # on Update and Delete: the one the previous answer gave
    properties: Mapping[str, Any]
    old_properties: Mapping[str, Any]  # on Update: the properties before it


@dataclass(frozen=True)
class Outcome:
    """What the provider did: SUCCESS with Data (strings, for Fn::GetAtt), or FAILED with a Reason."""

    status: Status
    reason: str = ""
    data: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def success(cls, data: Mapping[str, str] | None = None) -> Outcome:
        """A SUCCESS answer carrying `data`."""
        return cls("SUCCESS", "", dict(data or {}))

    @classmethod
    def failure(cls, reason: str) -> Outcome:
        """A FAILED answer; CloudFormation shows `reason` in the stack's events."""
        return cls("FAILED", reason or "failed without a reason")


# The provider: given the request and the seconds it may take, what it did.
Action = Callable[[Request, float], Outcome]


def parse_request(event: Any) -> Request:
    """The request in `event`; CustomResourceEventError naming what is missing or wrong."""
    if not isinstance(event, Mapping):
        raise CustomResourceEventError(f"a custom resource request is an object, not {type(event).__name__}")
    missing = [name for name in _REQUIRED_FIELDS if not isinstance(event.get(name), str) or not event[name]]
    if missing:
        raise CustomResourceEventError(
            f"the custom resource request lacks {', '.join(missing)}", {"missing": missing}
        )
    request_type = event["RequestType"]
    if request_type not in REQUEST_TYPES:
        raise CustomResourceEventError(
            f"RequestType is Create, Update or Delete, not {request_type[:40]!r}", {"field": "RequestType"}
        )
    if response_url_of(event) is None:
        raise CustomResourceEventError("ResponseURL is not an http(s) URL", {"field": "ResponseURL"})
    physical = event.get("PhysicalResourceId")
    if request_type != "Create" and not (isinstance(physical, str) and physical):
        raise CustomResourceEventError(
            f"the {request_type} request lacks PhysicalResourceId", {"missing": ["PhysicalResourceId"]}
        )
    properties, old_properties = event.get("ResourceProperties", {}), event.get("OldResourceProperties", {})
    for name, value in (("ResourceProperties", properties), ("OldResourceProperties", old_properties)):
        if not isinstance(value, Mapping):
            raise CustomResourceEventError(
                f"{name} is an object, not {type(value).__name__}", {"field": name}
            )
    return Request(
        request_type=request_type,
        response_url=event["ResponseURL"],
        stack_id=event["StackId"],
        request_id=event["RequestId"],
        logical_resource_id=event["LogicalResourceId"],
        resource_type=event["ResourceType"],
        physical_resource_id=physical if isinstance(physical, str) and physical else None,
        properties=properties,
        old_properties=old_properties,
    )


def response_url_of(event: Any) -> str | None:
    """The event's ResponseURL when it is a usable http(s) URL, else None (nobody can be answered)."""
    url = event.get("ResponseURL") if isinstance(event, Mapping) else None
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    return url if parts.scheme in ("https", "http") and parts.hostname else None


def physical_resource_id(event: Any, default: str) -> str:
    """The PhysicalResourceId CloudFormation sent (Update, Delete), else `default`.

    Never a new one: an Update answered with another id is a replacement, and CloudFormation then
    sends a Delete for the old id.
    """
    sent = event.get("PhysicalResourceId") if isinstance(event, Mapping) else None
    return sent if isinstance(sent, str) and sent else default


def response_body(event: Any, outcome: Outcome, physical_id: str) -> bytes:
    """The JSON answer to `event`, under MAX_BODY_BYTES: a Reason too long is cut, marked with [...]."""
    echoed = {
        name: value
        for name in ("StackId", "RequestId", "LogicalResourceId")
        if isinstance(event, Mapping) and isinstance(value := event.get(name), str)
    }
    body: dict[str, Any] = {
        "Status": outcome.status,
        "PhysicalResourceId": physical_id,
        **echoed,
        "NoEcho": False,
        "Data": dict(outcome.data),
    }
    if not outcome.reason:
        return json.dumps(body).encode()

    def with_reason(reason: str) -> bytes:
        return json.dumps({**body, "Reason": reason}).encode()

    encoded = with_reason(outcome.reason)
    if len(encoded) <= MAX_BODY_BYTES:
        return encoded
    # A character costs 1 to 6 bytes in JSON (escapes): search the longest start of the reason that fits.
    low, high = 0, len(outcome.reason)
    while low < high:
        middle = (low + high + 1) // 2
        if len(with_reason(outcome.reason[:middle] + _TRUNCATED)) <= MAX_BODY_BYTES:
            low = middle
        else:
            high = middle - 1
    return with_reason(outcome.reason[:low] + _TRUNCATED)


def send_response(url: str, body: bytes, deadline: Deadline, attempts: int = _SEND_ATTEMPTS) -> bool:
    """PUT `body` to the pre-signed `url`; True once accepted. Connection errors and 5xx are retried."""
    # The URL is a credential for this one answer: logs name its host only.
    host = urlsplit(url).hostname
    for attempt in range(1, attempts + 1):
        timeout_s = min(_SEND_TIMEOUT_S, max(1.0, deadline.remaining_s() or _SEND_TIMEOUT_S))
        # The pre-signed URL was signed without a content type: send an empty one, not urllib's default.
        # S310: only http(s) URLs get here (response_url_of).
        headers = {"Content-Type": "", "Content-Length": str(len(body))}
        request = urllib.request.Request(url, data=body, method="PUT", headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
                response.read()
            return True
        except urllib.error.HTTPError as exc:
            exc.close()
            retryable, problem = is_retryable_status(exc.code), f"HTTP {exc.code}"
        except OSError as exc:  # URLError, timeouts, resets
            retryable, problem = True, type(exc).__name__
        delay = backoff_delay(attempt, 0.5, 4.0)
        left = deadline.remaining_s()
        if not retryable or attempt == attempts or (left is not None and left < delay + 1.0):
            logger.error("could not deliver the custom resource response to %s: %s", host, problem)
            return False
        logger.warning("custom resource response to %s failed (%s); retrying in %.1f s", host, problem, delay)
        time.sleep(delay)
    return False


def failure_reason(exc: BaseException, log_stream: str | None) -> str:
    """A Reason for `exc`: its type and, for our own errors (written to be shown), its message."""
    # Any other exception's message could quote anything, a connection string included.
    message = exc.message if isinstance(exc, RetrievalError) else "unexpected error"
    where = f" (details: log stream {log_stream})" if log_stream else ""
    return f"{type(exc).__name__}: {message}{where}"


class _Answer:
    """Sends the one answer to a request: the first outcome offered wins, later ones are only logged."""

    def __init__(self, event: Any, url: str, physical_id: str, lambda_time: Deadline) -> None:
        self._event, self._url, self._physical_id = event, url, physical_id
        self._lambda_time = lambda_time
        # Held while sending, so that the invocation cannot return (and Lambda freeze the process)
        # while the timeout guard's PUT is on the wire.
        self._lock = threading.Lock()
        self._sent: Outcome | None = None
        self._delivered = False

    def send(self, outcome: Outcome) -> dict[str, Any]:
        with self._lock:
            if self._sent is None:
                self._sent = outcome
                body = response_body(self._event, outcome, self._physical_id)
                self._delivered = send_response(self._url, body, self._lambda_time)
                details = {"reason": outcome.reason, "data": dict(outcome.data), "delivered": self._delivered}
                logger.info("answered %s", outcome.status, extra=details)
            elif outcome != self._sent:
                logger.warning("already answered %s; not sending %s", self._sent.status, outcome.status)
            sent = self._sent
        summary: dict[str, Any] = {
            "Status": sent.status,
            "PhysicalResourceId": self._physical_id,
            "Data": dict(sent.data),
            "Delivered": self._delivered,
        }
        if sent.reason:
            summary["Reason"] = sent.reason
        return summary


def answer(
    event: Any,
    context: Any,
    action: Action,
    *,
    default_physical_id: str,
    reserve_s: float = RESERVE_S,
    on_timeout: str = "",
) -> dict[str, Any]:
    """Run `action` for the request in `event` and answer CloudFormation exactly once.

    The action gets the function's remaining time less `reserve_s`; should it still be running
    `reserve_s / 2` before Lambda ends the invocation, FAILED is sent (its Reason ends with
    `on_timeout`). Returns a summary of the answer. Raises CustomResourceEventError only when the event
    has no usable ResponseURL: then nobody can be answered.
    """
    url = response_url_of(event)
    if url is None:
        raise CustomResourceEventError("the event has no http(s) ResponseURL: there is nobody to answer")
    lambda_time = Deadline(context.get_remaining_time_in_millis() / 1000)
    reply = _Answer(event, url, physical_resource_id(event, default_physical_id), lambda_time)
    log_stream = getattr(context, "log_stream_name", None)
    try:
        request = parse_request(event)
    except CustomResourceEventError as exc:
        logger.error("malformed custom resource request: %s", exc.message)
        return reply.send(Outcome.failure(failure_reason(exc, log_stream)))

    left_s = lambda_time.remaining_s() or 0.0
    budget_s = left_s - reserve_s
    if budget_s < _MIN_BUDGET_S:
        return reply.send(
            Outcome.failure(
                f"the function had {left_s:.1f} s left, less than the {reserve_s:.0f} s kept to answer "
                "CloudFormation: raise its Timeout"
            )
        )
    timed_out = Outcome.failure(
        f"{request.request_type} did not finish within the {budget_s:.0f} s the function had"
        f"{f'; {on_timeout}' if on_timeout else ''}"
    )
    guard = threading.Timer(budget_s + reserve_s / 2, reply.send, args=(timed_out,))
    guard.daemon = True
    guard.start()
    try:
        outcome = _run(action, request, budget_s, log_stream)
    finally:
        guard.cancel()
    return reply.send(outcome)


def _run(action: Action, request: Request, budget_s: float, log_stream: str | None) -> Outcome:
    try:
        return action(request, budget_s)
    except Exception as exc:
        # The one place that catches everything: whatever failed, CloudFormation must hear FAILED now,
        # not after its timeout. The traceback goes to the log; the Reason gets the type and a safe message.
        logger.exception("%s of %s failed", request.request_type, request.logical_resource_id)
        return Outcome.failure(failure_reason(exc, log_stream))
