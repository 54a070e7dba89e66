"""API-key authentication: an ASGI middleware guarding every route but health.

Keys are configured as SHA-256 hex digests (API_KEY_HASHES, and/or a Secrets Manager secret named by
API_KEY_SECRET_ARN), so neither the environment nor the secret holds a usable key. A request's
`x-api-key` is hashed and compared with every configured digest in constant time, without stopping at
the first match, so timing reveals neither whether nor which key matched. Missing and wrong keys get the
same 401. With no keys configured the API is public (or guarded by the HTTP API's JWT authorizer).

It is a middleware rather than a route dependency so that it runs before anything else looks at the
request: an unauthenticated caller cannot tell a malformed body (422), an oversized one (413) or an
unknown path (404) from a valid request, and the OpenAPI document is guarded too.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..aws_secrets import read_secret
from ..exceptions import (
    AuthenticationError,
    AuthenticationUnavailableError,
    ConfigurationError,
    RetrievalError,
)
from ..grants import OPEN_GRANT, Grant
from ..settings import Settings, get_settings
from .errors import retrieval_error_response

API_KEY_HEADER = "x-api-key"
# Paths anyone may call, with or without keys: load balancers and uptime checks have none.
PUBLIC_PATHS = frozenset({"/api/v1/health"})
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def hash_api_key(key: str) -> str:
    """The SHA-256 hex digest to configure for `key` (what `retrieval hash-api-key` prints)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def parse_key_hashes(text: str, source: str) -> list[bytes]:
    """Digests from a comma- or whitespace-separated list; anything else is a configuration error."""
    digests = []
    for item in re.split(r"[\s,]+", text.strip()):
        if not item:
            continue
        digest = item.lower()
        if not _DIGEST.match(digest):
            # Never quote the item: someone may have pasted a key where its hash belongs.
            raise ConfigurationError(
                f"{source} must hold SHA-256 hex digests of API keys (64 hex characters each); "
                "make them with `retrieval hash-api-key`"
            )
        digests.append(bytes.fromhex(digest))
    return digests


def configured_key_hashes(settings: Settings) -> list[bytes]:
    """Every configured digest: API_KEY_HASHES plus the secret's (read through a 5-minute cache)."""
    digests = parse_key_hashes(settings.api_key_hashes, "API_KEY_HASHES")
    if settings.api_key_secret_arn:
        # Fail closed: without the list, nobody is let in.
        text = read_secret(
            settings.api_key_secret_arn,
            lambda _code: AuthenticationUnavailableError(
                "could not read the API key secret from Secrets Manager; try again later"
            ),
        )
        digests += parse_key_hashes(text, "the API key secret")
    return digests


def key_matches(presented: str | None, digests: list[bytes]) -> bool:
    """Whether `presented` hashes to one of `digests`, comparing with all of them in constant time."""
    candidate = hashlib.sha256((presented or "").encode("utf-8")).digest()
    matched = False
    for digest in digests:
        # `|` rather than `or`: every digest is compared whatever the earlier ones gave.
        matched |= hmac.compare_digest(candidate, digest)
    return matched and bool(presented)


# API_KEY_HASHES digests: read-only keys on every store.
READ_ONLY_KEY = Grant(name="api-key", scopes=frozenset({"read"}), stores=None)
GRANT_STATE = "grant"


async def check_api_key(presented: str | None) -> Grant:
    """The caller's grant: everything when keys are off; AuthenticationError unless `presented` matches."""
    settings = get_settings()
    if not settings.api_key_hashes and not settings.api_key_secret_arn:
        return OPEN_GRANT
    if settings.api_key_secret_arn:
        # Secrets Manager is a network call on a cache miss: keep it off the event loop.
        digests = await run_in_threadpool(configured_key_hashes, settings)
    else:
        digests = configured_key_hashes(settings)
    if not key_matches(presented, digests):
        raise AuthenticationError()
    return READ_ONLY_KEY


class ApiKeyAuth:
    """ASGI middleware: 401 (the JSON error body) for any request but health without a valid key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") not in PUBLIC_PATHS:
            presented = Headers(scope=scope).get(API_KEY_HEADER)
            try:
                grant = await check_api_key(presented)
            except RetrievalError as exc:
                await retrieval_error_response(exc)(scope, receive, send)
                return
            # request.state reads scope["state"]; routes take the grant through GrantDep.
            scope.setdefault("state", {})[GRANT_STATE] = grant
        await self.app(scope, receive, send)


def current_grant(request: Request) -> Grant:
    """The grant the middleware attached to this request (a public path has none: nothing to grant)."""
    grant = request.scope.get("state", {}).get(GRANT_STATE)
    if not isinstance(grant, Grant):
        raise AuthenticationError()
    return grant


def document_api_key(app: FastAPI) -> None:
    """Describe the `x-api-key` header, and the 401 and 413 answers, in `app`'s OpenAPI document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        schema.setdefault("components", {}).setdefault("securitySchemes", {})["ApiKey"] = {
            "type": "apiKey",
            "in": "header",
            "name": API_KEY_HEADER,
            "description": "Required on every route but health when the service is configured with API "
            "keys (API_KEY_HASHES or API_KEY_SECRET_ARN); ignored otherwise.",
        }
        known = "ErrorResponse" in schema["components"].get("schemas", {})
        body = {"$ref": "#/components/schemas/ErrorResponse"} if known else {"type": "object"}
        error = {"application/json": {"schema": body}}
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                if "requestBody" in operation:
                    responses.setdefault("413", {"description": "Request body too large", "content": error})
                if path in PUBLIC_PATHS:
                    continue
                operation["security"] = [{"ApiKey": []}, {}]  # {}: no key needed when none is configured
                responses.setdefault("401", {"description": "Missing or invalid API key", "content": error})
                responses.setdefault("503", {"description": "API keys could not be read", "content": error})
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
