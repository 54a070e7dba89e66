"""Secret values from Secrets Manager or SSM Parameter Store, read through the Powertools parameters
utility with one cache.

boto3 and the utility are imported on first use, never at import time. No message raised here
quotes a secret value.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from retrieval_core.exceptions import ConfigurationError, RetrievalError

# Seconds a fetched secret is reused. A rotated secret reaches a warm instance within this time
# (or at once after a SnapStart restore, which clears the cache).
SECRET_MAX_AGE_S = 300

SecretService = Literal["secretsmanager", "ssm"]

# arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME and arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME,
# in every partition (aws, aws-cn, aws-us-gov, aws-iso-b, ...).
_ARN = re.compile(
    r"arn:aws(?:-[a-z]+)*:(?:(?P<secretsmanager>secretsmanager):[a-z0-9-]+:\d{12}:secret:"
    r"|(?P<ssm>ssm):[a-z0-9-]+:\d{12}:parameter/)\S+"
)


# botocore logs every response body at DEBUG, and a secret's holds its value: that record is dropped
# while this thread reads a secret.
_BOTOCORE_BODY_LOGGER = "botocore.parsers"
_reading = threading.local()


class _SecretBodyFilter(logging.Filter):
    """Drops botocore's debug record of a response body received while this thread reads a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(_reading, "secret", False) and str(record.msg).startswith("Response body"))


_SECRET_BODY_FILTER = _SecretBodyFilter()


def secret_service(arn: str) -> SecretService | None:
    """Which service holds the value `arn` names: a Secrets Manager secret, an SSM parameter, or neither."""
    match = _ARN.fullmatch(arn)
    if match is None:
        return None
    return "secretsmanager" if match["secretsmanager"] else "ssm"


def read_secret(secret_arn: str, failure: Callable[[str], RetrievalError], *, variable: str) -> str:
    """The string value of the secret or parameter `secret_arn` names, cached SECRET_MAX_AGE_S.

    `variable` is the setting `secret_arn` came from: an ARN of neither kind is a ConfigurationError
    naming it (not the value). When the value cannot be read, raises `failure(code)`, `code` being the
    AWS error code (or the error's type): each caller says what the missing secret means for its request.
    An SSM parameter is read by its ARN (GetParameter takes one) and decrypted (a SecureString).
    """
    service = secret_service(secret_arn)
    if service is None:
        raise ConfigurationError(
            f"{variable} is neither a Secrets Manager secret ARN (arn:aws:secretsmanager:...:secret:...) "
            "nor an SSM parameter ARN (arn:aws:ssm:...:parameter/...)"
        )
    from aws_lambda_powertools.utilities.parameters import GetParameterError, get_parameter, get_secret

    try:
        with _response_bodies_unlogged():
            if service == "ssm":
                value: str | bytes = get_parameter(secret_arn, decrypt=True, max_age=SECRET_MAX_AGE_S)
            else:
                value = get_secret(secret_arn, max_age=SECRET_MAX_AGE_S)
    except GetParameterError as exc:
        raise failure(_aws_error_code(exc)) from exc
    return value if isinstance(value, str) else bytes(value).decode("utf-8")


def forget_cached_secrets() -> None:
    """Drop cached secrets and parameters: the next use reads them again (e.g. after a SnapStart restore)."""
    # Only when the parameters utility was used: importing it would import boto3 for nothing.
    if "aws_lambda_powertools.utilities.parameters" in sys.modules:
        from aws_lambda_powertools.utilities.parameters import clear_caches

        clear_caches()  # type: ignore[no-untyped-call]


@contextmanager
def _response_bodies_unlogged() -> Iterator[None]:
    logging.getLogger(_BOTOCORE_BODY_LOGGER).addFilter(_SECRET_BODY_FILTER)  # once: addFilter dedupes
    _reading.secret = True
    try:
        yield
    finally:
        _reading.secret = False


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
