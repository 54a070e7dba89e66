"""Connections that suit each runtime.

Lambda runs one request at a time per container, so it keeps one connection and
reuses it across invocations (RDS Proxy does the pooling). The local server runs
requests in threads and uses a pool. Both re-open a connection that broke.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg.types import TypeInfo

Connection = psycopg.Connection[Any]


class Database(Protocol):
    """Hands out a connection in autocommit mode; callers open transactions explicitly."""

    def connection(self) -> Any:
        """A context manager yielding a live connection."""
        ...

    def close(self) -> None:
        """Close every connection held."""
        ...


def configure_connection(conn: Connection, statement_timeout_ms: int) -> None:
    """Register the pgvector types and bound every statement's run time."""
    info = TypeInfo.fetch(conn, "vector")
    if info is not None:  # absent only before the first migration has run
        register_vector_info(conn, info)
    conn.execute("SELECT set_config('statement_timeout', %s, false)", (str(statement_timeout_ms),))


class SingleConnection:
    """One connection per process, opened on first use and re-opened after a failure."""

    def __init__(self, conninfo: str, connect_timeout_s: int, statement_timeout_ms: int) -> None:
        self._conninfo = conninfo
        self._connect_timeout_s = connect_timeout_s
        self._statement_timeout_ms = statement_timeout_ms
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def _open(self) -> Connection:
        conn = psycopg.connect(
            self._conninfo, autocommit=True, connect_timeout=self._connect_timeout_s, prepare_threshold=None
        )
        configure_connection(conn, self._statement_timeout_ms)
        return conn

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = None
                self._conn = self._open()
            try:
                yield self._conn
            except psycopg.OperationalError:
                self._discard()
                raise

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._lock:
            self._discard()


class PooledConnections:
    """A psycopg pool for the threaded local server; broken connections are replaced."""

    def __init__(
        self, conninfo: str, min_size: int, max_size: int, connect_timeout_s: int, statement_timeout_ms: int
    ) -> None:
        from psycopg_pool import ConnectionPool

        self._timeout = float(connect_timeout_s)
        self._pool = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": connect_timeout_s, "prepare_threshold": None},
            configure=lambda conn: configure_connection(conn, statement_timeout_ms),
            check=ConnectionPool.check_connection,
            open=False,
        )
        self._pool.open(wait=False)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        with self._pool.connection(timeout=self._timeout) as conn:
            yield conn

    def close(self) -> None:
        self._pool.close()
