"""The embedded PostgreSQL the service starts keeps no value of a failed statement in its log."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from retrieval_core.db.embedded import start_embedded_postgres

MARKER = "metadata-marker-7f3a9c"


def test_failed_statements_leave_no_value_they_carried_in_the_server_log(tmp_path: Path) -> None:
    server = start_embedded_postgres(tmp_path / "data", cleanup="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            failing = [
                # jsonb refuses the document: its CONTEXT quotes the JSON
                ("SELECT %s::jsonb", f'{{"team": "{MARKER}", "score": NaN}}'),
                # the message itself quotes the value
                ("SELECT %s::int", MARKER),
                # a statement whose text holds the value
                (f"SELECT '{MARKER}'::int + %s", 1),
            ]
            for statement, value in failing:
                with pytest.raises(psycopg.errors.DataError):
                    conn.execute(statement, (value,))  # type: ignore[arg-type]
        log = (tmp_path / "data" / "pg" / "log").read_text(errors="replace")
    finally:
        server.cleanup()
    assert "ready to accept connections" in log  # the log is written, at its default level
    assert MARKER not in log
