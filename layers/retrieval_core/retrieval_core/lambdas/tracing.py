"""X-Ray tracing of a Lambda handler, paid for when it is used rather than at cold start.

An on-demand cold start is awaited by the request that caused it, so there the X-Ray SDK is loaded by
the first invocation, before it runs the handler, and each traced library is patched when something
first imports it (botocore with boto3, httpx with the embedder's client), before anything can call it.
Where the environment is initialised ahead of any request (a SnapStart snapshot, provisioned
concurrency), nothing waits on the init: all of it is done there, as Powertools does it.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

from retrieval_core.lambdas.import_hooks import when_imported

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]

# The module whose import lets the X-Ray SDK patch a library: its patch of botocore wraps
# botocore.client's BaseClient; the one of httpx replaces classes of the httpx package itself.
PATCHED_ON_IMPORT_OF = {"botocore": "botocore.client", "httpx": "httpx"}

# AWS_LAMBDA_INITIALIZATION_TYPE values for which the init phase runs before any request arrives.
INITIALISED_AHEAD = frozenset({"snap-start", "provisioned-concurrency"})


def initialised_ahead_of_requests() -> bool:
    """True under SnapStart and provisioned concurrency: no request waits on this init."""
    return os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand") in INITIALISED_AHEAD


def traced(invoke: LambdaHandler, service: str, modules: tuple[str, ...]) -> LambdaHandler:
    """`invoke` in an X-Ray subsegment (`## <name>`), with `modules` patched before their first use."""
    if initialised_ahead_of_requests():
        return _capture(invoke, service, modules, patch_now=True)
    for module in modules:
        when_imported(PATCHED_ON_IMPORT_OF.get(module, module), _patcher(module))
    lock = threading.Lock()
    built: list[LambdaHandler] = []

    @functools.wraps(invoke)
    def traced_on_first_call(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if not built:
            with lock:
                if not built:
                    built.append(_capture(invoke, service, modules, patch_now=False))
        return built[0](event, context)

    return traced_on_first_call


def _capture(
    invoke: LambdaHandler, service: str, modules: tuple[str, ...], *, patch_now: bool
) -> LambdaHandler:
    from aws_lambda_powertools.tracing import Tracer

    tracer = Tracer(service=service, auto_patch=patch_now and bool(modules), patch_modules=modules or None)
    # Responses and replies carry document text: keep them out of trace metadata.
    handler: LambdaHandler = tracer.capture_lambda_handler(invoke, capture_response=False)
    return handler


def _patcher(module: str) -> Callable[[], None]:
    def patch() -> None:
        from aws_xray_sdk.core import patch as xray_patch

        xray_patch((module,))

    return patch
