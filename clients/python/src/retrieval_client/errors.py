"""What the client raises: an error answer of the service, a time-out, or a connection that failed."""

from __future__ import annotations

from typing import Any


class RetrievalError(Exception):
    """Base class of every error this client raises."""


class RetrievalApiError(RetrievalError):
    """The service answered with an error: `{"error": {"code", "message", "details"}}`.

    Each code has its subclass in `retrieval_client.error_codes` (`StoreNotFoundError` for
    `store_not_found`, ...); a code this client does not know yet is raised as RetrievalApiError itself.
    """

    code: str = "unknown"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        request_id: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code
        self.details = details or {}
        self.request_id = request_id
        self.retry_after_s = retry_after_s

    def __str__(self) -> str:
        request = f", request {self.request_id}" if self.request_id else ""
        return f"{self.code} (HTTP {self.status}{request}): {self.message}"


class RetrievalTimeoutError(RetrievalError):
    """No answer within the time-out of an attempt, or the retries would outlast the total deadline."""


class RetrievalConnectionError(RetrievalError):
    """The service could not be reached (refused, reset, DNS) on every attempt."""
