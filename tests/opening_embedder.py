"""An embedder for test stores of long chunks whose tests measure what comes back, not what ranks first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# About 40 tokens of the test texts: their distinct opening sentence and a few words after it.
OPENING_CHARS = 200


class OpeningEmbedder:
    """The service's own embedder (same model name and dimension), given each text's first OPENING_CHARS.

    The local model reads at most 256 tokens of a text (about 1,000 characters), and embedding those is
    what made the stores of long chunks slow to write (seconds per 100 texts on 2 cores); 40 tokens cost a
    fraction of that. The vectors are still the model's, of each chunk's own opening words, and are
    written through the production write path (tests/writing.py); the stored content is the full text.
    """

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder

    @property
    def model(self) -> str:
        return str(self._embedder.model)

    @property
    def dimension(self) -> int:
        return int(self._embedder.dimension)

    def embed(self, texts: Sequence[str], kind: Any) -> list[list[float]]:
        vectors: list[list[float]] = self._embedder.embed([t[:OPENING_CHARS] for t in texts], kind)
        return vectors
