"""Split text into overlapping chunks. Pure: no I/O.

Sizes are in characters (Unicode code points), so a chunk never ends inside a
multi-byte UTF-8 sequence. Cuts prefer a paragraph break, then a sentence end,
then any whitespace, and fall back to a hard cut only inside one very long word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from retrieval_core.parsers.base import Block

_SENTENCE_END = re.compile(r"[.!?…。！？]\s")

# How a store cuts blocks into chunks: `fixed`, chunks of the block's text alone; `contextual`, the same
# chunks, each embedded and keyword-indexed after a header naming where it sits (the section path or the
# page), while the text returned stays the chunk's own.
ChunkingStrategy = Literal["fixed", "contextual"]
CHUNKING_STRATEGIES: tuple[ChunkingStrategy, ...] = ("fixed", "contextual")
# A store's own chunking, as the HTTP API takes it; overlap at most half of the size.
MIN_CHUNK_SIZE = 100
MAX_CHUNK_SIZE = 8_000


@dataclass(frozen=True, slots=True)
class Chunking:
    """A store's chunking: its strategy, the most characters a chunk holds, and how many of them the
    next chunk of the same block repeats."""

    strategy: ChunkingStrategy = "fixed"
    size: int = 1_000
    overlap: int = 150

    def __post_init__(self) -> None:
        if self.strategy not in CHUNKING_STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(CHUNKING_STRATEGIES)}")
        # What the chunker needs; the HTTP API holds a store's own chunking to narrower bounds.
        if self.size < 1 or not 0 <= self.overlap < self.size:
            raise ValueError("size must be positive and overlap at least 0 and smaller than size")

    def as_json(self) -> dict[str, Any]:
        """The stored and served form: `{"strategy", "size", "overlap"}`."""
        return {"strategy": self.strategy, "size": self.size, "overlap": self.overlap}

    @classmethod
    def of_store(cls, value: tuple[str, int, int]) -> Chunking:
        """A store row's chunking, (strategy, size, overlap)."""
        strategy, size, overlap = value
        for known in CHUNKING_STRATEGIES:
            if strategy == known:
                return cls(known, size, overlap)
        raise ValueError(f"strategy must be one of {', '.join(CHUNKING_STRATEGIES)}")


def chunking_of(own: tuple[str, int, int] | None, deployment: Chunking) -> Chunking:
    """The chunking a store applies: its own (a store row's (strategy, size, overlap)), else the
    deployment's."""
    return Chunking.of_store(own) if own is not None else deployment


def chunk_text(text: str, max_chars: int, overlap: int) -> list[str]:
    """Return chunks of at most `max_chars` characters; consecutive chunks share about `overlap`."""
    text = text.replace("\r\n", "\n")
    return [text[start:end] for start, end in chunk_spans(text, max_chars, overlap)]


def chunk_spans(text: str, max_chars: int, overlap: int) -> list[tuple[int, int]]:
    """Where each chunk of `text` starts and ends, whitespace trimmed (see `chunk_text`)."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    if not 0 <= overlap < max_chars:
        raise ValueError("overlap must be at least 0 and smaller than max_chars")
    start, stop = len(text) - len(text.lstrip()), len(text.rstrip())
    spans: list[tuple[int, int]] = []
    while start < stop:
        end = min(start + max_chars, stop)
        if end < stop:
            end = _best_cut(text, start, end)
        piece_start = start + len(text[start:end]) - len(text[start:end].lstrip())
        piece_end = start + len(text[start:end].rstrip())
        if piece_start < piece_end:
            spans.append((piece_start, piece_end))
        if end >= stop:
            break
        next_start = _next_start(text, end - overlap, end) if overlap else end
        # A chunk cut short at a break can be shorter than the overlap, and a chunk's leading whitespace
        # is trimmed: then the next one would not start after this one's text (a repeat of it, or a loop
        # that never ends). Such a chunk gets no overlap.
        start = next_start if next_start > max(start, piece_start) else end
    return spans


def _best_cut(text: str, start: int, end: int) -> int:
    """The latest natural break in the second half of text[start:end]."""
    floor = start + (end - start) // 2
    window = text[floor:end]
    para = window.rfind("\n\n")
    if para != -1:
        return floor + para + 2
    sentence_ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if sentence_ends:
        return floor + sentence_ends[-1]
    space = max(window.rfind(" "), window.rfind("\n"), window.rfind("\t"))
    if space != -1:
        return floor + space + 1
    return end


def _next_start(text: str, candidate: int, end: int) -> int:
    """Start the overlap at a word boundary so no chunk begins mid-word."""
    candidate = max(candidate, 0)
    if candidate == 0 or text[candidate - 1].isspace():
        return candidate
    space = text.find(" ", candidate, end)
    return space + 1 if space != -1 else candidate


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document and the metadata of the block it was cut from."""

    text: str
    metadata: dict[str, Any]


def chunk_blocks(blocks: Iterable[Block], max_chars: int, overlap: int) -> list[Chunk]:
    """Structure first, then size: each block is chunked on its own, so no chunk spans two blocks."""
    return [
        Chunk(piece, dict(block.metadata))
        for block in blocks
        for piece in chunk_text(block.text, max_chars, overlap)
    ]
