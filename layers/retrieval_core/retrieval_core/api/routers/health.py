"""GET and HEAD /api/v1/health: readiness for load balancers and uptime checks (no API key needed)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from retrieval_core.health.checks import check_health
from retrieval_core.schemas.health import HealthResponse

router = APIRouter(prefix="/api/v1", tags=["health"])

UNHEALTHY: dict[int | str, dict[str, Any]] = {
    503: {
        "model": HealthResponse,
        "description": "A check failed (`degraded`) or every database connection is busy (`overloaded`).",
    }
}


@router.get("/health", response_model=HealthResponse, responses=UNHEALTHY)
async def health() -> JSONResponse:
    """Database round trip, schema version, pgvector version, embedder configuration; 503 unless all ok."""
    report = await run_in_threadpool(check_health)
    body = report.model_dump(by_alias=True, exclude_none=True)
    return JSONResponse(status_code=_status_code(report), content=body)


@router.head("/health", responses={200: {"description": "Every check is ok."}, **UNHEALTHY})
async def healthy() -> Response:
    """The same checks and status code as GET, without a body."""
    report = await run_in_threadpool(check_health)
    # The headers GET would send (HEAD semantics), without the body.
    return Response(status_code=_status_code(report), media_type="application/json")


def _status_code(report: HealthResponse) -> int:
    return 200 if report.status == "ok" else 503
