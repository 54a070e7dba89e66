"""Connections that suit each runtime.

Lambda runs one request at a time per container, so it keeps one connection and
reuses it across invocations (RDS Proxy does the pooling). The local server runs
requests in threads and uses a pool. Both re-open a connection that broke.
"""

from __future__ import annotations

import math
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

    def connection(self, timeout_s: float | None = None) -> Any:
        """A context manager yielding a live connection; `timeout_s` shortens the wait for one."""
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

    def _open(self, connect_timeout_s: int) -> Connection:
        conn = psycopg.connect(
            self._conninfo, autocommit=True, connect_timeout=connect_timeout_s, prepare_threshold=None
        )
        configure_connection(conn, self._statement_timeout_ms)
        return conn

    @contextmanager
    def connection(self, timeout_s: float | None = None) -> Iterator[Connection]:
        connect_timeout_s = self._connect_timeout_s
        if timeout_s is not None:
            # libpq takes whole seconds.
            connect_timeout_s = max(1, min(connect_timeout_s, math.ceil(timeout_s)))
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = None
                self._conn = self._open(connect_timeout_s)
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
    """A psycopg pool for the threaded local server; broken connections are replaced.

    A psycopg_pool PoolTimeout means both "every connection is lent out" and "no connection could be
    opened". Only the first goes on as a PoolTimeout (db.errors: overloaded); the second becomes a plain
    OperationalError (unavailable), so a database that is down never looks merely busy; it carries the
    last failure to connect as its cause, so db.errors can tell a refused password from an outage.

    A request that finds every connection lent out waits at most `pool_wait_s` for one (a 503 soon is
    better than holding the caller); one that waits for a new connection waits up to the connect timeout.

    psycopg_pool retries a failed connection with a doubling delay for five minutes by default, so after
    a long outage its next try could come minutes after the database is back. We stop each chain of
    retries after one connect timeout instead: a request that then finds the pool empty starts a fresh
    attempt at once, and recovery never waits longer than the connect timeout.
    """

    def __init__(
        self,
        conninfo: str,
        min_size: int,
        max_size: int,
        connect_timeout_s: int,
        statement_timeout_ms: int,
        pool_wait_s: float | None = None,
    ) -> None:
        from psycopg_pool import ConnectionPool

        self._timeout = float(connect_timeout_s)
        self._pool_wait_s = self._timeout if pool_wait_s is None else min(pool_wait_s, self._timeout)
        self._max_size = max_size
        self._lent = 0
        self._lent_lock = threading.Lock()
        self.last_connect_failure: psycopg.OperationalError | None = None
        self._pool = ConnectionPool(
            conninfo,
            connection_class=_recording_connection_class(self),
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": connect_timeout_s, "prepare_threshold": None},
            configure=lambda conn: configure_connection(conn, statement_timeout_ms),
            check=ConnectionPool.check_connection,
            reconnect_timeout=self._timeout,
            open=False,
        )
        self._pool.open(wait=False)

    @contextmanager
    def connection(self, timeout_s: float | None = None) -> Iterator[Connection]:
        from psycopg_pool import PoolTimeout

        timeout = self._pool_wait_s if self._all_lent() else self._timeout
        if timeout_s is not None:
            timeout = min(timeout, timeout_s)
        try:
            with self._pool.connection(timeout=timeout) as conn, self._lending():
                yield conn
        except PoolTimeout as exc:
            if self._all_lent():
                raise
            raise psycopg.OperationalError("no connection to PostgreSQL could be opened") from (
                self.last_connect_failure or exc
            )

    @contextmanager
    def _lending(self) -> Iterator[None]:
        with self._lent_lock:
            self._lent += 1
        try:
            yield
        finally:
            with self._lent_lock:
                self._lent -= 1

    def _all_lent(self) -> bool:
        with self._lent_lock:
            return self._lent >= self._max_size

    def close(self) -> None:
        self._pool.close()


def _recording_connection_class(owner: PooledConnections) -> type[Connection]:
    """A connection class that tells `owner` why its last attempt to connect failed (None once one works)."""

    class RecordingConnection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> RecordingConnection:
            try:
                conn = super().connect(conninfo, **kwargs)
            except psycopg.OperationalError as exc:
                owner.last_connect_failure = exc
                raise
            owner.last_connect_failure = None
            return conn

    return RecordingConnection
