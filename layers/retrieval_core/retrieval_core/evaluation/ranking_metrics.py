"""Ranking metrics and the paired bootstrap. Pure: no I/O, no numpy.

Conventions (those of BEIR's evaluation, pytrec_eval):
- nDCG@k gains `2^grade - 1` with discount `log2(rank + 1)`; the ideal ranking orders every judged
  grade of the query, best first.
- recall@k counts documents judged with grade >= 1.
- Only judged queries are scored; the runner leaves the others out.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Judgments = Mapping[str, int]


def gain(grade: int) -> float:
    """Exponential gain: a grade-3 document is worth 7 grade-1 ones; grade 0 or below is worth nothing."""
    return float(2**grade - 1) if grade > 0 else 0.0


def ndcg_at(ranking: Sequence[str], judged: Judgments, k: int = 10) -> float:
    """nDCG@k of a ranking of document ids (best first) against one query's judgments."""
    dcg = sum(gain(judged.get(doc, 0)) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    ideal = sorted(judged.values(), reverse=True)[:k]
    best = sum(gain(g) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best > 0 else 0.0


def recall_at(ranking: Sequence[str], judged: Judgments, k: int = 100) -> float:
    """Share of the relevant (grade >= 1) documents found in the top k."""
    relevant = {doc for doc, grade in judged.items() if grade >= 1}
    return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0


def documents_of(chunk_documents: Iterable[str]) -> list[str]:
    """Document ids of a chunk ranking, each at the rank of its best chunk (its first occurrence)."""
    return list(dict.fromkeys(chunk_documents))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0-1) with linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


@dataclass(frozen=True, slots=True)
class Difference:
    """Mean paired difference (method - baseline) over queries, with its bootstrap interval."""

    mean: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        """Whether the interval excludes 0."""
        return self.low > 0 or self.high < 0


def interval_of(differences: Sequence[float], draws: Iterable[Sequence[int]], level: float) -> Difference:
    """The mean of `differences` and the percentile interval of its means over `draws` (index lists)."""
    means = [statistics.fmean(differences[i] for i in draw) for draw in draws]
    tail = (1 - level) / 2
    return Difference(statistics.fmean(differences), percentile(means, tail), percentile(means, 1 - tail))


def paired_bootstrap(
    scores: Sequence[float],
    baseline: Sequence[float],
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Difference:
    """Mean of `scores - baseline` (per query, paired) and its bootstrap interval.

    Each resample draws as many queries as there are, with replacement, from a generator seeded with
    `seed`, so the same inputs always give the same interval.
    """
    if len(scores) != len(baseline):
        raise ValueError("paired scores need the same queries")
    if not scores:
        raise ValueError("no queries")
    differences = [a - b for a, b in zip(scores, baseline, strict=True)]
    rng = random.Random(seed)
    indices = range(len(differences))
    draws = (rng.choices(indices, k=len(differences)) for _ in range(resamples))
    return interval_of(differences, draws, level)
