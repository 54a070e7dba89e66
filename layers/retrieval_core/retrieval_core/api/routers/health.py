"""GET /api/v1/health."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from ...models import HealthResponse
from ...runtime import database_is_up

router = APIRouter(prefix="/api/v1", tags=["health"])


@router.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
async def health() -> JSONResponse:
    """Liveness plus a database round trip; 503 when the database does not answer."""
    up = await run_in_threadpool(database_is_up)
    body = HealthResponse(status="ok" if up else "degraded", database="ok" if up else "unreachable")
    return JSONResponse(status_code=200 if up else 503, content=body.model_dump(by_alias=True))
