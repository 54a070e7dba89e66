"""Running headers, footers and page numbers: lines repeated at the edges of a paged document's pages.
Pure: no I/O.

A line is furniture when it sits among the first or last `EDGE_LINES` non-empty lines of its page and
its shape repeats there on at least `MIN_PAGES` pages and `MIN_SHARE` of the pages with text. Its shape
is the line case-folded, NFKC, spaces collapsed and every number (and a line that is only a roman
numeral) made `#`, so "Page 3 of 10" and "Page 4 of 10" are one shape, and so are "12" and "13". A
running header whose text changes with the chapter ("Chapter 2: Vectors", "Chapter 5: Arrays") has a
second shape, its label: the word and number it starts with ("chapter #"), counted the same way; a
line that is only the label ("Chapter 3" above a chapter's title) is never taken by its label alone.

Furniture is short: a line of more than `MAX_CHARS` characters is body text whatever it repeats (a
page holding one long line, or paragraphs that all open with "Revision 3. ...", keeps it).

Lines are removed from each edge inwards and the removal stops at the first line that is not
furniture, so a body line is never taken from between two kept lines. Share: alternating even and odd
headers each cover about half of the pages, so `MIN_SHARE` is well below a half.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

EDGE_LINES = 3
MIN_PAGES = 3
MIN_SHARE = 0.3
# Longer than any running header or footer seen in typeset books and reports (about 60-100 characters).
MAX_CHARS = 120

_NUMBER = re.compile(r"\d+")
_ROMAN = re.compile(r"[ivxlcdm]+")
# A label: an optional page number, a word, a number (1, 2.3, IV), then more text.
_LABEL = re.compile(r"(?:# )?([^\W\d_]++) #(?:[.:-]?#)*+[.:]?(?= \S)")


def without_page_furniture(pages: Sequence[str]) -> list[str]:
    """Each page's text (lines split on `\\n`) less its running headers, footers and page numbers."""
    lines = [page.split("\n") for page in pages]
    edges = [_edge_indexes(page) for page in lines]
    with_text = sum(1 for edge in edges if edge)
    needed = max(MIN_PAGES, math.ceil(with_text * MIN_SHARE))
    if with_text < needed:
        return list(pages)
    shapes: Counter[str] = Counter()
    for page, edge in zip(lines, edges, strict=True):
        shapes.update({shape for index in edge for shape in _shapes(page[index])})
    repeated = {shape for shape, pages_with in shapes.items() if pages_with >= needed}
    if not repeated:
        return list(pages)
    kept = []
    for page, edge in zip(lines, edges, strict=True):
        dropped = _furniture(page, edge, repeated)
        kept.append("\n".join(line for index, line in enumerate(page) if index not in dropped))
    return kept


def _edge_indexes(page: list[str]) -> list[int]:
    """The indexes of the first and last EDGE_LINES non-empty lines, top first then bottom."""
    filled = [index for index, line in enumerate(page) if line.strip()]
    top = filled[:EDGE_LINES]
    bottom = [index for index in filled[-EDGE_LINES:] if index not in top]
    return top + bottom


def _furniture(page: list[str], edge: list[int], repeated: set[str]) -> set[int]:
    """The edge lines of `page` that are furniture, taken from each edge inwards."""
    filled = [index for index, line in enumerate(page) if line.strip()]
    dropped: set[int] = set()
    for inward in (filled[:EDGE_LINES], filled[::-1][:EDGE_LINES]):
        for index in inward:
            if index not in edge or not repeated.intersection(_shapes(page[index])):
                break
            dropped.add(index)
    return dropped


def _shapes(line: str) -> list[str]:
    """The line's shape and, when it starts with a label followed by more text, the label; none for a
    line too long to be furniture."""
    text = " ".join(unicodedata.normalize("NFKC", line).casefold().split())
    if len(text) > MAX_CHARS:
        return []
    shape = "#" if _ROMAN.fullmatch(text) else _NUMBER.sub("#", text)
    label = _LABEL.match(shape)
    return [shape, "label:" + label.group(1) + " #"] if label else [shape]
