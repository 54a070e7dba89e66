"""onnxruntime's process settings, applied before it is first imported."""

from __future__ import annotations

import os


def quiet_onnxruntime() -> None:
    """Opt out of onnxruntime's telemetry before it is imported: since 1.2x its Linux wheels upload usage
    events and keep a device id under ~/.cache/Microsoft unless ORT_DISABLE_TELEMETRY=1 is set (checked
    by tests/bundle: nothing is written to HOME). A service answering queries has no business calling out."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
