"""Apply the per-credential rate limit to every authenticated request (docs/operations.md "Rate limits").

An ASGI middleware placed right after authentication: it counts every request that carries a
credential (API key or JWT), whatever its route, before the body is read; health and the API docs are
not counted, nor the open mode (no keys, no JWT), which has no caller to tell apart. A batch counts one
request per item: the route charges the other items (`charge`) once it knows how many there are.
"""

from __future__ import annotations

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval_core.api.auth import GRANT_STATE, RATE_SUBJECT_STATE, is_public
from retrieval_core.api.errors import retrieval_error_response
from retrieval_core.exceptions import RetrievalError
from retrieval_core.grants import Grant
from retrieval_core.ratelimit.limiter import get_rate_limiter


class RateLimitMiddleware:
    """ASGI middleware answering 429 (the JSON error body, with Retry-After) over a credential's limit."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_public(scope.get("path", "")):
            try:
                await _take(scope, 1)
            except RetrievalError as exc:
                await retrieval_error_response(exc)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def charge(request: Request, cost: int) -> None:
    """Take `cost` more requests from the caller's limit (a batch's items beyond the first); 429 if none."""
    await _take(request.scope, cost)


async def _take(scope: Scope, cost: int) -> None:
    state = scope.get("state", {})
    subject = state.get(RATE_SUBJECT_STATE)
    grant = state.get(GRANT_STATE)
    if subject is None or not isinstance(grant, Grant) or cost <= 0:
        return
    limiter = get_rate_limiter()
    if limiter.shared:
        # A DynamoDB round trip: off the event loop.
        await run_in_threadpool(limiter.check, subject, grant.rate_limit, cost)
    else:
        limiter.check(subject, grant.rate_limit, cost)
