"""POST /api/v1/chunks/similarity-search."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from ...models import ErrorResponse, SimilaritySearchRequest, SimilaritySearchResponse
from ..dependencies import ServiceDep

router = APIRouter(prefix="/api/v1/chunks", tags=["chunks"])

_ERRORS = {status: {"model": ErrorResponse} for status in (404, 422, 500)}


@router.post("/similarity-search", response_model=SimilaritySearchResponse, responses=_ERRORS)  # type: ignore[arg-type]
async def similarity_search(
    body: SimilaritySearchRequest, service: ServiceDep, response: Response
) -> SimilaritySearchResponse:
    """Return the chunks nearest to a precomputed embedding (cosine), highest similarity first.

    The `X-Cache` header says whether the answer came from the cache (hit, miss, bypass).
    """
    answer, status = await run_in_threadpool(service.similarity_search, body)
    response.headers["X-Cache"] = status.value
    return answer
