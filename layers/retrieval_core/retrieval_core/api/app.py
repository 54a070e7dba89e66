"""The FastAPI app factory shared by the local server and every Lambda handler."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from .. import __version__
from .auth import ApiKeyAuth, document_api_key
from .errors import install_error_handlers
from .limits import BodySizeLimit
from .rate_limit import RateLimitMiddleware


def create_app(*routers: APIRouter) -> FastAPI:
    """An app serving `routers` (all of them when none are given)."""
    if not routers:
        from .routers import chunks, documents, health, knowledge, retrieve, stores

        # documents after stores: GET /api/v1/stores/resolve must win over GET /api/v1/stores/{store}.
        routers = (
            retrieve.router,
            chunks.router,
            health.router,
            knowledge.router,
            stores.router,
            documents.router,
        )
    app = FastAPI(
        title="Retrieval service",
        version=__version__,
        description="Retrieval for RAG over pgvector. Every `score` is a similarity (1 - cosine distance): "
        "higher is better.",
    )
    for router in routers:
        app.include_router(router)
    install_error_handlers(app)
    # The last added runs first: the API key is checked, then the rate limit, before the body is read.
    app.add_middleware(BodySizeLimit)
    app.add_middleware(RateLimitMiddleware)
    app.add_middleware(ApiKeyAuth)
    document_api_key(app)
    return app
