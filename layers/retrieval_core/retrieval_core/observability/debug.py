"""Debug logs on every path when the DEBUG environment variable names `retrieval-service`.

Like the `debug` package of Node: `DEBUG=retrieval-service` (or a comma-separated list holding it, or `*`)
turns on one line per request stage (auth, cache, embed, search, rerank, writes, Gemini calls), whatever
the log level. A line holds names, counts, timings and cache keys (hashes), never a key, a token, a
query's text or a connection string.
"""

from __future__ import annotations

import logging
import os

NAMESPACE = "retrieval-service"


def debug_enabled() -> bool:
    """True when DEBUG names this service's namespace (or `*`)."""
    names = {part.strip() for part in os.environ.get("DEBUG", "").replace(" ", ",").split(",")}
    return NAMESPACE in names or "*" in names


class DebugLog:
    """`debug(message, *args)`: one line on the named logger when DEBUG=retrieval-service; else nothing."""

    def __init__(self, logger_name: str) -> None:
        self.logger = logging.getLogger(logger_name)

    def __call__(self, message: str, *args: object) -> None:
        """Log `message % args`, prefixed with the namespace, at DEBUG."""
        if not debug_enabled():
            return
        # The level of a logger configured for INFO (Powertools in Lambda) would drop the line.
        if self.logger.level == logging.NOTSET or self.logger.level > logging.DEBUG:
            self.logger.setLevel(logging.DEBUG)
        self.logger.debug(f"{NAMESPACE} " + message, *args)
