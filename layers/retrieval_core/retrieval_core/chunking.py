"""Split text into overlapping chunks. Pure: no I/O.

Sizes are in characters (Unicode code points), so a chunk never ends inside a
multi-byte UTF-8 sequence. Cuts prefer a paragraph break, then a sentence end,
then any whitespace, and fall back to a hard cut only inside one very long word.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"[.!?…。！？]\s")


def chunk_text(text: str, max_chars: int, overlap: int) -> list[str]:
    """Return chunks of at most `max_chars` characters; consecutive chunks share about `overlap`."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    if not 0 <= overlap < max_chars:
        raise ValueError("overlap must be at least 0 and smaller than max_chars")
    text = text.replace("\r\n", "\n").strip()
    if not text:
        return []
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + max_chars, len(text))
        if end < len(text):
            end = _best_cut(text, start, end)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        start = _next_start(text, end - overlap, end) if overlap else end
    return chunks


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
