"""Wrap the app factory for API Gateway (HTTP API, payload v2) through Mangum."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from mangum import Mangum

from .app import create_app

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def build_handler(*routers: APIRouter) -> LambdaHandler:
    """A Lambda handler serving `routers`. Nothing connects to the database until the first request."""
    return Mangum(create_app(*routers), lifespan="off")  # type: ignore[return-value]
