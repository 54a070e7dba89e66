"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from retrieval_core.api.auth import current_grant
from retrieval_core.container import get_service
from retrieval_core.grants import Grant
from retrieval_core.search.service import RetrievalService

ServiceDep = Annotated[RetrievalService, Depends(get_service)]
# What the caller may do (scopes, stores), as the authentication middleware decided.
GrantDep = Annotated[Grant, Depends(current_grant)]
