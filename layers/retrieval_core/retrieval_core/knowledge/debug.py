"""Seed 000's debug logs, on when the DEBUG environment variable names `retrieval-service`.

Like the `debug` package of Node: `DEBUG=retrieval-service` (or a comma-separated list holding it, or `*`)
turns on resolution steps, cache hits and misses, call timings, response sizes and cache keys, whatever
the log level. Nothing logged here ever holds an API key.
"""

from __future__ import annotations

import logging
import os

NAMESPACE = "retrieval-service"
logger = logging.getLogger("retrieval_core.knowledge")


def debug_enabled() -> bool:
    """True when DEBUG names this service's namespace (or `*`)."""
    names = {part.strip() for part in os.environ.get("DEBUG", "").replace(" ", ",").split(",")}
    return NAMESPACE in names or "*" in names


def debug(message: str, *args: object) -> None:
    """Log one debug line when DEBUG=retrieval-service; nothing otherwise."""
    if not debug_enabled():
        return
    if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
    logger.debug(f"{NAMESPACE} " + message, *args)
