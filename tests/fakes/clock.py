"""A clock a test sets by hand: `clock.now = ...`, read by calling it (as `time.time`)."""

from __future__ import annotations

# A multiple of 60 and of 10: the start of a rate-limit window, and a date in 2027.
EPOCH = 1_800_000_000.0


class ManualClock:
    """Returns `now` until the test moves it."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
