"""The backend face: what every backend offers the retrieve entry point (backends/router.py).

A backend is one place a store's chunks live: the pgvector service (our stores and attached tables)
or Gemini File Search. Each answers a retrieve request and says which callers it serves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from retrieval_core.backends.answers import AnswerEvent
    from retrieval_core.cache.json_cache import CacheStatus
    from retrieval_core.exceptions import InvalidRequestError
    from retrieval_core.grants import Grant
    from retrieval_core.schemas.answer import AnswerRequest
    from retrieval_core.schemas.retrieve import BatchItem, RetrieveRequest, RetrieveResponse

BackendKind = Literal["pgvector", "gemini"]
# Who asks: POST /rag/retrieve, an item of POST /rag/retrieve/batch, the MCP retrieve tool, a queue job.
Caller = Literal["http", "batch", "mcp", "queue"]
EmbedQuery = Callable[[str], Sequence[float]]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend serves beyond one retrieve over HTTP or MCP, and why not where it does not."""

    batch: bool
    queue: bool
    # Whether a batch or a queue batch may embed the backend's queries together, in one provider call.
    shared_query_embedding: bool
    # Where to send the request instead, named in the 422 of a caller the backend does not serve.
    instead: str = ""


PGVECTOR = Capabilities(batch=True, queue=True, shared_query_embedding=True)
# The queue function holds no Gemini key (least privilege, template.yaml); a batch shares one Lambda
# response and one embedding call, neither of which a Gemini search uses.
GEMINI = Capabilities(batch=False, queue=False, shared_query_embedding=False, instead="/rag/retrieve")
# Known without building a backend: a refused caller must not connect to anything.
CAPABILITIES: dict[BackendKind, Capabilities] = {"pgvector": PGVECTOR, "gemini": GEMINI}


class Backend(Protocol):
    """One place a store's chunks live, searched for a retrieve request."""

    def retrieve(
        self, request: RetrieveRequest, embed_query: EmbedQuery | None = None, *, grant: Grant
    ) -> tuple[RetrieveResponse, CacheStatus]:
        """The request's answer and how the cache served it; raises a RetrievalError."""
        ...


class BatchBackend(Backend, Protocol):
    """A backend that also answers several requests together (one embedding call, one expensive slot)."""

    def retrieve_batch(
        self, requests: Sequence[RetrieveRequest | InvalidRequestError], *, grant: Grant
    ) -> list[BatchItem]:
        """Each request's item, in order; an error item stays an error item."""
        ...


class AnswerBackend(Protocol):
    """A backend that writes grounded answers from its chunks (POST /rag/answer)."""

    def answer(
        self, request: AnswerRequest, grant: Grant, *, streaming: bool = False
    ) -> tuple[Iterator[AnswerEvent], CacheStatus]:
        """The answer's events (pieces of text, then the answer) and how the cache served it.

        Checks (scope, store, options) raise here, before the first event; failures of the work raise
        while the events are read.
        """
        ...
