"""`retrieval openapi`: the HTTP API's OpenAPI document, as the clients are generated from it."""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Any


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `openapi`."""
    p_openapi = sub.add_parser(
        "openapi", help="print the OpenAPI document of the HTTP API (clients/openapi.json is this output)"
    )
    p_openapi.set_defaults(run=_print_openapi)


def _print_openapi(args: argparse.Namespace) -> int:
    print(render(), end="")
    return 0


def render() -> str:
    """The OpenAPI document as clients/openapi.json holds it: indented JSON ending with a newline."""
    from retrieval_core.api.app import create_app

    with warnings.catch_warnings():
        # pydantic's note on a Field alias inside an Annotated union (the document is unaffected).
        warnings.simplefilter("ignore")
        document = create_app().openapi()
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
