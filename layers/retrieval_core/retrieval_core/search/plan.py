"""Whether a filtered search scans its matching chunks exactly or walks the store's HNSW index.

Pure: no database client. The choice depends on two counts, never on a planner estimate (which moves
each time ANALYZE samples the table): the store's chunk count, kept exact by triggers, and the number
of chunks the filter matches, counted up to a limit and kept for a minute.

The cost model. An exact scan reads every one of the m matching chunks: its cost grows with m. An
iterative HNSW scan of a store of N chunks must visit about k·N/m index entries before k of them
pass the filter, each visit a graph step: its cost grows with N/m. The two are equal near
m = sqrt(r·k·N), where r is the ratio of a graph step's cost to an exact row's. Below that, the exact
scan is cheaper and exact; above it, the index is cheaper. Because both costs are equal where the
choice flips, latency has no step there (docs/benchmarks.md, the selectivity sweep of bench.scale).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

# r above. Measured on 200,000 chunks x 384 dimensions (bench.scale): an exact scan costs about
# 1.2-2 us a matching chunk, and a filter matching 1% of the store adds about 3.5 ms to an index scan,
# which puts the break-even near r = 1.5-3. The HNSW side also loses recall as the filter narrows
# (0.93 at 1%, 0.95 at 2% with ef_search 100), so the exact side gets the benefit of the doubt: r = 4.
EXACT_SCAN_COST_RATIO = 4.0


def exact_scan_limit(store_chunks: int, top_k: int, max_rows: int) -> int:
    """The most chunks a filter may match for the exact scan to answer it (0: never).

    sqrt(r·k·N), capped by `max_rows` (the EXACT_SEARCH_MAX_ROWS setting; 0 turns the exact path off).
    """
    if max_rows <= 0 or top_k <= 0:
        return 0
    return min(max_rows, math.ceil(math.sqrt(EXACT_SCAN_COST_RATIO * top_k * max(store_chunks, 0))))


class FilterSizes:
    """How many chunks each filter of each store matches, as counted up to a limit, for a while.

    Counting reads up to limit + 1 rows, so a count is kept for `ttl_s` seconds and serves every search
    with that filter meanwhile, whatever the limit (a store's limit moves with its size). Not per store
    version: a store being written to would count again after every write. So a decision may be up to
    `ttl_s` old; both paths return the same rows, only their speed differs. Bounded: the least recently
    used go first. Safe to share between threads.
    """

    def __init__(
        self, capacity: int = 4096, ttl_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._capacity = capacity
        self._ttl_s = ttl_s
        self._clock = clock
        # key -> (min(matching chunks, counted_to), counted_to, when)
        self._known: OrderedDict[Hashable, tuple[int, int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def at_most(self, key: Hashable, limit: int, count_up_to: Callable[[int], int]) -> bool:
        """Whether the filter of `key` matches at most `limit` chunks. `count_up_to(n)` counts, stopping
        at n; it is called only when no fresh count answers the question."""
        now = self._clock()
        with self._lock:
            known = self._known.get(key)
            if known is not None and now - known[2] < self._ttl_s:
                counted, counted_to, _ = known
                self._known.move_to_end(key)
                if counted < counted_to:  # the exact number of matching chunks
                    return counted <= limit
                if limit < counted_to:  # more than counted_to match, so more than limit
                    return False
        # Counted outside the lock: two threads may both count a new filter, and agree.
        counted = count_up_to(limit + 1)
        with self._lock:
            self._known[key] = (counted, limit + 1, now)
            self._known.move_to_end(key)
            while len(self._known) > self._capacity:
                self._known.popitem(last=False)
        return counted <= limit
