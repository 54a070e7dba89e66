"""POST /api/v1/rag/retrieve."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from retrieval_core.api.dependencies import BackendsDep, GrantDep
from retrieval_core.api.docs import error_responses
from retrieval_core.api.rate_limit import charge
from retrieval_core.schemas.retrieve import (
    RetrieveBatchRequest,
    RetrieveBatchResponse,
    RetrieveRequest,
    RetrieveResponse,
)

router = APIRouter(prefix="/api/v1/rag", tags=["retrieve"])

_ERRORS = error_responses(*(403, 404, 409, 422, 500, 502, 503))


@router.post("/retrieve", response_model=RetrieveResponse, openapi_extra=_ERRORS)
async def retrieve(
    body: RetrieveRequest, backends: BackendsDep, grant: GrantDep, response: Response
) -> RetrieveResponse:
    """Embed the query and return chunks whose similarity is at least `grade`, highest first.

    The `X-Cache` header says whether the answer came from the cache (hit, miss, bypass).
    """
    answer, status = await run_in_threadpool(partial(backends.retrieve, body, grant, caller="http"))
    response.headers["X-Cache"] = status.value
    return answer


@router.post("/retrieve/batch", response_model=RetrieveBatchResponse, openapi_extra=_ERRORS)
async def retrieve_batch(
    body: RetrieveBatchRequest, backends: BackendsDep, grant: GrantDep, request: Request
) -> RetrieveBatchResponse:
    """Up to 20 retrieve requests in one call, answered in order; their queries are embedded together.

    Each item carries the status it would have had alone: one invalid or failing item does not fail
    the others. The whole call fails only when the body itself is malformed, or (429) when the
    credential's rate limit has no room for every item: each item counts as one request.
    """
    await charge(request, len(body.requests) - 1)  # the request itself was counted on arrival
    items = await run_in_threadpool(backends.retrieve_batch, body.requests, grant)
    return RetrieveBatchResponse(results=items)
