"""Counters the service emits: Powertools EMF metrics in Lambda, and an in-process tally everywhere.

The tally lets tests and the local server see what happened (cache hits, errors) without
CloudWatch; in Lambda the handler's `log_metrics` flushes the Powertools metrics once per
invocation.
"""

from __future__ import annotations

import threading
from collections import Counter, deque

from retrieval_core.settings import in_lambda

_lock = threading.Lock()
counters: Counter[str] = Counter()
# The latest durations of each timing, newest last (bounded: the local server runs for days).
durations: dict[str, deque[float]] = {}


def count(name: str, value: int = 1) -> None:
    """Add `value` to the counter `name`."""
    with _lock:
        counters[name] += value
    if in_lambda():
        from aws_lambda_powertools.metrics import Metrics, MetricUnit

        # Powertools Metrics instances share one buffer, flushed by the handler's log_metrics.
        Metrics().add_metric(name=name, unit=MetricUnit.Count, value=value)


def milliseconds(name: str, value: float) -> None:
    """Record a duration of `value` ms under `name` (a CloudWatch metric in Lambda)."""
    with _lock:
        durations.setdefault(name, deque(maxlen=1000)).append(value)
    if in_lambda():
        from aws_lambda_powertools.metrics import Metrics, MetricUnit

        Metrics().add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)
