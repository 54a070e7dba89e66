"""Secrets Manager values, read through the Powertools parameters utility with a cache.

boto3 and the utility are imported on first use, never at import time. No message raised here
quotes a secret value.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from .exceptions import RetrievalError

# Seconds a fetched secret is reused. A rotated secret reaches a warm instance within this time
# (or at once after a SnapStart restore, which clears the cache).
SECRET_MAX_AGE_S = 300


def read_secret(secret_arn: str, failure: Callable[[str], RetrievalError]) -> str:
    """The secret's string value, cached SECRET_MAX_AGE_S.

    When it cannot be read, raises `failure(code)`, `code` being the AWS error code (or the error's
    type): each caller says what the missing secret means for its request.
    """
    from aws_lambda_powertools.utilities.parameters import GetParameterError, get_secret

    try:
        value = get_secret(secret_arn, max_age=SECRET_MAX_AGE_S)
    except GetParameterError as exc:
        raise failure(_aws_error_code(exc)) from exc
    return value if isinstance(value, str) else bytes(value).decode("utf-8")


def forget_cached_secrets() -> None:
    """Drop cached secret values so the next use reads them again (e.g. after a SnapStart restore)."""
    # Only when the parameters utility was used: importing it would import boto3 for nothing.
    if "aws_lambda_powertools.utilities.parameters" in sys.modules:
        from aws_lambda_powertools.utilities.parameters import clear_caches

        clear_caches()  # type: ignore[no-untyped-call]


def _aws_error_code(exc: BaseException) -> str:
    # Powertools re-raises the botocore error as GetParameterError(str(error)) without `from`;
    # the original is still the implicit __context__.
    cause = exc.__cause__ or exc.__context__
    response = getattr(cause, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if isinstance(code, str) and code:
            return code
    return type(cause).__name__ if cause is not None else "unknown error"
