"""The Gemini paths' debug lines (resolution steps, cache, call timings): see `retrieval_core.debug`."""

from __future__ import annotations

from ..debug import NAMESPACE, DebugLog, debug_enabled

__all__ = ["NAMESPACE", "debug", "debug_enabled", "logger"]

debug = DebugLog("retrieval_core.knowledge")
logger = debug.logger
