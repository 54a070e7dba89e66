"""Which retrieves are expensive, and the per-process limit on how many of them run at once.

Pure: no database client. Measured on msmarco-5k (5,001 chunks, 2 shared cores, other work running;
docs/benchmarks.md, "Bounded cost"): the search step of a retrieve takes about 2 ms dense, 9 ms
hybrid on a 6-word question, 37 ms hybrid on 64 words, 30 ms hybrid 50 deep, 30-60 ms MMR 50 deep
(it reads 50 stored vectors); the local model embeds a 29-character query in 3 ms and one of 6,400
characters (cut at 256 tokens) in 42 ms. So a keyword side of many terms, a deep MMR and a long query
each cost 5-30 times an ordinary retrieve; those, and whole batches (up to 20 searches and their
embeddings in one request), are the expensive kinds: they get a shorter statement timeout and at
most EXPENSIVE_SEARCH_CONCURRENCY slots.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .exceptions import DatabaseOverloadedError

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
    """At most `limit` expensive searches at once in this process; a thread may re-enter its own slot.

    A request that finds every slot taken waits at most `wait_s`, then gets 503 `overloaded`: ordinary
    requests keep the rest of the connection pool and the CPU.
    """

    def __init__(self, limit: int, wait_s: float) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        self._wait_s = wait_s
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
            raise DatabaseOverloadedError(
                "too many expensive searches (long hybrid queries, deep MMR, batches) are running: "
                "retry shortly, or send a shorter query",
                {"limit": "EXPENSIVE_SEARCH_CONCURRENCY"},
            )
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            self._slots.release()
