"""Exact duplicates shown once: documents with the same content, rows with the same text. Pure: no I/O.

Two documents of one store are duplicates when their content_sha256 is equal: the same file's bytes
under two ids, or the same record (documents/prepare.py says what is hashed). Of each group, a search
keeps the chunks of the document it meets first (the best-ranked) and drops the others' chunks. A chunk
without a hash (an attached table's row, a Gemini File Search chunk) is compared by its text instead:
a row whose text equals a better-ranked row's is dropped.

Collapsing happens on the candidates, before fusion, reranking and the cut to the results asked for,
and `distinct_candidates` searches deeper when duplicates took candidates' places: the answer holds as
many results as it would if the duplicates were not stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from retrieval_core.db.scored_chunk import ScoredChunk

T = TypeVar("T")

# The first search asks for this share more candidates than wanted (at least FIRST_MARGIN_MIN more), so
# that a few copies cost no second search: the exact scan sorts every row whatever the depth, and the
# HNSW scan visits ef_search (default 40) candidates anyway.
FIRST_MARGIN = 0.5
FIRST_MARGIN_MIN = 5
# A search whose candidates lost places to duplicates is run again, deeper, at most this many times...
REFILL_SEARCHES = 2
# ... and never deeper than this many times the candidates asked for.
MAX_DEPTH_FACTOR = 4


def collapse_duplicates(chunks: Sequence[ScoredChunk]) -> list[ScoredChunk]:
    """`chunks` (best first) without those of a document whose content an earlier chunk's document has,
    nor, for chunks without a content hash, those whose text an earlier one has."""
    first_document: dict[str, str] = {}
    by_hash = [
        c
        for c in chunks
        if c.content_sha256 is None
        or first_document.setdefault(c.content_sha256, c.document_id) == c.document_id
    ]
    return first_of_each_text(by_hash, lambda c: c.content if c.content_sha256 is None else None)


def first_of_each_text(items: Iterable[T], text_of: Callable[[T], str | None]) -> list[T]:
    """`items` (best first) without those whose text an earlier one has; an item without a text (None or
    empty) says nothing about sameness and is kept."""
    seen: set[str] = set()
    kept: list[T] = []
    for item in items:
        text = text_of(item)
        if text:
            if text in seen:
                continue
            seen.add(text)
        kept.append(item)
    return kept


def distinct_candidates(search: Callable[[int], list[ScoredChunk]], limit: int) -> list[ScoredChunk]:
    """The candidates `search(limit)` would give if no duplicate were stored, duplicates collapsed.

    `search(n)` returns the n nearest chunks (nearest first) and, in a hybrid search, the n best keyword
    hits beside them. The first search goes FIRST_MARGIN deeper than `limit`. When collapsing leaves
    fewer than `limit` of either while the search filled its `n`, it runs again, deeper by the share of
    duplicates seen (REFILL_SEARCHES times at most, never past MAX_DEPTH_FACTOR x `limit`). The answer
    is cut back to the `limit` nearest and the `limit` best keyword hits, as one search of `limit` gives.
    """
    depth = limit + max(FIRST_MARGIN_MIN, int(limit * FIRST_MARGIN))
    found = search(depth)
    distinct = collapse_duplicates(found)
    for _ in range(REFILL_SEARCHES):
        short = _short(found, distinct, depth, limit)
        if short == 0 or depth >= limit * MAX_DEPTH_FACTOR:
            break
        # As many more as are missing, scaled by the share of the candidates that were duplicates.
        depth = min(limit * MAX_DEPTH_FACTOR, depth + -(-short * len(found) // max(len(distinct), 1)))
        found = search(depth)
        distinct = collapse_duplicates(found)
    return _first(distinct, limit)


def _short(found: list[ScoredChunk], distinct: list[ScoredChunk], depth: int, limit: int) -> int:
    """How many distinct vector or keyword hits are missing, when the search could have given more."""
    missing = 0
    for hit in (_is_vector_hit, _is_keyword_hit):
        full = sum(1 for c in found if hit(c)) >= depth
        if full:
            missing = max(missing, limit - sum(1 for c in distinct if hit(c)))
    return missing


def _first(chunks: list[ScoredChunk], limit: int) -> list[ScoredChunk]:
    """The `limit` nearest of `chunks` and their `limit` best keyword hits, in the given order, each marked
    as one search of `limit` marks it: a vector hit only among the nearest, a keyword score only among
    the best keyword hits (fusion ranks each list by these)."""
    nearest = {c.key for c in [c for c in chunks if c.vector_hit][:limit]}
    keyword = {
        c.key
        for c in sorted(
            (c for c in chunks if c.keyword_score is not None), key=lambda c: -(c.keyword_score or 0.0)
        )[:limit]
    }
    kept: list[ScoredChunk] = []
    for chunk in chunks:
        in_nearest, in_keyword = chunk.key in nearest, chunk.key in keyword
        if not (in_nearest or in_keyword):
            continue
        if chunk.vector_hit != in_nearest or (chunk.keyword_score is not None and not in_keyword):
            chunk = replace(
                chunk, vector_hit=in_nearest, keyword_score=chunk.keyword_score if in_keyword else None
            )
        kept.append(chunk)
    return kept


def _is_vector_hit(chunk: ScoredChunk) -> bool:
    return chunk.vector_hit


def _is_keyword_hit(chunk: ScoredChunk) -> bool:
    return chunk.keyword_score is not None
