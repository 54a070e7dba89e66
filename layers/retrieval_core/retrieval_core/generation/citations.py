"""From a generator's raw answer to the final text and its citations. Pure.

Markers (`[2]`, `[1, 3]`, `[1][3]`) are removed from the text, with the spaces before them. Each
group of markers cites the words before it: from the start of its sentence, or from the end of the
previous citation in the same sentence, to where the markers stood. Spans count Unicode code points
of the final text. A number that names no source given to the model is dropped and counted; so is a
native citation that names none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval_core.generation.base import NativeCitation

# One or more bracketed groups of source numbers, with the spaces before them.
MARKERS = re.compile(r"[ \t]*(?:\[\s*\d{1,4}(?:\s*,\s*\d{1,4})*\s*\])+")
NUMBER = re.compile(r"\d+")
# Where a sentence ends: . ! ? (and their CJK forms), then a space or the end; or a line break.
SENTENCE_END = re.compile(r"[.!?。！？][\"')\]]*(?=\s|$)|\n")
LEADING = " \t\n,;:"


@dataclass(frozen=True, slots=True)
class Citation:
    """Code points [start, end) of the final text, supported by these sources (1-based numbers)."""

    start: int
    end: int
    sources: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CitedText:
    """The answer's final text, its citations in order, and how many cited numbers named no source."""

    text: str
    citations: list[Citation]
    dropped: int


def from_markers(raw: str, source_count: int) -> CitedText:
    """`raw` without its markers, and the citation each marker group makes."""
    pieces: list[str] = []
    groups: list[tuple[int, tuple[int, ...]]] = []  # (position in the final text, valid numbers)
    dropped = 0
    length = 0
    last = 0
    for match in MARKERS.finditer(raw):
        pieces.append(raw[last : match.start()])
        length += match.start() - last
        last = match.end()
        numbers = [int(n) for n in NUMBER.findall(match.group())]
        valid = tuple(dict.fromkeys(n for n in numbers if 1 <= n <= source_count))
        dropped += len(numbers) - sum(1 for n in numbers if 1 <= n <= source_count)
        if valid:
            groups.append((length, valid))
    pieces.append(raw[last:])
    text = "".join(pieces)
    citations: list[Citation] = []
    previous_end = 0
    for position, sources in groups:
        end = _end_before(text, position)
        start = _claim_start(text, end, previous_end)
        if start < end:
            citations.append(Citation(start, end, sources))
            previous_end = end
    return CitedText(text, citations, dropped)


def from_native(text: str, native: Sequence[NativeCitation], source_count: int) -> CitedText:
    """Citations a provider returned itself, checked: spans inside `text`, numbers naming a source."""
    citations: list[Citation] = []
    dropped = 0
    for item in native:
        valid = tuple(dict.fromkeys(n for n in item.sources if 1 <= n <= source_count))
        dropped += len(item.sources) - sum(1 for n in item.sources if 1 <= n <= source_count)
        start, end = max(0, item.start), min(len(text), item.end)
        if valid and start < end:
            citations.append(Citation(start, end, valid))
    return CitedText(text, sorted(citations, key=lambda c: (c.start, c.end)), dropped)


def _end_before(text: str, position: int) -> int:
    # A marker after the sentence's full stop ("blue. [1]") cites that sentence: the span ends at the stop.
    end = position
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _claim_start(text: str, end: int, previous_end: int) -> int:
    # The start of the sentence holding text[end - 1], not counting a sentence end at `end` itself.
    start = 0
    for match in SENTENCE_END.finditer(text, 0, max(0, end - 1)):
        start = match.end()
    start = max(start, previous_end)
    while start < end and text[start] in LEADING:
        start += 1
    return start


# What may still become a marker at the end of streamed text: spaces, then an unclosed bracket of numbers.
_OPEN_TAIL = re.compile(r"[ \t]*(?:\[[\d,\s]*)?\Z")


class MarkerFilter:
    """Removes markers from text that arrives in pieces: what `feed` and `flush` return, joined, is what
    `from_markers` gives for the whole text. A possible marker's start is held back until it is known."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, piece: str) -> str:
        """The part of the text so far that is known to be final, markers removed."""
        text = MARKERS.sub("", self._pending + piece)
        tail = _OPEN_TAIL.search(text)
        cut = tail.start() if tail is not None else len(text)
        self._pending = text[cut:]
        return text[:cut]

    def flush(self) -> str:
        """What was held back, once the text is complete."""
        rest, self._pending = MARKERS.sub("", self._pending), ""
        return rest
