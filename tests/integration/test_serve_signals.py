"""`retrieval serve` stopped the way supervisors stop it: SIGTERM (systemd, containers, CI time-outs)."""

from __future__ import annotations

import signal
import time

from tests.doc_examples import served_app


def test_sigterm_stops_the_server_and_its_embedded_postgres() -> None:
    with served_app() as app:
        assert (app.pgdata / "postmaster.pid").exists()
        app.process.send_signal(signal.SIGTERM)
        assert app.process.wait(timeout=30) == 128 + signal.SIGTERM
        # The database stops with the server (the test's own clean-up would stop it otherwise).
        deadline = time.monotonic() + 10
        while (app.pgdata / "postmaster.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not (app.pgdata / "postmaster.pid").exists(), app.log.read_text()[-2000:]
        assert "Shutting down" in app.log.read_text()  # uvicorn's graceful shutdown ran first
