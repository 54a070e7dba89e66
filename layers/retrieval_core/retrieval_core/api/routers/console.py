"""GET /console and its assets: the web console's files, public like the API docs (docs/console.md).

Only the files shipped in retrieval_core/console are served, by name: a path naming anything else is a
404, so no request can reach outside that folder. Every answer carries a Content-Security-Policy that
allows scripts, styles and requests to this origin only, so a document's text rendered by the pages can
never run as a script even if a page had a bug that inserted it as HTML.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from fastapi import APIRouter, HTTPException, Response

from retrieval_core.console import ASSETS, PATH
from retrieval_core.settings import get_settings

router = APIRouter(prefix=PATH, include_in_schema=False)

CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # The files change with each deploy; the browser asks again rather than mix two versions' modules.
    "Cache-Control": "no-cache",
}


@cache
def _assets() -> dict[str, Path]:
    return {path.name: path for path in ASSETS.iterdir() if path.suffix in MEDIA_TYPES}


def _file_response(name: str) -> Response:
    path = _assets().get(name)
    if path is None:
        raise HTTPException(status_code=404, detail=f"The console has no file named {name!r}.")
    return Response(path.read_bytes(), media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)


@router.get("")
async def console() -> Response:
    """The console's page."""
    return _file_response("index.html")


@router.get("/{name:path}")
async def console_file(name: str) -> Response:
    """One of the console's files, or config.json: what the pages need to know of this deployment."""
    if name == "config.json":
        body = json.dumps({"documentsMaxBodyBytes": get_settings().documents_max_body_bytes})
        return Response(body, media_type="application/json", headers=HEADERS)
    return _file_response(name)
