"""The one retrieve entry point: which backend a request goes to, and which callers each serves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from retrieval_core.backends.face import CAPABILITIES, EmbedQuery
from retrieval_core.backends.router import Backends, backend_of
from retrieval_core.cache.json_cache import CacheStatus
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.grants import OPEN_GRANT, Grant
from retrieval_core.schemas.retrieve import BatchItem, RetrieveRequest, RetrieveResponse


class Recording:
    """A backend that records what it was asked and answers nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, EmbedQuery | None]] = []
        self.batches: list[list[Any]] = []

    def retrieve(
        self, request: RetrieveRequest, embed_query: EmbedQuery | None = None, *, grant: Grant
    ) -> tuple[RetrieveResponse, CacheStatus]:
        self.calls.append((request.query, embed_query))
        raise InvalidRequestError("recorded")

    def retrieve_batch(
        self, requests: Sequence[RetrieveRequest | InvalidRequestError], *, grant: Grant
    ) -> list[BatchItem]:
        self.batches.append(list(requests))
        return []


def request(**fields: Any) -> RetrieveRequest:
    return RetrieveRequest.model_validate({"query": "q", "grade": 0.0, **fields})


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"store": "fileSearchStores/kb-1"}, "gemini"),
        ({"store": "Support KB", "backend": "gemini"}, "gemini"),
        ({"store": "fileSearchStores/kb-1", "backend": "pgvector"}, "pgvector"),
        ({"store": "sample"}, "pgvector"),
        ({}, "pgvector"),
    ],
)
def test_one_rule_picks_the_backend(fields: dict[str, Any], kind: str) -> None:
    assert backend_of(request(**fields)) == kind


def test_every_caller_reaches_the_pgvector_backend_with_the_shared_embedding() -> None:
    pgvector, gemini = Recording(), Recording()
    backends = Backends(lambda: pgvector, lambda: gemini)

    def embed(_: str) -> list[float]:
        return [0.0]

    for caller in ("http", "mcp", "queue", "batch"):
        with pytest.raises(InvalidRequestError, match="recorded"):
            backends.retrieve(request(query=caller), OPEN_GRANT, caller=caller, embed_query=embed)  # type: ignore[arg-type]
    assert pgvector.calls == [(c, embed) for c in ("http", "mcp", "queue", "batch")]
    assert gemini.calls == []


def test_gemini_answers_http_and_mcp_and_refuses_the_queue_and_batches_by_name() -> None:
    pgvector, gemini = Recording(), Recording()
    backends = Backends(lambda: pgvector, lambda: gemini)
    on_gemini = request(store="fileSearchStores/kb-1", query="g")
    for caller in ("http", "mcp"):
        with pytest.raises(InvalidRequestError, match="recorded"):
            backends.retrieve(on_gemini, OPEN_GRANT, caller=caller, embed_query=lambda _: [0.0])  # type: ignore[arg-type]
    assert gemini.calls == [("g", None), ("g", None)]  # Gemini embeds its queries itself
    with pytest.raises(InvalidRequestError) as refused:
        backends.retrieve(on_gemini, OPEN_GRANT, caller="queue")
    assert refused.value.message == (
        "backend: Gemini File Search stores are not served by the retrieve queue; use /rag/retrieve"
    )
    assert refused.value.details["errors"] == [
        {"field": "backend", "message": "not served by the queue", "type": "unsupported"}
    ]
    assert not CAPABILITIES["gemini"].batch and CAPABILITIES["pgvector"].batch
    assert len(gemini.calls) == 2 and pgvector.calls == []


def test_a_batch_turns_gemini_and_invalid_bodies_into_error_items_in_place() -> None:
    pgvector = Recording()

    def no_gemini() -> Recording:
        raise AssertionError("a batch built the Gemini backend")

    backends = Backends(lambda: pgvector, no_gemini)
    backends.retrieve_batch(
        [{"query": "a", "grade": 0.0}, {"query": "b", "grade": 0.0, "store": "fileSearchStores/x"}, {}],
        OPEN_GRANT,
    )
    first, second, third = pgvector.batches[0]
    assert isinstance(first, RetrieveRequest) and first.query == "a"
    assert isinstance(second, InvalidRequestError) and "not served in a batch" in second.message
    assert isinstance(third, InvalidRequestError) and third.code == "validation_error"
