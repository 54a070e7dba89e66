"""Which retrieves are expensive, and the per-process limit on how many of them run at once.

Pure: no database client. Measured with `python -m bench.query_cost` on msmarco-5k (5,001 chunks;
2 shared cores under other work, so orders of magnitude only; docs/benchmarks.md, "Noisy
neighbours"): the search step takes 3-6 ms dense, 24-40 ms hybrid with 6 to 16 words (up to 16
keyword terms cost what a typical hybrid question does), about twice that with 64 words; a whole
MMR 50-deep retrieve takes 5-10 times a dense one (MMR runs in Python); the local model embeds a
query of 8,000 characters (cut at 256 tokens) in 11-15 times a short question's time. So many
keyword terms, a deep MMR and a long query are the expensive kinds, with whole batches (up to 20
searches and their embeddings in one request): they get a shorter statement timeout and at most
EXPENSIVE_SEARCH_CONCURRENCY slots.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from retrieval_core.exceptions import DatabaseOverloadedError

# A hybrid query with more keyword terms than this is expensive (the dev sets' median is 2-12 words).
EXPENSIVE_KEYWORD_TERMS = 16
# An MMR rerank deeper than this reads that many stored vectors and compares each pair.
EXPENSIVE_MMR_DEPTH = 20
# A query longer than this takes several times an ordinary one to embed (the dev sets' longest: 204).
EXPENSIVE_QUERY_CHARS = 1_000


def is_expensive(query_chars: int, keyword_terms: int, mmr_depth: int | None) -> bool:
    """Whether a retrieve of this query length, keyword terms (0: none) and MMR depth is expensive."""
    return (
        query_chars > EXPENSIVE_QUERY_CHARS
        or keyword_terms > EXPENSIVE_KEYWORD_TERMS
        or (mmr_depth or 0) > EXPENSIVE_MMR_DEPTH
    )


class ExpensiveSlots:
    """At most `limit` expensive searches (or other costly work: documents' parsing) at once in this
    process; a thread may re-enter its own slot.

    A request that finds every slot taken waits at most `wait_s`, then gets 503 `overloaded` saying
    `busy` and naming `setting`: ordinary requests keep the rest of the connection pool and the CPU.
    """

    def __init__(
        self,
        limit: int,
        wait_s: float,
        busy: str = "too many expensive searches (long hybrid queries, deep MMR, batches) are running: "
        "retry shortly, or send a shorter query",
        setting: str = "EXPENSIVE_SEARCH_CONCURRENCY",
    ) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        self._wait_s = wait_s
        self._busy = busy
        self._setting = setting
        self._held = threading.local()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """A slot for the duration of the block (the one this thread holds already, if any)."""
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            try:
                yield
            finally:
                self._held.depth -= 1
            return
        if not self._slots.acquire(timeout=self._wait_s):
            raise DatabaseOverloadedError(self._busy, {"limit": self._setting})
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            self._slots.release()
