"""GET /api/v1/stores/resolve: a store's full name from a display name, short name or full name."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool

from retrieval_core.api.dependencies import GrantDep
from retrieval_core.api.docs import error_responses
from retrieval_core.backends.gemini.service import KnowledgeService
from retrieval_core.container import get_knowledge_service
from retrieval_core.schemas.common import GEMINI_STORE_PREFIX, StoreName
from retrieval_core.schemas.knowledge import Backend, ResolvedStore

router = APIRouter(prefix="/api/v1/stores", tags=["stores"])

KnowledgeDep = Annotated[KnowledgeService, Depends(get_knowledge_service)]
_ERRORS = error_responses(*(403, 404, 422, 500, 502, 503))


@router.get("/resolve", response_model=ResolvedStore, openapi_extra=_ERRORS)
async def resolve_store(
    knowledge: KnowledgeDep,
    grant: GrantDep,
    name: Annotated[StoreName, Query()],
    backend: Annotated[Backend | None, Query()] = None,
) -> ResolvedStore:
    """Resolve in five steps: cache, display name, exact name, `fileSearchStores/{name}`, fallback.

    `backend` unset: gemini for a name starting with `fileSearchStores/`, else pgvector (as for retrieve).
    Needs the read scope; a store outside the caller's grant is a 404, as an unknown one.
    """
    chosen: Backend = backend or ("gemini" if name.startswith(GEMINI_STORE_PREFIX) else "pgvector")
    return await run_in_threadpool(knowledge.resolve, name, chosen, grant)
