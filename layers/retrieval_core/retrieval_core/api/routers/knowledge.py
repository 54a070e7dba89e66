"""POST /api/v1/knowledge/search: an answer with sources from a Gemini File Search store."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.concurrency import run_in_threadpool

from retrieval_core.api.dependencies import GrantDep
from retrieval_core.api.docs import error_responses
from retrieval_core.backends.gemini.service import KnowledgeService
from retrieval_core.container import get_knowledge_service
from retrieval_core.schemas.knowledge import KnowledgeAnswer, KnowledgeSearchRequest

router = APIRouter(prefix="/api/v1/knowledge", tags=["knowledge"])

KnowledgeDep = Annotated[KnowledgeService, Depends(get_knowledge_service)]
_ERRORS = error_responses(*(403, 404, 422, 500, 502, 503))


@router.post("/search", response_model=KnowledgeAnswer, openapi_extra=_ERRORS)
async def knowledge_search(
    body: KnowledgeSearchRequest, knowledge: KnowledgeDep, grant: GrantDep, response: Response
) -> KnowledgeAnswer:
    """Ask Gemini with the File Search tool over `store`; the answer text, its sources and the raw metadata.

    `store` may be a display name, a short name or a full `fileSearchStores/...` name. The `X-Cache`
    header says whether the answer came from the cache (hit, miss, bypass).
    """
    answer, status = await run_in_threadpool(knowledge.search, body, grant)
    response.headers["X-Cache"] = status.value
    return answer
