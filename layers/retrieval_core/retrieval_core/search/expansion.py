"""Neighbour expansion: a matched chunk returned with the chunks beside it in its block. Pure: no I/O.

A block (a PDF page, a heading's section) is cut into consecutive chunks that share an overlap; chunks
of one document with the same section and page are of one block. A window of the matched chunk and up
to `before` and `after` of its neighbours is joined into one text, each overlap kept once, and the
matched chunk's place in it is given as character offsets, so a client can highlight it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Metadata that names a chunk's block: chunks that differ in either were cut from different blocks.
BLOCK_KEYS = ("section", "pageNumber")
MAX_NEIGHBOURS = 5
# A shared run shorter than this is taken for chance (a word both chunks happen to end and start with),
# not for the overlap the chunker left.
MIN_OVERLAP = 16


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A stored chunk beside a matched one."""

    index: int
    content: str
    metadata: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Window:
    """A matched chunk with its neighbours: the joined text, the chunk indexes it spans, and where the
    matched chunk's own text sits in it."""

    text: str
    first: int
    last: int
    match_start: int
    match_end: int


def same_block(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two chunks' metadata name the same block."""
    return all(a.get(key) == b.get(key) for key in BLOCK_KEYS)


def overlap_of(previous: str, following: str, limit: int) -> int:
    """How many characters at the start of `following` repeat the end of `previous`: at most `limit`, and
    0 for a run shorter than MIN_OVERLAP."""
    for size in range(min(limit, len(previous), len(following)), MIN_OVERLAP - 1, -1):
        if previous.endswith(following[:size]):
            return size
    return 0


def window(
    matched: Neighbour, neighbours: Sequence[Neighbour], before: int, after: int, max_overlap: int
) -> Window:
    """`matched` joined with the neighbours of its block among `neighbours` (any order), up to `before`
    chunks before it and `after` after it, consecutive only: a gap or another block ends the window."""
    by_index = {n.index: n for n in neighbours if same_block(n.metadata, matched.metadata)}
    by_index[matched.index] = matched
    first = matched.index
    while first - 1 in by_index and matched.index - first < before:
        first -= 1
    last = matched.index
    while last + 1 in by_index and last - matched.index < after:
        last += 1
    text = ""
    match_start = match_end = 0
    for index in range(first, last + 1):
        piece = by_index[index].content
        if not text:
            start, text = 0, piece
        elif shared := overlap_of(text, piece, max_overlap):
            start, text = len(text) - shared, text + piece[shared:]
        else:
            start, text = len(text) + 1, f"{text}\n{piece}"
        if index == matched.index:
            match_start, match_end = start, start + len(piece)
    return Window(text, first, last, match_start, match_end)
