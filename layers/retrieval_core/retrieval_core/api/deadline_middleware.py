"""ASGI middleware: each HTTP request is served within its deadline (see request_deadline)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval_core.clients.deadline import budget_s, deadline_of, lambda_remaining_s
from retrieval_core.settings import get_settings


class RequestDeadlineMiddleware:
    """Starts the request's deadline: REQUEST_DEADLINE_S, or less when the Lambda has less time left."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Mangum puts the Lambda context in the scope; locally there is none.
        remaining_s = lambda_remaining_s(scope.get("aws.context"))
        with deadline_of(budget_s(get_settings().request_deadline_s, remaining_s)):
            await self.app(scope, receive, send)
