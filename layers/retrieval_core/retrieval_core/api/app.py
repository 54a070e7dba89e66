"""The FastAPI app factory shared by the local server and every Lambda handler."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from retrieval_core import __version__
from retrieval_core.api.auth import ApiKeyAuth, document_api_key
from retrieval_core.api.deadline_middleware import RequestDeadlineMiddleware
from retrieval_core.api.docs import app_with_docs
from retrieval_core.api.errors import install_error_handlers
from retrieval_core.api.limits import BodySizeLimit
from retrieval_core.api.rate_limit import RateLimitMiddleware
from retrieval_core.api.request_id import REQUEST_ID_HEADER, RequestIdMiddleware
from retrieval_core.settings import get_settings


def create_app(*routers: APIRouter) -> FastAPI:
    """An app serving `routers` (all of them when none are given)."""
    if not routers:
        from retrieval_core.api.routers import (
            answer,
            chunks,
            console,
            documents,
            evaluate,
            health,
            knowledge,
            retrieve,
            stores,
        )

        # documents after stores: GET /api/v1/stores/resolve must win over GET /api/v1/stores/{store}.
        routers = (
            retrieve.router,
            answer.router,
            chunks.router,
            evaluate.router,
            health.router,
            knowledge.router,
            stores.router,
            documents.router,
            console.router,
            *_mcp_routers(),
        )
    app = app_with_docs(
        title="Retrieval service",
        version=__version__,
        description="Retrieval for RAG over pgvector. Every `score` is a similarity (1 - cosine distance): "
        "higher is better.",
        # Starlette's own redirect of `/path/` to `/path` names the Host header's host in its Location;
        # api/errors.py redirects to the path alone instead.
        redirect_slashes=False,
    )
    for router in routers:
        app.include_router(router)
    # For the Allow header of a 405 (api/errors.py), which must name the methods of every route of a path.
    app.state.route_methods = [
        (route.path_regex, frozenset(route.methods or ()))
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
    ]
    install_error_handlers(app)
    # The last added runs first: the API key is checked, then the rate limit, before the body is read;
    # CORS preflights are answered before the API key is asked for, and every response (errors too)
    # carries x-request-id.
    app.add_middleware(BodySizeLimit)
    app.add_middleware(RateLimitMiddleware)
    app.add_middleware(ApiKeyAuth)
    _add_cors(app)
    app.add_middleware(RequestIdMiddleware)
    # Outermost: the request's deadline runs from its arrival.
    app.add_middleware(RequestDeadlineMiddleware)
    document_api_key(app)
    return app


def _mcp_routers() -> tuple[APIRouter, ...]:
    # /mcp needs the `mcp` SDK: the local extra installs it, the Lambda layer does not (the MCP function
    # brings it). Without it the app serves everything else.
    try:
        from retrieval_core.api.mcp.server import mcp_router
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("mcp", "mcp_types"):
            raise
        return ()
    return (mcp_router(),)


def _add_cors(app: FastAPI) -> None:
    # Off unless CORS_ALLOW_ORIGINS is set. In AWS the HTTP API's CorsConfiguration answers instead.
    settings = get_settings()
    origins = _listed(settings.cors_allow_origins)
    if not origins:
        return
    from starlette.middleware.cors import CORSMiddleware

    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=_listed(settings.cors_allow_methods),
        allow_headers=_listed(settings.cors_allow_headers),
        expose_headers=[REQUEST_ID_HEADER],
        max_age=settings.cors_max_age_s,
    )


def _listed(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
