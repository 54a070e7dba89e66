"""What reading one document may cost, and the checkpoints the parsers call to keep to it. Pure: no I/O.

A `ParseBudget` is built from the settings by the caller (the write side); `ParseMeter` carries one
document's budget, its deadline and its cancellation through `parse()` and the chunking. The parsers
call `meter.check()` in their loops (per page, per element, per row): past the deadline that is a
DocumentLimitError, and once the caller sets the cancellation event (the client went away) a
WriteCancelledError. A thread is never killed: the work stops at its next checkpoint.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, fields

from retrieval_core.parsers.exceptions import DocumentLimitError, WriteCancelledError

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ParseBudget:
    """The most one document may cost to read; each field is the setting `DOCUMENT_<FIELD>` (docs/formats.md,
    "Budgets"), but `parse_timeout_s`, the setting `PARSE_TIMEOUT_S`."""

    max_unzipped_bytes: int = 64 * MIB  # a DOCX's parts, unzipped
    max_elements: int = 500_000  # XML elements of a DOCX (every part), elements of an HTML page
    max_depth: int = 512  # HTML elements nested in one another (a DOCX's XML parser refuses 256 itself)
    max_pages: int = 2_000  # PDF pages
    max_content_bytes: int = 4 * MIB  # PDF content streams, decoded, counted each time a page uses one
    max_operators: int = 2_000_000  # PDF content-stream operators, forms included
    max_field_chars: int = 1_000_000  # one CSV cell, one JSON Lines line
    max_columns: int = 1_000  # CSV columns, JSON Lines fields of one record
    max_chunks: int = 2_000  # chunks of one document (of each record of a row source)
    parse_timeout_s: float = 10.0  # reading and chunking one source

    @staticmethod
    def setting(field: str) -> str:
        """The environment variable that sets `field`."""
        return field.upper() if field.startswith("parse_") else f"DOCUMENT_{field.upper()}"


DEFAULT_BUDGET = ParseBudget()
BUDGET_FIELDS = tuple(f.name for f in fields(ParseBudget))

# Checkpoints between two looks at the clock: a call to time.monotonic() costs about what a small loop
# body does, and no parser loop body takes long enough for 64 of them to matter against the deadline.
_TICKS_PER_CHECK = 64
_YIELD_EVERY_S = 0.001


class ParseMeter:
    """One source's budget being spent: its deadline, its cancellation, the counts that add up across a file.

    Not shared between threads: each write makes its own.
    """

    def __init__(
        self,
        budget: ParseBudget = DEFAULT_BUDGET,
        cancelled: threading.Event | None = None,
        content_type: str = "",
    ) -> None:
        self.budget = budget
        self.content_type = content_type
        self._cancelled = cancelled
        self._started = time.monotonic()
        self._deadline = self._started + budget.parse_timeout_s
        self._ticks = 0
        self._yielded = self._started
        self._counts: dict[str, int] = {}

    def check(self) -> None:
        """A WriteCancelledError once the caller cancelled; a DocumentLimitError past the deadline."""
        if self._cancelled is not None and self._cancelled.is_set():
            raise WriteCancelledError
        now = time.monotonic()
        if now > self._deadline:
            elapsed, limit = now - self._started, self.budget.parse_timeout_s
            self._over("parse_timeout_s", "reading it took", f"{elapsed:.2f} s", f"{limit} s")

    def tick(self) -> None:
        """A checkpoint of a tight loop: looks at the clock every few calls, and lets other threads run."""
        self._ticks += 1
        if self._ticks % _TICKS_PER_CHECK == 0:
            self.check()
            now = time.monotonic()
            if now - self._yielded > _YIELD_EVERY_S:
                # Parsing is Python holding the GIL: a thread waiting for it (a search between two database
                # round trips) would wait out the switch interval (5 ms) each time. Sleeping 0 s hands it
                # over now; each sleep costs up to a time slice on a busy machine, hence not every tick.
                time.sleep(0)
                self._yielded = now

    def within(self, field: str, value: int, what: str) -> None:
        """A DocumentLimitError when `value` is over the budget's `field` (`what` names the quantity)."""
        limit = getattr(self.budget, field)
        if value > limit:
            self._over(field, what, f"{value:,}", f"{limit:,}")

    def add(self, field: str, amount: int, what: str) -> None:
        """Count `amount` more of what `field` bounds for the whole file, then `within`."""
        total = self._counts.get(field, 0) + amount
        self._counts[field] = total
        self.within(field, total, what)

    def _over(self, field: str, what: str, value: str, limit: str) -> None:
        raise DocumentLimitError(self.content_type, what, value, limit, self.budget.setting(field))
