"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from retrieval_core.api.auth import current_grant
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.backends.router import Backends
from retrieval_core.container import get_backends, get_service
from retrieval_core.grants import Grant

ServiceDep = Annotated[RetrievalService, Depends(get_service)]
# The one retrieve entry point: routes each request to its backend (pgvector or Gemini File Search).
BackendsDep = Annotated[Backends, Depends(get_backends)]
# What the caller may do (scopes, stores), as the authentication middleware decided.
GrantDep = Annotated[Grant, Depends(current_grant)]
