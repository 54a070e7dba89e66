"""The relevance every fake reranker gives: the share of query words found in the text. Hand-checkable."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+")


def overlap_score(query: str, text: str) -> float:
    """|query words ∩ text words| / |query words|, in 0..1 (0 for a query without words)."""
    query_words = set(_WORD.findall(query.lower()))
    if not query_words:
        return 0.0
    return len(query_words & set(_WORD.findall(text.lower()))) / len(query_words)


def ranked(query: str, texts: list[str]) -> list[tuple[int, float]]:
    """(index, score) best first, ties in input order, as rerank APIs answer."""
    return sorted(((i, overlap_score(query, t)) for i, t in enumerate(texts)), key=lambda item: -item[1])
