"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from retrieval_core.api.auth import current_grant
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.backends.router import Backends
from retrieval_core.container import get_answerer, get_knowledge_service, get_service
from retrieval_core.documents.models import Actor
from retrieval_core.grants import Grant

ServiceDep = Annotated[RetrievalService, Depends(get_service)]


def backends(service: ServiceDep) -> Backends:
    """The one retrieve entry point over this request's pgvector service and the Gemini service."""
    return Backends(
        lambda: service,
        get_knowledge_service,
        {"pgvector": lambda: get_answerer(lambda: service), "gemini": get_knowledge_service},
    )


# Routes each request to its backend (pgvector or Gemini File Search); built on ServiceDep, so an app
# whose service dependency is overridden routes to that service.
BackendsDep = Annotated[Backends, Depends(backends)]
# What the caller may do (scopes, stores), as the authentication middleware decided.
GrantDep = Annotated[Grant, Depends(current_grant)]


def current_actor(request: Request, grant: GrantDep) -> Actor:
    """Who this request changes things as, for the audit trail: the grant's name and the request's id."""
    return Actor(grant.name, getattr(request.state, "request_id", None))


ActorDep = Annotated[Actor, Depends(current_actor)]
