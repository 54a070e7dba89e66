"""Maximal marginal relevance: reorder candidates to trade relevance for diversity. Pure; no I/O.

It works on the embeddings the vector search already returned: nothing is embedded again
(re-embedding every candidate would cost one provider call per retrieve). Plain Python: the Lambda
layer carries no numpy, and at most 100 candidates are reordered.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

DEFAULT_LAMBDA = 0.7


def maximal_marginal_relevance(
    query: Sequence[float],
    candidates: Sequence[Sequence[float]],
    k: int,
    lambda_: float = DEFAULT_LAMBDA,
) -> list[int]:
    """Indices of up to `k` candidates in selection order.

    Each step picks the candidate maximising `lambda_ * cos(query, c) - (1 - lambda_) * max cos(c, s)`
    over the already selected `s`; the first pick is the most relevant candidate. `lambda_ = 1` is the
    plain relevance order, `lambda_ = 0` picks the candidate least like those already picked. Ties go to
    the lower index, so the incoming (vector) order breaks them. A zero vector has cosine 0 with
    everything. Returns `min(k, len(candidates))` distinct indices; `k <= 0` returns [].

    Raises ValueError when `lambda_` is outside 0..1, the vectors' lengths differ or hold NaN/inf.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must be within 0..1, got {lambda_}")
    count = min(k, len(candidates))
    if count <= 0:
        return []
    if any(len(c) != len(query) for c in candidates):
        raise ValueError(f"the query ({len(query)} dims) and every candidate need the same length")
    if not all(math.isfinite(x) for vector in (query, *candidates) for x in vector):
        raise ValueError("the query and candidate vectors must hold finite numbers")

    units = [_unit(c) for c in candidates]
    relevance = [_dot(u, _unit(query)) for u in units]
    first = max(range(len(units)), key=lambda i: (relevance[i], -i))
    selected = [first]
    # The highest similarity of each candidate to anything selected so far, updated per pick: k * n dot
    # products in all, never the n * n matrix.
    redundancy = [_dot(u, units[first]) for u in units]
    remaining = set(range(len(units))) - {first}
    while len(selected) < count:
        pick = max(remaining, key=lambda i: (lambda_ * relevance[i] - (1.0 - lambda_) * redundancy[i], -i))
        selected.append(pick)
        remaining.discard(pick)
        redundancy = [
            max(r, _dot(units[i], units[pick])) if i in remaining else r for i, r in enumerate(redundancy)
        ]
    return selected


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(map(operator.mul, a, b))


def _unit(vector: Sequence[float]) -> Sequence[float]:
    norm = math.sqrt(_dot(vector, vector))
    # A zero vector stays zero rather than becoming NaN.
    return [x / norm for x in vector] if norm > 0 else vector
