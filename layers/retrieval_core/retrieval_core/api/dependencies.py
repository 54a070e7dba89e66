"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from ..grants import Grant
from ..runtime import get_service
from ..service import RetrievalService
from .auth import current_grant

ServiceDep = Annotated[RetrievalService, Depends(get_service)]
# What the caller may do (scopes, stores), as the authentication middleware decided.
GrantDep = Annotated[Grant, Depends(current_grant)]
