"""What an attached table supports now: inspections no older than a TTL, so index changes need no refresh.

The stored inspection (`stores.source`) is made at attach and refresh time; an index dropped or created
after it would otherwise go unseen until a refresh. A search reads the table's indexes again when the
inspection it holds is older than ATTACHED_INSPECTION_TTL_S (a few catalog reads and one EXPLAIN, not a
scan: the row count stays the stored one). Per process: each instance inspects at most once per TTL.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from retrieval_core.backends.attached.catalog import inspect_indexes, relation_oid
from retrieval_core.backends.attached.exceptions import SourceUnavailableError, UnusableSourceError
from retrieval_core.backends.attached.features import relation_name
from retrieval_core.db.attached_source import AttachedSource
from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store


@dataclass(frozen=True, slots=True)
class _Inspection:
    version: int
    at: float  # time.monotonic()
    source: AttachedSource


class LiveSources:
    """The latest inspection of each attached store, made again once it is older than `ttl_s` (0: always)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._inspections: dict[int, _Inspection] = {}

    def current(self, conn: Connection, store: Store) -> AttachedSource:
        """The store's source as inspected at most `ttl_s` ago (in `conn`'s transaction when it is not).

        A table that is gone or lost a mapped column: SourceUnavailableError (409)."""
        assert store.source is not None
        with self._lock:
            held = self._inspections.get(store.id)
        if held is not None and held.version == store.version and time.monotonic() - held.at < self.ttl_s:
            return held.source
        try:
            source = inspect_indexes(conn, store.source, relation_oid(conn, store.source), count=False)
        except UnusableSourceError as exc:
            raise SourceUnavailableError(
                store.name, relation_name(store.source), f"cannot be searched as attached: {exc.message}"
            ) from exc
        self.remember(store, source)
        return source

    def remember(self, store: Store, source: AttachedSource) -> None:
        """Hold `source`, inspected just now, as the store's current inspection."""
        with self._lock:
            self._inspections[store.id] = _Inspection(store.version, time.monotonic(), source)
