"""The interface every embedding provider implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from retrieval_core.exceptions import EmbeddingProviderError

EmbeddingKind = Literal["query", "document"]


class Embedder(Protocol):
    """Turns text into vectors. Implementations import their client on first use."""

    @property
    def model(self) -> str:
        """The model name recorded on each store this embedder writes."""
        ...

    @property
    def dimension(self) -> int:
        """The length of every vector this embedder returns."""
        ...

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        """Embed `texts` in one provider call per batch; the order of the result matches."""
        ...


def check_vectors(vectors: list[list[float]], count: int, dimension: int, provider: str) -> list[list[float]]:
    """Refuse a provider answer with the wrong number of vectors or wrong lengths."""
    if len(vectors) != count:
        raise EmbeddingProviderError(f"{provider} returned {len(vectors)} embeddings for {count} inputs")
    for vector in vectors:
        if len(vector) != dimension:
            raise EmbeddingProviderError(
                f"{provider} returned a {len(vector)}-dimensional embedding; expected {dimension} "
                "(set EMBEDDING_DIMENSION to the model's output size)"
            )
    return vectors
