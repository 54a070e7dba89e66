"""The one retrieve entry point: every caller (HTTP, batch, MCP, the queue) routes a request here.

A request goes to one backend, chosen by one rule (`backend_of`): `backend: "gemini"`, or no backend
and a `fileSearchStores/...` store, is Gemini File Search; anything else is the pgvector service,
which serves the stores we own and attached tables alike (docs/existing-tables.md). A backend says
which callers it serves (`Capabilities`); a caller it does not serve gets a 422 naming why, never the
other backend's answer for a name it does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from retrieval_core.backends.face import (
    CAPABILITIES,
    AnswerBackend,
    Backend,
    BackendKind,
    BatchBackend,
    Caller,
    Capabilities,
    EmbedQuery,
)
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.grants import Grant
from retrieval_core.schemas.common import validation_error

if TYPE_CHECKING:
    from retrieval_core.backends.answers import AnswerEvent
    from retrieval_core.cache.json_cache import CacheStatus
    from retrieval_core.schemas.answer import AnswerRequest
    from retrieval_core.schemas.retrieve import BatchItem, RetrieveRequest, RetrieveResponse


def backend_of(request: RetrieveRequest) -> BackendKind:
    """The backend that serves `request`: the one routing rule of every caller."""
    return "gemini" if request.targets_gemini else "pgvector"


def shares_query_embedding(request: RetrieveRequest) -> bool:
    """Whether `request`'s query may go into a batch's one embedding call (its backend embeds it, and a
    keyword search embeds nothing)."""
    return CAPABILITIES[backend_of(request)].shared_query_embedding and request.search_mode != "keyword"


_NOT_SERVED = {
    "batch": ("not served in a batch", "are not served in a batch"),
    "queue": ("not served by the queue", "are not served by the retrieve queue"),
}
_NAMES = {"pgvector": "pgvector stores", "gemini": "Gemini File Search stores"}


def not_served(kind: BackendKind, caller: Caller, instead: str) -> InvalidRequestError:
    """The 422 for a request whose backend does not serve `caller`, naming where to send it."""
    message, verb = _NOT_SERVED[caller]
    summary = f"{_NAMES[kind]} {verb}; use {instead}" if instead else f"{_NAMES[kind]} {verb}"
    return InvalidRequestError.for_field("backend", message, "unsupported", summary)


class Backends:
    """The backends of this process, built on first use, behind the one entry point."""

    def __init__(
        self,
        pgvector: Callable[[], BatchBackend],
        gemini: Callable[[], Backend],
        answers: Mapping[BackendKind, Callable[[], AnswerBackend]] | None = None,
    ) -> None:
        # Providers, not instances: a Gemini request must not build the database service, nor the reverse.
        self._pgvector = pgvector
        self._gemini = gemini
        self._answers = dict(answers or {})

    def backend(self, kind: BackendKind) -> Backend:
        """The backend of that kind (built now if it was not)."""
        return self._pgvector() if kind == "pgvector" else self._gemini()

    def capabilities(self, kind: BackendKind) -> Capabilities:
        """What the backend of that kind serves; known without building it."""
        return CAPABILITIES[kind]

    def retrieve(
        self,
        request: RetrieveRequest,
        grant: Grant,
        *,
        caller: Caller,
        embed_query: EmbedQuery | None = None,
    ) -> tuple[RetrieveResponse, CacheStatus]:
        """`request`'s answer from its backend; a 422 when that backend does not serve `caller`.

        `embed_query` (the queue's shared query vectors) is used only by a backend that embeds queries
        together; any other embeds, or does not embed, on its own.
        """
        kind = backend_of(request)
        self.check_serves(kind, caller)
        shared = embed_query if shares_query_embedding(request) else None
        return self.backend(kind).retrieve(request, shared, grant=grant)

    def answer(
        self, request: AnswerRequest, grant: Grant, *, caller: Caller, streaming: bool = False
    ) -> tuple[Iterator[AnswerEvent], CacheStatus]:
        """`request`'s grounded answer from its backend, as events (pieces of text, then the answer).

        Routed by the rule of `retrieve`; a 422 when that backend does not serve `caller`.
        """
        kind = backend_of(request)
        self.check_serves(kind, caller)
        answers = self._answers.get(kind)
        if answers is None:
            raise AssertionError(f"no answers configured for the {kind} backend")
        return answers().answer(request, grant, streaming=streaming)

    def check_serves(self, kind: BackendKind, caller: Caller) -> None:
        """Raise the named 422 when the backend of `kind` does not serve `caller`."""
        capabilities = self.capabilities(kind)
        served = {"http": True, "mcp": True, "batch": capabilities.batch, "queue": capabilities.queue}
        if not served[caller]:
            raise not_served(kind, caller, capabilities.instead)

    def retrieve_batch(self, bodies: Sequence[dict[str, Any]], grant: Grant) -> list[BatchItem]:
        """POST /rag/retrieve/batch: each body answered as `retrieve` would, in order.

        A body that is not a valid request, or whose backend serves no batch, is an error item; the
        others go to the pgvector service together, which embeds their queries in one call.
        """
        from retrieval_core.schemas.retrieve import RetrieveRequest

        grant.require_scope("read")
        requests: list[RetrieveRequest | InvalidRequestError] = []
        for body in bodies:
            try:
                parsed = RetrieveRequest.model_validate(body)
                self.check_serves(backend_of(parsed), "batch")
            except ValidationError as exc:
                requests.append(validation_error(exc))
            except InvalidRequestError as exc:
                requests.append(exc)
            else:
                requests.append(parsed)
        return self._pgvector().retrieve_batch(requests, grant=grant)
