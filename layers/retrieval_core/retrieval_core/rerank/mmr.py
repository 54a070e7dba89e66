"""Maximal marginal relevance: reorder candidates to trade relevance for diversity. Pure; no I/O.

It works on the embeddings the vector search already returned: nothing is embedded again (seed 004
re-embedded every candidate for this). numpy is imported on call, to keep it out of cold starts.
"""

from __future__ import annotations

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

    import numpy as np

    query_vector = np.asarray(query, dtype=np.float64)
    matrix = np.asarray(candidates, dtype=np.float64)
    if query_vector.ndim != 1 or matrix.ndim != 2 or matrix.shape[1] != query_vector.shape[0]:
        raise ValueError(
            f"the query ({query_vector.shape}) and every candidate ({matrix.shape}) need the same length"
        )

    if not (np.all(np.isfinite(query_vector)) and np.all(np.isfinite(matrix))):
        raise ValueError("the query and candidate vectors must hold finite numbers")

    def unit(vectors: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
        # A zero vector stays zero rather than becoming NaN.
        result: np.ndarray = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return result

    candidates_unit = unit(matrix)
    relevance = candidates_unit @ unit(query_vector)
    similarity = candidates_unit @ candidates_unit.T

    selected = [int(np.argmax(relevance))]
    chosen = np.zeros(len(candidates), dtype=bool)
    chosen[selected[0]] = True
    # The highest similarity of each candidate to anything selected so far, updated per pick.
    redundancy = similarity[selected[0]].copy()
    while len(selected) < count:
        scores = lambda_ * relevance - (1.0 - lambda_) * redundancy
        scores[chosen] = -np.inf
        pick = int(np.argmax(scores))
        selected.append(pick)
        chosen[pick] = True
        np.maximum(redundancy, similarity[pick], out=redundancy)
    return selected
