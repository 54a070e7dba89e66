"""Imported at start-up by every writer subprocess (this folder is its PYTHONPATH): no network but loopback.

A library that downloads data at import or at run time (NLTK corpora, tiktoken files, a model) must fail
the test, not pass because this machine happens to be online. Unix sockets and loopback addresses (the
embedded PostgreSQL) stay open; any other connection or name lookup raises, and is also printed to
stderr, where the test looks for it in case a library catches the error and carries on.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

REFUSED = "writers guard: network refused"
_LOOPBACK_NAMES = {"localhost", "::1", b"localhost", b"::1"}


def _is_loopback(host: Any) -> bool:
    if host is None or host in _LOOPBACK_NAMES:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    return text.startswith("127.")


def _refuse(what: str) -> OSError:
    message = f"{REFUSED}: {what}"
    print(message, file=sys.stderr, flush=True)
    return ConnectionRefusedError(message)


def _check(address: Any) -> None:
    # A unix socket's address is a path (str or bytes); an inet address is a tuple, the host first.
    if isinstance(address, tuple) and not _is_loopback(address[0]):
        raise _refuse(f"connect to {address!r}")


_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(address)
    _connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(address)
    return _connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _is_loopback(host):
        raise _refuse(f"look up {host!r}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = _guarded_getaddrinfo
