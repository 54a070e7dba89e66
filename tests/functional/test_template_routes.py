"""template.yaml deploys exactly the routes the app serves.

A route the app serves that the HTTP API does not deploy works under `make serve` and answers API
Gateway's 404 in AWS; a deployed route that no route of the app serves reaches a function that answers
404 itself. Both sides are compared as (method, path shape): parameter names are dropped, and a
parameter taking the rest of the path (the app's `{document_id:path}`, API Gateway's `{documentId+}`)
stays apart from a one-segment one. The template side is SAM's own translation (tests/template.py),
so the functions' HttpApi events and the DefinitionBody's paths count alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from fastapi import FastAPI, routing
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Mount

from retrieval_core.api.app import create_app
from tests.template import deployed, shape

Route = tuple[str, str]  # (method, path shape)
ANY = "ANY"
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# How API Gateway's OpenAPI writes a route of every method (SAM's `Method: ANY`), and what a route
# calls (SAM adds one for each function event).
ANY_METHOD_KEY = "x-amazon-apigateway-any-method"
INTEGRATION_KEY = "x-amazon-apigateway-integration"

# What only `make serve` serves: the interactive API docs, the OpenAPI document and the docs' assets.
# API Gateway routes none of them to a function (docs/security.md).
LOCAL_ONLY: frozenset[Route] = frozenset(
    {
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/docs/oauth2-redirect"),
        ("GET", "/redoc"),
        (ANY, "/docs-assets/{+}"),
    }
)

PARAMETER = re.compile(r"\{([^{}]+)\}")


def path_shape(path: str) -> str:
    """`path` with each parameter as `{}`, or `{+}` when it takes the rest of the path."""
    return PARAMETER.sub(lambda m: "{+}" if m.group(1).endswith(("+", ":path")) else "{}", path)


def _routes_of(app: FastAPI) -> Iterator[tuple[BaseRoute, str, frozenset[str]]]:
    """Each route of `app` with its full path and methods. Recent FastAPI keeps an included router as
    one entry of `app.routes`, which `iter_route_contexts` opens; earlier versions copied the routes in."""
    walk = getattr(routing, "iter_route_contexts", None)
    if walk is None:
        for route in app.routes:
            yield route, getattr(route, "path", ""), frozenset(getattr(route, "methods", None) or ())
        return
    for context in walk(app.routes):
        yield context.original_route, context.path or "", frozenset(context.methods or ())


def served(app: FastAPI) -> dict[Route, str]:
    """Every (method, path shape) `app` serves, with the path as the app writes it."""
    routes: dict[Route, str] = {}
    for route, path, methods in _routes_of(app):
        if isinstance(route, Mount):
            routes[(ANY, path_shape(f"{path}/{{path:path}}"))] = f"{path}/..."
            continue
        # Starlette adds HEAD to a plain route's GET; API Gateway would route HEAD only where declared.
        if not isinstance(route, APIRoute) and "GET" in methods:
            methods -= {"HEAD"}
        routes |= {(method, path_shape(path)): path for method in methods}
    return routes


def documented(app: FastAPI) -> set[Route]:
    """The operations of the app's OpenAPI document."""
    return {
        (method.upper(), path_shape(path))
        for path, item in app.openapi()["paths"].items()
        for method in item
        if method.upper() in HTTP_METHODS
    }


@cache
def app_routes() -> dict[Route, str]:
    """What the local server's app (every router, /mcp included) serves."""
    return served(create_app())


def http_api() -> dict[str, Any]:
    """The deployed HTTP API's OpenAPI body, after the SAM transform."""
    resources = deployed(shape(False))
    apis = {name for name, r in resources.items() if r["Type"].startswith("AWS::ApiGateway")}
    # Nothing else answers HTTP: one HTTP API (and its stage), no REST API.
    assert apis == {"HttpApi", "HttpApiApiGatewayDefaultStage"}, apis
    assert resources["HttpApi"]["Type"] == "AWS::ApiGatewayV2::Api"
    body: dict[str, Any] = resources["HttpApi"]["Properties"]["Body"]
    return body


def template_operations() -> dict[Route, tuple[str, dict[str, Any]]]:
    """(method, path shape) -> (path as written, operation) for every route the HTTP API deploys."""
    return {
        (ANY if key == ANY_METHOD_KEY else key.upper(), path_shape(path)): (path, operation)
        for path, item in http_api()["paths"].items()
        for key, operation in item.items()
        if key == ANY_METHOD_KEY or key.upper() in HTTP_METHODS
    }


def integrated_routes() -> set[Route]:
    """The deployed routes that call a function."""
    return {route for route, (_, operation) in template_operations().items() if INTEGRATION_KEY in operation}


def covered(route: Route, by: set[Route]) -> bool:
    """Whether a route of `by` answers `route`: the same method, or ANY, on the same path shape."""
    method, path = route
    if method == ANY:
        return any(other == path for _, other in by)
    return route in by or (ANY, path) in by


def listed(routes: dict[Route, str]) -> str:
    return "; ".join(f"{method} {path}" for (method, _), path in sorted(routes.items()))


def test_the_route_walk_finds_every_operation_of_the_openapi_document() -> None:
    # The OpenAPI document drops `:path`, so it is compared with greedy parameters as plain ones.
    walked = {(method, path.replace("{+}", "{}")) for method, path in app_routes()}
    missing = documented(create_app()) - walked
    assert not missing, f"OpenAPI operations the route walk did not find: {sorted(missing)}"


def test_every_route_the_app_serves_is_deployed_but_the_local_only_ones() -> None:
    deployed_routes = integrated_routes()
    missing = {
        route: path
        for route, path in app_routes().items()
        if route not in LOCAL_ONLY and not covered(route, deployed_routes)
    }
    assert not missing, (
        "served by the app, deployed by no HttpApi route of template.yaml (API Gateway answers 404): "
        + listed(missing)
    )


def test_every_deployed_route_reaches_a_function_and_a_route_of_the_app() -> None:
    operations = template_operations()
    unserved = {
        route: path for route, (path, _) in operations.items() if not covered(route, set(app_routes()))
    }
    assert not unserved, "deployed by template.yaml, served by no route of the app: " + listed(unserved)
    # A DefinitionBody path that no function's event completes has no integration to call.
    unintegrated = {
        route: path for route, (path, operation) in operations.items() if INTEGRATION_KEY not in operation
    }
    assert not unintegrated, "deployed by template.yaml without a function: " + listed(unintegrated)


def test_the_local_only_routes_are_served_by_the_app_and_deployed_by_none() -> None:
    gone = LOCAL_ONLY - set(app_routes())
    assert not gone, f"LOCAL_ONLY lists routes the app no longer serves: {sorted(gone)}"
    deployed_routes = set(template_operations())
    deployed_anyway = {route for route in LOCAL_ONLY if covered(route, deployed_routes)}
    assert not deployed_anyway, f"LOCAL_ONLY lists routes template.yaml deploys: {sorted(deployed_anyway)}"
