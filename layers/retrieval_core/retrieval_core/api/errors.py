"""The one place that maps exceptions to HTTP responses: `{"error": {code, message, details}}`."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from retrieval_core.exceptions import RetrievalError

logger = logging.getLogger(__name__)

# Codes of the errors the framework raises itself (no route, a method the route lacks, any other).
HTTP_EXCEPTION_CODES = {404: "not_found", 405: "method_not_allowed"}
OTHER_HTTP_EXCEPTION_CODE = "http_error"


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> JSONResponse:
    """The JSON error body every failure uses."""
    return JSONResponse(
        status_code=status, content={"error": {"code": code, "message": message, "details": details or {}}}
    )


def _field_path(loc: tuple[Any, ...]) -> str:
    # loc starts with where the field lives (body, query, path, header); a field may itself be named "query".
    parts = (
        [str(p) for p in loc[1:]]
        if loc and loc[0] in ("body", "query", "path", "header")
        else list(map(str, loc))
    )
    return ".".join(parts) or (str(loc[0]) if loc else "body")


def _field_error(error: dict[str, Any]) -> dict[str, Any]:
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":
        # FastAPI puts the character offset of the syntax error where a field name would be.
        position = loc[-1] if loc and isinstance(loc[-1], int) else None
        reason = error.get("ctx", {}).get("error", "JSON decode error")
        where = f" at character {position}" if position is not None else ""
        return {"field": "body", "message": f"not valid JSON ({reason}){where}", "type": "json_invalid"}
    return {"field": _field_path(loc), "message": error.get("msg", "invalid"), "type": error.get("type")}


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_field_error(e) for e in exc.errors()]
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    return error_response(
        422, "validation_error", f"{first['field']}: {first['message']}", {"errors": errors}
    )


def log_refusal(method: str, path: str, exc: RetrievalError, credential: str | None) -> None:
    """A 401 or 403 as one log line (the audit trail holds changes only): a credential name, never a key."""
    logger.warning(
        "refused %s %s: %s %s (credential %s)", method, path, exc.status_code, exc.code, credential or "-"
    )


def retrieval_error_response(exc: RetrievalError) -> JSONResponse:
    """The response for an error we raise on purpose (also used by the ASGI middlewares)."""
    if exc.status_code >= 500:
        # The cause (driver error, DSN host) stays in our logs at debug level only.
        logger.error("%s: %s", exc.code, exc.message, extra={"cause": type(exc.__cause__).__name__})
    response = error_response(exc.status_code, exc.code, exc.message, exc.details)
    if exc.retry_after_s is not None:
        response.headers["Retry-After"] = str(max(0, int(exc.retry_after_s)))
    return response


async def _retrieval_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RetrievalError)
    if exc.status_code in (401, 403):
        grant = request.scope.get("state", {}).get("grant")
        log_refusal(request.method, request.url.path, exc, getattr(grant, "name", None))
    return retrieval_error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = HTTP_EXCEPTION_CODES.get(exc.status_code, OTHER_HTTP_EXCEPTION_CODE)
    if exc.status_code == 404 and (target := _without_trailing_slash(request)) is not None:
        return RedirectResponse(target, status_code=307)
    if exc.status_code != 405:
        return error_response(exc.status_code, code, str(exc.detail))
    # Starlette names only the first route matching the path; every route of the path counts.
    allowed = _allowed_methods(request) or sorted(
        (exc.headers or {}).get("Allow", "").replace(" ", "").split(",")
    )
    response = error_response(405, code, f"{request.method} is not allowed here", {"allowed": allowed})
    response.headers["Allow"] = ", ".join(allowed)
    return response


def _without_trailing_slash(request: Request) -> str | None:
    """`/path` (as sent, with the query) when no route serves `/path/` but one serves `/path`: a Location
    of the path alone, never a host taken from the request's Host header."""
    # Some servers' raw_path carries the query string too (Starlette's TestClient before 0.39).
    raw = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1").split("?", 1)[0]
    target = raw.rstrip("/")
    # The slash must be in the path as sent: an encoded one (`a%2F`) would redirect to itself forever.
    if not raw.endswith("/") or not target or target.startswith("//"):  # "//host" would leave us
        return None
    routes = getattr(request.app.state, "route_methods", [])
    if not any(regex.match(unquote(target)) for regex, _ in routes):
        return None
    query = request.url.query
    return target + (f"?{query}" if query else "")


def _allowed_methods(request: Request) -> list[str]:
    # (path regex, methods) of every route, recorded by create_app.
    routes = getattr(request.app.state, "route_methods", [])
    path = request.url.path
    return sorted({m for regex, methods in routes if regex.match(path) for m in methods})


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # Logged with its traceback for us; the caller gets no internals.
    request_id = getattr(request.state, "request_id", None)
    logger.exception("unhandled error (request %s)", request_id, exc_info=exc)
    response = error_response(500, "internal_error", "internal error; the request was logged")
    if request_id is not None:
        response.headers["x-request-id"] = request_id
    return response


def install_error_handlers(app: FastAPI) -> None:
    """Register every mapping on `app`."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(RetrievalError, _retrieval_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
