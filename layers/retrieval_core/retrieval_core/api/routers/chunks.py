"""POST /api/v1/chunks/similarity-search."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from retrieval_core.api.dependencies import GrantDep, ServiceDep
from retrieval_core.api.docs import error_responses
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest, SimilaritySearchResponse

router = APIRouter(prefix="/api/v1/chunks", tags=["chunks"])

_ERRORS = error_responses(*(403, 404, 422, 500))


@router.post("/similarity-search", response_model=SimilaritySearchResponse, openapi_extra=_ERRORS)
async def similarity_search(
    body: SimilaritySearchRequest, service: ServiceDep, grant: GrantDep, response: Response
) -> SimilaritySearchResponse:
    """Return the chunks nearest to a precomputed embedding (cosine), highest similarity first.

    The `X-Cache` header says whether the answer came from the cache (hit, miss, bypass).
    """
    answer, status = await run_in_threadpool(partial(service.similarity_search, body, grant=grant))
    response.headers["X-Cache"] = status.value
    return answer
