"""The interactive API docs (/docs, /redoc), served with their assets by the app itself.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so they are blank without internet access.
`fastapi-offline` (the `local` extra) ships those assets; the app serves them under DOCS_ASSETS. The
Lambda layer leaves it out: API Gateway routes no docs path to the functions, so there the app has none.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

OPENAPI_PATH = "/openapi.json"
DOCS_ASSETS = "/docs-assets"
# Public even when keys are configured (a browser cannot send x-api-key), and never rate-limited: they
# describe the API and expose no data.
DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", OPENAPI_PATH})


def is_docs_path(path: str) -> bool:
    """Whether `path` is one of the docs pages, the OpenAPI document or one of the pages' assets."""
    return path in DOCS_PATHS or path.startswith(DOCS_ASSETS + "/")


def app_with_docs(**kwargs: Any) -> FastAPI:
    """A FastAPI app whose /docs and /redoc use the packaged assets; no docs pages without the package."""
    try:
        from fastapi_offline import FastAPIOffline
    except ImportError:
        return FastAPI(docs_url=None, redoc_url=None, openapi_url=OPENAPI_PATH, **kwargs)
    app: FastAPI = FastAPIOffline(static_url=DOCS_ASSETS, openapi_url=OPENAPI_PATH, **kwargs)
    return app
