"""The Gemini paths' debug lines (resolution steps, cache, call timings).

See `retrieval_core.observability.debug`.
"""

from __future__ import annotations

from retrieval_core.observability.debug import NAMESPACE, DebugLog, debug_enabled

__all__ = ["NAMESPACE", "debug", "debug_enabled", "logger"]

debug = DebugLog("retrieval_core.backends.gemini")
logger = debug.logger
