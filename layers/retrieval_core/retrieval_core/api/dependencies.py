"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from ..runtime import get_service
from ..service import RetrievalService

ServiceDep = Annotated[RetrievalService, Depends(get_service)]
