"""Scores and ordering. Pure: no I/O.

Every score the service returns is a similarity, higher is better. For vectors it
is `1 - cosine distance`, in [-1, 1]; for unit-length embeddings usually in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from retrieval_core.db.scored_chunk import ScoredChunk


def apply_threshold(chunks: Iterable[ScoredChunk], grade: float) -> list[ScoredChunk]:
    """Keep chunks whose similarity is at least `grade`, in their given order. None met it: empty list."""
    return [c for c in chunks if c.score is not None and c.score >= grade]


def at_least(
    chunks: Iterable[ScoredChunk], scores: Mapping[tuple[str, int], float], minimum: float
) -> list[ScoredChunk]:
    """Keep chunks whose score in `scores` (e.g. the fused score) is at least `minimum`, in their order."""
    return [c for c in chunks if scores[c.key] >= minimum]


def unit_vector(values: Sequence[float]) -> list[float]:
    """`values` scaled to length 1 (cosine distance ignores length), computed without overflow.

    A vector already of length 1 within 1e-6 (what embedding models return) is returned as it is.

    pgvector stores single-precision floats and accumulates in them: a caller's vector with
    components near 1e30 would overflow there and score NaN, and one near 1e300 cannot be stored.
    Scaling by the largest component first keeps every step finite. A zero vector is the caller's
    error and is refused before this is called.
    """
    # math.hypot scales internally: it overflows only when the length itself exceeds a double.
    norm = math.hypot(*values)
    if abs(norm - 1.0) <= 1e-6:
        return values if isinstance(values, list) else list(values)
    if norm == 0.0:
        raise ValueError("a zero vector has no direction")
    if math.isinf(norm):
        largest = max(abs(v) for v in values)
        values = [v / largest for v in values]
        norm = math.hypot(*values)
    return [v / norm for v in values]
