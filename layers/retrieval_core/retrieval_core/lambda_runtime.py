"""What every Lambda handler of the layer shares: when to trace, what to patch, the SnapStart hook.

Kept apart from the HTTP handler factory so that a handler without HTTP (the queue function) does
not import FastAPI and Mangum at cold start.
"""

from __future__ import annotations

import os
import random

from . import runtime
from .db.credentials import forget_cached_secrets
from .settings import Settings


def tracing_enabled() -> bool:
    """True where Powertools would trace: inside Lambda, not under `sam local`, not disabled by env."""
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in ("1", "true", "yes", "on"):
        return False
    return "LAMBDA_TASK_ROOT" in os.environ and "AWS_SAM_LOCAL" not in os.environ


def traced_modules(settings: Settings) -> tuple[str, ...]:
    """The libraries the X-Ray SDK should instrument for this configuration.

    Only what the function will call: patching a library imports it, and patching everything (the
    Powertools default) would import requests, sqlite3 and more at cold start for nothing.
    """
    modules = []
    if settings.embedding_provider in ("openai", "gemini"):
        modules.append("httpx")
    aws_credentials = settings.database_url is None and (
        settings.database_secret_arn or settings.database_iam_auth
    )
    if settings.embedding_provider == "bedrock" or aws_credentials:
        modules.append("botocore")
    return tuple(modules)


def after_database_failure() -> None:
    """The next request reconnects with a freshly read secret or a new IAM token.

    A rotated password or an expired token must not keep this instance failing until it is recycled.
    """
    forget_cached_secrets()
    runtime.reset_service()


def _after_snapshot_restore() -> None:
    # Every instance restored from one snapshot would otherwise draw the same retry jitter.
    random.seed()
    forget_cached_secrets()
    runtime.reset_service()


def _register_snapstart_hooks() -> None:
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        # Only Lambda's managed Python runtimes ship snapshot_restore_py; elsewhere there is no snapshot.
        return
    register_after_restore(_after_snapshot_restore)


_register_snapstart_hooks()
