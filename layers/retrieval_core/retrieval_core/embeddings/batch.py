"""Embedding the queries of a batch together."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_core.embeddings.base import Embedder
from retrieval_core.exceptions import RetrievalError


class QueryVectors:
    """The batch's queries, embedded together in one provider call when the first one is needed.

    If every job of the batch turns out to be answered already (a redelivery), nothing is embedded.
    """

    def __init__(self, queries: Sequence[str]) -> None:
        self._queries = list(dict.fromkeys(queries))
        self._vectors: dict[str, list[float]] | None = None
        self._failure: RetrievalError | None = None

    def vector_for(self, query: str, embedder: Embedder) -> list[float]:
        if self._vectors is None and self._failure is None:
            try:
                vectors = embedder.embed(self._queries, "query")
            except RetrievalError as exc:
                # Remembered: the other jobs of this batch fail alike instead of calling the provider again.
                self._failure = exc
                raise
            self._vectors = dict(zip(self._queries, vectors, strict=True))
        if self._failure is not None:
            raise self._failure
        assert self._vectors is not None
        return self._vectors[query]
