"""A blocking call or stream read in a worker thread, so that waiting for its next item ends at a deadline.

An HTTP read timeout restarts with every byte received and cannot bound a stream that stalls; botocore's
is fixed per client. The reader's worker is a daemon thread: once the caller gives up (`close`), the
worker stops at the stream's next item, or at the client's own read timeout, and closes the stream.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_END: Any = object()


class StreamReader(Generic[T]):
    """Iterates `open_stream()` in a worker thread; `next` waits for each item until a deadline."""

    def __init__(self, open_stream: Callable[[], Iterator[T]], name: str) -> None:
        self._items: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._closed = threading.Event()
        self._ended = False
        threading.Thread(target=self._read, args=(open_stream,), name=name, daemon=True).start()

    def _read(self, open_stream: Callable[[], Iterator[T]]) -> None:
        stream: Iterator[T] | None = None
        try:
            stream = open_stream()
            for item in stream:
                if self._closed.is_set():
                    return
                self._items.put((True, item))
        except Exception as exc:  # noqa: BLE001  (handed to the reading thread, which raises it)
            self._items.put((False, exc))
        else:
            self._items.put((True, _END))
        finally:
            # A stream given up on releases its connection now, not when it is collected.
            close = getattr(stream, "close", None)
            if callable(close):
                close()

    def next(self, deadline: float) -> T | None:
        """The next item, None after the last. Raises what the stream raised, or TimeoutError at
        `deadline` (a `time.monotonic()` value)."""
        if self._ended:
            return None
        try:
            ok, item = self._items.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError from None
        if not ok:
            raise item
        self._ended = item is _END
        return None if self._ended else item

    def close(self) -> None:
        """Stop reading: nobody waits for the items any more."""
        self._closed.set()
