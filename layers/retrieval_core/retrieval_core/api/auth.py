"""Authentication: an ASGI middleware giving each request but health and the docs a grant (docs/security.md).

- With API keys configured (api/keys.py), a request's `x-api-key` is hashed and compared with every
  configured digest in constant time; the matching key's grant applies. Missing and wrong keys get the
  same 401.
- With JWT_AUTH (the template sets it when the HTTP API's JWT authorizer is on), a request without an
  `x-api-key` gets its grant from the claims API Gateway verified and put in the Lambda event: scopes
  from `scope` (retrieval:read ...), stores from JWT_STORES_CLAIM. No claims: 401.
- With neither (local `make serve`), everything is open. The template refuses to deploy that way.

It is a middleware rather than a route dependency so that it runs before anything else looks at the
request: an unauthenticated caller cannot tell a malformed body (422), an oversized one (413) or an
unknown path (404) from a valid request. The docs pages and the OpenAPI document stay public: a
browser cannot send `x-api-key`, and they describe the API without exposing any data. What a grant allows
(scopes, stores) is checked by the services, once the store is known.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval_core.api.api_keys import configured_keys, hash_api_key, keys_configured, match_key
from retrieval_core.api.docs import ERROR_SCHEMA, is_docs_path, with_error_schema
from retrieval_core.api.errors import log_refusal, retrieval_error_response
from retrieval_core.console import is_console_path
from retrieval_core.exceptions import AuthenticationError, RetrievalError
from retrieval_core.grants import OPEN_GRANT, Grant, grant_from_claims
from retrieval_core.observability.debug import DebugLog
from retrieval_core.settings import get_settings

API_KEY_HEADER = "x-api-key"
# API paths anyone may call, with or without keys: load balancers and uptime checks have none. The docs
# pages and their assets are public too (api/docs.py).
PUBLIC_PATHS = frozenset({"/api/v1/health"})
GRANT_STATE = "grant"
RATE_SUBJECT_STATE = "rate_subject"
debug = DebugLog("retrieval_core.api.auth")


async def grant_for(scope: Scope) -> tuple[Grant, str | None]:
    """The grant of one HTTP request, and the id its rate limit counts it under (None: open, not counted).

    AuthenticationError when the request carries no valid credential.
    """
    settings = get_settings()
    presented = Headers(scope=scope).get(API_KEY_HEADER)
    if keys_configured(settings) and (presented is not None or not settings.jwt_auth):
        if settings.api_key_secret_arn:
            # Secrets Manager is a network call on a cache miss: keep it off the event loop.
            keys = await run_in_threadpool(configured_keys, settings)
        else:
            keys = configured_keys(settings)
        grant = match_key(presented, keys)
        if grant is None or presented is None:
            raise AuthenticationError()
        return grant, rate_subject("key", hash_api_key(presented))
    if settings.jwt_auth:
        claims = jwt_claims(scope)
        if claims is None:
            raise AuthenticationError()
        grant = grant_from_claims(claims, settings.jwt_stores_claim)
        return grant, rate_subject("jwt", grant.name)
    return OPEN_GRANT, None


def rate_subject(kind: str, identity: str) -> str:
    """The id a credential's requests are counted under: a hash, so no key (nor digest) reaches DynamoDB."""
    return f"{kind}:{hashlib.sha256(identity.encode('utf-8')).hexdigest()[:32]}"


def jwt_claims(scope: Scope) -> Mapping[str, Any] | None:
    """The claims API Gateway's JWT authorizer verified, from the Lambda event Mangum puts in the scope.

    Only API Gateway writes `requestContext.authorizer`, so a client cannot forge them; outside Lambda
    (uvicorn) there is no event and so no claims.
    """
    event = scope.get("aws.event")
    try:
        claims = event["requestContext"]["authorizer"]["jwt"]["claims"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return claims if isinstance(claims, dict) and claims else None


class ApiKeyAuth:
    """ASGI middleware: 401 (the JSON error body) for any request but health without a valid key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_public(scope.get("path", "")):
            try:
                grant, subject = await grant_for(scope)
            except RetrievalError as exc:
                if exc.status_code == 401:
                    log_refusal(scope.get("method", ""), scope.get("path", ""), exc, None)
                await retrieval_error_response(exc)(scope, receive, send)
                return
            # request.state reads scope["state"]; routes take the grant through GrantDep.
            state = scope.setdefault("state", {})
            state[GRANT_STATE] = grant
            state[RATE_SUBJECT_STATE] = subject
            debug(
                "auth: %s %r granted to %s (scopes %s)",
                scope.get("method"),
                scope.get("path"),
                grant.name,
                ",".join(sorted(grant.scopes)),
            )
        await self.app(scope, receive, send)


def is_public(path: str) -> bool:
    """Whether `path` needs no credential: health, the API docs and the console with their assets."""
    return path in PUBLIC_PATHS or is_docs_path(path) or is_console_path(path)


def current_grant(request: Request) -> Grant:
    """The grant the middleware attached to this request (a public path has none: nothing to grant)."""
    grant = request.scope.get("state", {}).get(GRANT_STATE)
    if not isinstance(grant, Grant):
        raise AuthenticationError()
    return grant


def document_api_key(app: FastAPI) -> None:
    """Describe the `x-api-key` header, and the 401, 403 and 413 answers, in `app`'s OpenAPI document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = with_error_schema(build())
        schema.setdefault("components", {}).setdefault("securitySchemes", {})["ApiKey"] = {
            "type": "apiKey",
            "in": "header",
            "name": API_KEY_HEADER,
            "description": "Required on every route but health when the service is configured with API "
            "keys (API_KEYS, API_KEY_HASHES or API_KEY_SECRET_ARN) and the request carries no JWT; "
            "ignored otherwise. Each key carries scopes (read, write, admin) and stores.",
        }
        error = {"application/json": {"schema": ERROR_SCHEMA}}
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                if "requestBody" in operation:
                    responses.setdefault("413", {"description": "Request body too large", "content": error})
                if path in PUBLIC_PATHS:
                    continue
                operation["security"] = [{"ApiKey": []}, {}]  # {}: no key needed when none is configured
                responses.setdefault("401", {"description": "Missing or invalid API key", "content": error})
                responses.setdefault(
                    "403", {"description": "The credential lacks the scope needed here", "content": error}
                )
                responses.setdefault("503", {"description": "API keys could not be read", "content": error})
                responses.setdefault(
                    "429",
                    {"description": "Over the credential's rate limit; see Retry-After", "content": error},
                )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
