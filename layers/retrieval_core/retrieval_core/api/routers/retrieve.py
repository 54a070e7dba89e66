"""POST /api/v1/rag/retrieve."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from ...knowledge.runtime import get_knowledge_service
from ...models import (
    ErrorResponse,
    RetrieveBatchRequest,
    RetrieveBatchResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from ..dependencies import ServiceDep

router = APIRouter(prefix="/api/v1/rag", tags=["retrieve"])

_ERRORS = {status: {"model": ErrorResponse} for status in (404, 409, 422, 500, 502, 503)}


@router.post("/retrieve", response_model=RetrieveResponse, responses=_ERRORS)  # type: ignore[arg-type]
async def retrieve(body: RetrieveRequest, service: ServiceDep, response: Response) -> RetrieveResponse:
    """Embed the query and return chunks whose similarity is at least `grade`, highest first.

    The `X-Cache` header says whether the answer came from the cache (hit, miss, bypass).
    """
    if body.targets_gemini:
        # A Gemini File Search store (docs/gemini.md): the knowledge service answers, not pgvector.
        answer, status = await run_in_threadpool(get_knowledge_service().retrieve, body)
    else:
        answer, status = await run_in_threadpool(service.retrieve, body)
    response.headers["X-Cache"] = status.value
    return answer


@router.post("/retrieve/batch", response_model=RetrieveBatchResponse, responses=_ERRORS)  # type: ignore[arg-type]
async def retrieve_batch(body: RetrieveBatchRequest, service: ServiceDep) -> RetrieveBatchResponse:
    """Up to 20 retrieve requests in one call, answered in order; their queries are embedded together.

    Each item carries the status it would have had alone: one invalid or failing item does not fail
    the others. The whole call fails only when the body itself is malformed.
    """
    items = await run_in_threadpool(service.retrieve_batch, body.requests)
    return RetrieveBatchResponse(results=items)
