"""POST /api/v1/stores/{store}/evaluate."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from retrieval_core.api.dependencies import GrantDep, ServiceDep
from retrieval_core.api.docs import error_responses
from retrieval_core.clients.deadline import request_deadline
from retrieval_core.schemas.common import Text
from retrieval_core.schemas.evaluate import EvaluateRequest, EvaluateResponse

router = APIRouter(prefix="/api/v1/stores", tags=["evaluate"])

_ERRORS = error_responses(*(403, 404, 409, 422, 500, 503))


@router.post("/{store}/evaluate", response_model=EvaluateResponse, openapi_extra=_ERRORS)
async def evaluate(
    store: Text, body: EvaluateRequest, service: ServiceDep, grant: GrantDep
) -> EvaluateResponse:
    """Score judged queries against the store with each method: mean nDCG@k and recall@k per method, and
    every query's scores and first k documents (any key that may search the store).

    Stops early with `complete: false` when the request's time runs short: the scores cover the
    queries done.
    """
    # On first use: the retrieve function's cold start does not pay for the evaluation package.
    from retrieval_core.evaluation.scorecard import scorecard

    return await run_in_threadpool(partial(scorecard, service, store, body, grant, request_deadline()))
