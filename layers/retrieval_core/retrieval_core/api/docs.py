"""The interactive API docs (/docs, /redoc), served with their assets by the app itself.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so they are blank without internet access.
`fastapi-offline` (the `local` extra) ships those assets; the app serves them under DOCS_ASSETS. The
Lambda layer leaves it out: API Gateway routes no docs path to the functions, so there the app has none.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

if TYPE_CHECKING:
    from fastapi.routing import APIRoute

OPENAPI_PATH = "/openapi.json"
DOCS_ASSETS = "/docs-assets"
# Public even when keys are configured (a browser cannot send x-api-key), and never rate-limited: they
# describe the API and expose no data.
DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", OPENAPI_PATH})


ERROR_SCHEMA = {"$ref": "#/components/schemas/ErrorResponse"}


def error_responses(*statuses: int) -> dict[str, Any]:
    """A route's `openapi_extra` naming `statuses` as answered with the error body (ErrorResponse).

    Plain OpenAPI, not FastAPI's `responses={status: {"model": ErrorResponse}}`: that builds a validator
    per status per route when the router is imported, which every Lambda cold start would pay for a
    document no Lambda serves. `with_error_schema` puts ErrorResponse in the document's components.
    """
    content = {"application/json": {"schema": ERROR_SCHEMA}}
    return {
        "responses": {
            str(status): {"description": HTTPStatus(status).phrase, "content": content} for status in statuses
        }
    }


def with_error_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an OpenAPI document) with ErrorResponse and what it refers to among its components, the
    error's `code` being one of the ErrorCode enum (retrieval_core/error_codes.py)."""
    from retrieval_core.error_codes import ERROR_CODES
    from retrieval_core.schemas.common import ErrorResponse

    ref_template = "#/components/schemas/{model}"
    error = ErrorResponse.model_json_schema(ref_template=ref_template, mode="serialization")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in error.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components.setdefault("ErrorResponse", error)
    components["ErrorCode"] = {
        "type": "string",
        "enum": sorted(ERROR_CODES),
        "title": "ErrorCode",
        "description": "What went wrong; docs/api.md#errors explains each code. A later version of the "
        "service may add codes: treat an unknown one by its HTTP status.",
    }
    components["ErrorBody"]["properties"]["code"] = {"$ref": "#/components/schemas/ErrorCode"}
    return schema


def operation_id(route: APIRoute) -> str:
    """A route's OpenAPI operationId: its function's name in camelCase (`list_documents` -> `listDocuments`),
    the name each client gives the operation."""
    first, *rest = route.name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def is_docs_path(path: str) -> bool:
    """Whether `path` is one of the docs pages, the OpenAPI document or one of the pages' assets."""
    return path in DOCS_PATHS or path.startswith(DOCS_ASSETS + "/")


def app_with_docs(**kwargs: Any) -> FastAPI:
    """A FastAPI app whose /docs and /redoc use the packaged assets; no docs pages without the package."""
    kwargs.setdefault("generate_unique_id_function", operation_id)
    try:
        from fastapi_offline import FastAPIOffline
    except ImportError:
        return FastAPI(docs_url=None, redoc_url=None, openapi_url=OPENAPI_PATH, **kwargs)
    app: FastAPI = FastAPIOffline(static_url=DOCS_ASSETS, openapi_url=OPENAPI_PATH, **kwargs)
    return app
