"""Fusing a vector ranking with a keyword ranking. Pure: no I/O.

Seed 004 concatenated the two result lists and added raw scores of different scales.
Here both modes first put the two signals on one footing:

- `rrf`: reciprocal rank fusion, sum of 1 / (k + rank) over the lists a chunk is in (k = 60).
- `weighted`: min-max normalised scores, `vector_weight * v + keyword_weight * w`, where v is the
  chunk's vector similarity and w its keyword score, each normalised over all candidates. Every
  candidate has a vector similarity (it is computed for keyword hits too, where seed 004 gave 0);
  a chunk the keyword query does not match has keyword score 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from .ranking import ScoredChunk

Fusion = Literal["rrf", "weighted"]
RRF_K = 60

# A chunk: (document id, chunk index).
Key = tuple[str, int]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Key]], k: int = RRF_K) -> dict[Key, float]:
    """RRF score of every key in any ranking (best first, rank 1 is the first item)."""
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


def min_max(scores: Mapping[Key, float]) -> dict[Key, float]:
    """Scores scaled to [0, 1]; all equal: all 1 (each is the best there is), none: empty."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def weighted_fusion(
    vector_scores: Mapping[Key, float],
    keyword_scores: Mapping[Key, float],
    vector_weight: float,
    keyword_weight: float,
) -> dict[Key, float]:
    """`vector_weight * minmax(vector) + keyword_weight * minmax(keyword)` for every key of either map.

    A key missing from one map contributes 0 for that signal. Keyword scores are normalised over every
    candidate, non-matches (0) included, and when nothing matches the keyword side adds nothing.
    """
    vector = min_max(vector_scores)
    matched = any(score > 0 for score in keyword_scores.values())
    keyword = min_max(keyword_scores) if matched else {}
    return {
        key: vector_weight * vector.get(key, 0.0) + keyword_weight * keyword.get(key, 0.0)
        for key in {*vector_scores, *keyword_scores}
    }


def ordered(scores: Mapping[Key, float]) -> list[Key]:
    """Keys by score, best first; ties by document id and chunk index, so the order is stable."""
    return sorted(scores, key=lambda key: (-scores[key], key))


def fuse(
    candidates: Sequence[ScoredChunk], fusion: Fusion, vector_weight: float, keyword_weight: float
) -> dict[Key, float]:
    """Fused score of every candidate of a hybrid search (candidates nearest first)."""
    if fusion == "rrf":
        by_vector = [c.key for c in candidates if c.vector_hit]
        keyword_hits = [c for c in candidates if c.keyword_score is not None]
        by_keyword = [c.key for c in sorted(keyword_hits, key=lambda c: (-(c.keyword_score or 0.0), c.key))]
        scores = reciprocal_rank_fusion([by_vector, by_keyword])
        return {c.key: scores.get(c.key, 0.0) for c in candidates}
    return weighted_fusion(
        {c.key: c.score for c in candidates},
        {c.key: c.keyword_score or 0.0 for c in candidates},
        vector_weight,
        keyword_weight,
    )
