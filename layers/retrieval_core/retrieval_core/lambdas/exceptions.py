"""Errors of the Lambda plumbing: queued jobs' replies and duplicates, custom resource requests."""

from __future__ import annotations

from retrieval_core.exceptions import InvalidRequestError, RetrievalError


class CustomResourceEventError(InvalidRequestError):
    """A CloudFormation custom resource request that lacks a field or has one of the wrong type."""

    code = "invalid_custom_resource_request"


class ReplyToNotAllowedError(RetrievalError):
    """A queued job names a reply queue that is not on the function's allow-list."""

    status_code = 403
    code = "reply_to_not_allowed"

    def __init__(self) -> None:
        super().__init__(
            "replyTo: not an allowed reply queue; the reply went to the results queue instead",
            {
                "errors": [
                    {"field": "replyTo", "message": "not an allowed reply queue", "type": "not_allowed"}
                ]
            },
        )


class ReplyDeliveryError(RetrievalError):
    """SQS refused or did not answer when a reply was sent. Transient: the job is retried."""

    status_code = 502
    code = "reply_delivery_failed"


class JobInProgressError(RetrievalError):
    """Another invocation is answering the same requestId right now. Transient: retried later."""

    status_code = 503
    code = "job_in_progress"
