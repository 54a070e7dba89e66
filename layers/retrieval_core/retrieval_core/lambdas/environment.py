"""Facts about the process the code runs in."""

from __future__ import annotations

import os


def in_lambda() -> bool:
    """True inside an AWS Lambda execution environment."""
    return "AWS_LAMBDA_FUNCTION_NAME" in os.environ
