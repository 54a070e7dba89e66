"""Fusing a vector ranking with a keyword ranking. Pure: no I/O.

Adding the raw scores of two lists of different scales lets one signal swamp the other.
Here both modes first put the two signals on one footing, and every fused score is in [0, 1]:

- `rrf`: reciprocal rank fusion, sum of 1 / (k + rank) over the lists a chunk is in, divided by its
  maximum 2 / (k + 1), so that a chunk first in both lists scores 1.0 and first in one only 0.5.
- `weighted`: a convex combination `(vector_weight * v + keyword_weight * w) / (vector_weight +
  keyword_weight)`, where v is the chunk's vector similarity and w its keyword score, each scaled to
  [0, 1] over all candidates by the `normalization`:
  - `minmax`: (score - lowest) / (highest - lowest);
  - `max`: score / highest, the lowest taken as 0 ("theoretical min-max": 0 is the least a keyword
    score can be, and similarities below 0 count as 0). Unlike min-max, a chunk's scaled score does
    not depend on how poor the weakest candidate of this query happens to be.
  Every candidate has a vector similarity (it is computed for keyword hits too, rather than taken as 0);
  a chunk the keyword query does not match has keyword score 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from retrieval_core.db.scored_chunk import ScoredChunk

Fusion = Literal["rrf", "weighted"]
Normalization = Literal["minmax", "max"]
RRF_K = 60
# The k a request may ask for. Below 1 it stops damping (at k = 0 rank 1 weighs twice rank 2); above
# 1,000 the at most 100 ranks of a list differ by under 10% (1/1001 against 1/1100), so fusion would
# hardly see ranks and only count the lists a chunk is in.
RRF_K_MIN, RRF_K_MAX = 1, 1000

# A chunk: (document id, chunk index).
Key = tuple[str, int]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Key]], k: int = RRF_K) -> dict[Key, float]:
    """RRF score of every key in any ranking (best first, rank 1 is the first item)."""
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


def unit_reciprocal_rank_fusion(rankings: Sequence[Sequence[Key]], k: int = RRF_K) -> dict[Key, float]:
    """RRF divided by its maximum, len(rankings) / (k + 1): first in every ranking scores exactly 1.0."""
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            # (k + 1) / (k + rank) is 1.0 exactly at rank 1, which 1 / (k + 1) * (k + 1) need not be.
            scores[key] = scores.get(key, 0.0) + (k + 1) / (k + rank)
    return {key: score / len(rankings) for key, score in scores.items()}


def min_max(scores: Mapping[Key, float]) -> dict[Key, float]:
    """Scores scaled to [0, 1]; all equal: all 1 (each is the best there is), none: empty."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def max_scaled(scores: Mapping[Key, float]) -> dict[Key, float]:
    """Scores divided by the highest, below 0 counted as 0; no score above 0: all 0, none: empty."""
    if not scores:
        return {}
    high = max(scores.values())
    if high <= 0:
        return dict.fromkeys(scores, 0.0)
    return {key: max(value, 0.0) / high for key, value in scores.items()}


_SCALERS: dict[Normalization, Callable[[Mapping[Key, float]], dict[Key, float]]] = {
    "minmax": min_max,
    "max": max_scaled,
}


def weighted_fusion(
    vector_scores: Mapping[Key, float],
    keyword_scores: Mapping[Key, float],
    vector_weight: float,
    keyword_weight: float,
    normalization: Normalization = "minmax",
) -> dict[Key, float]:
    """`(vector_weight * v + keyword_weight * w) / (vector_weight + keyword_weight)` for every key.

    v and w are the scores scaled by `normalization`. The weights are relative (1 / 1 is 0.5 / 0.5), so
    the result is in [0, 1]; they must not both be 0. A key missing from one map contributes 0 for that
    signal. Keyword scores are scaled over every candidate, non-matches (0) included, and when nothing
    matches the keyword side adds nothing.
    """
    total = vector_weight + keyword_weight
    if total <= 0:
        raise ValueError("the weights must not both be 0")
    scale = _SCALERS[normalization]
    vector = scale(vector_scores)
    matched = any(score > 0 for score in keyword_scores.values())
    keyword = scale(keyword_scores) if matched else {}
    return {
        key: (vector_weight * vector.get(key, 0.0) + keyword_weight * keyword.get(key, 0.0)) / total
        for key in {*vector_scores, *keyword_scores}
    }


def ordered(scores: Mapping[Key, float]) -> list[Key]:
    """Keys by score, best first; ties by document id and chunk index, so the order is stable."""
    return sorted(scores, key=lambda key: (-scores[key], key))


def fuse(
    candidates: Sequence[ScoredChunk],
    fusion: Fusion,
    vector_weight: float,
    keyword_weight: float,
    *,
    rrf_k: int = RRF_K,
    normalization: Normalization = "minmax",
) -> dict[Key, float]:
    """Fused score in [0, 1] of every candidate of a hybrid search (candidates nearest first)."""
    if fusion == "rrf":
        by_vector = [c.key for c in candidates if c.vector_hit]
        keyword_hits = [c for c in candidates if c.keyword_score is not None]
        by_keyword = [c.key for c in sorted(keyword_hits, key=lambda c: (-(c.keyword_score or 0.0), c.key))]
        scores = unit_reciprocal_rank_fusion([by_vector, by_keyword], rrf_k)
        return {c.key: scores.get(c.key, 0.0) for c in candidates}
    return weighted_fusion(
        {c.key: c.score for c in candidates if c.score is not None},
        {c.key: c.keyword_score or 0.0 for c in candidates},
        vector_weight,
        keyword_weight,
        normalization,
    )
