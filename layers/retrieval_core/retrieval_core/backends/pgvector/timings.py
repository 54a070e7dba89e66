"""Stage timings of a retrieve: into the response's Timings and out as metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from retrieval_core.observability import metrics

if TYPE_CHECKING:
    from retrieval_core.schemas.retrieve import Timings

# The metric each stage's time is reported as (the stack's dashboard plots them).
STAGE_METRICS = {"embed": "EmbedTime", "search": "SearchTime", "rerank": "RerankTime"}


@contextmanager
def stopwatch(timings: Timings, stage: str) -> Iterator[None]:
    """Add the time the block takes to `timings.<stage>`, and report it as the stage's metric."""
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed_ms = (time.perf_counter() - start) * 1000
        setattr(timings, stage, round(getattr(timings, stage) + elapsed_ms, 3))
        metrics.milliseconds(STAGE_METRICS[stage], elapsed_ms)
