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
from typing import Any

from retrieval_core.parsers.exceptions import DocumentLimitError, WriteCancelledError
from retrieval_core.settings import Settings


def _default(setting: str) -> Any:
    """The default of the setting (settings.py holds each value once)."""
    return Settings.model_fields[setting].default


@dataclass(frozen=True, slots=True)
class ParseBudget:
    """The most one document may cost to read; each field is the setting `DOCUMENT_<FIELD>` (docs/formats.md,
    "Budgets"), but `parse_timeout_s`, the setting `PARSE_TIMEOUT_S`; its default is the setting's."""

    max_unzipped_bytes: int = _default("document_max_unzipped_bytes")  # a DOCX's parts, unzipped
    max_elements: int = _default("document_max_elements")  # XML elements of a DOCX, elements of an HTML page
    max_depth: int = _default("document_max_depth")  # HTML nesting (a DOCX's XML parser refuses 256 itself)
    max_pages: int = _default("document_max_pages")  # PDF pages
    max_content_bytes: int = _default("document_max_content_bytes")  # PDF streams, counted at each use
    max_operators: int = _default("document_max_operators")  # PDF content-stream operators, forms included
    max_field_chars: int = _default("document_max_field_chars")  # one CSV cell, one JSON Lines line
    max_columns: int = _default("document_max_columns")  # CSV columns, JSON Lines fields of one record
    max_chunks: int = _default("document_max_chunks")  # chunks of one document (each record of a row source)
    parse_timeout_s: float = _default("parse_timeout_s")  # reading and chunking one source

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

    def remaining_s(self) -> float:
        """Seconds left before the deadline (0 once past it): how long a blocking call (OCR) may take."""
        return max(0.0, self._deadline - time.monotonic())

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
