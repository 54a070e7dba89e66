"""The HNSW index knobs of a search: service defaults, optionally overridden per request. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from retrieval_core.settings import (
    IterativeScan,
)


@dataclass(frozen=True, slots=True)
class IndexKnobs:
    """The effective values applied (with SET LOCAL) to one search."""

    ef_search: int
    iterative_scan: IterativeScan
    max_scan_tuples: int

    def overridden(
        self,
        ef_search: int | None = None,
        iterative_scan: IterativeScan | None = None,
        max_scan_tuples: int | None = None,
    ) -> IndexKnobs:
        """These knobs with each given value replacing the default."""
        changes: dict[str, Any] = {
            "ef_search": ef_search,
            "iterative_scan": iterative_scan,
            "max_scan_tuples": max_scan_tuples,
        }
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict[str, Any]:
        """camelCase, for cache keys."""
        values = asdict(self)
        return {
            "efSearch": values["ef_search"],
            "iterativeScan": values["iterative_scan"],
            "maxScanTuples": values["max_scan_tuples"],
        }
