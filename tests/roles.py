"""A test database run as the deployed stack runs it: the owner migrates and maintains, the roles serve."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


def write_role_dsn(owner_dsn: str) -> str:
    """Migrate the database of `owner_dsn` as its owner, which sets up the service's roles; the DSN of its
    write role (the embedded server trusts local connections)."""
    from retrieval_core.db.migrations.roles import RoleSetup, as_role, roles_of_conninfo
    from retrieval_core.db.migrations.runner import migrate

    setup = RoleSetup()
    migrate(owner_dsn, roles=setup)
    return as_role(owner_dsn, roles_of_conninfo(owner_dsn, setup).write)


@contextmanager
def owner_settings(owner_dsn: str) -> Iterator[None]:
    """Settings whose DATABASE_URL is `owner_dsn`, for what runs as the owner (`retrieval index-stores`, as
    the deployed MigrateFunction does); the process-wide service keeps its own connections."""
    from retrieval_core.settings import get_settings

    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DATABASE_URL", owner_dsn)
            get_settings.cache_clear()
            yield
    finally:
        get_settings.cache_clear()  # after the environment is restored


def grant_to_service_roles(conn: Any, schema: str, writable: bool = False) -> Any:
    """What the owner of a user's tables grants the service's roles (docs/security.md, "Attached tables"):
    reading every table of `schema`, and with `writable` writing them too (the rows and their sequences).
    The roles (ServiceRoles)."""
    from psycopg import sql

    from retrieval_core.db.migrations.roles import ServiceRoles

    database = conn.execute("SELECT current_database()").fetchone()[0]
    roles = ServiceRoles.of(database)
    serve, write, name = sql.Identifier(roles.serve), sql.Identifier(roles.write), sql.Identifier(schema)
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}, {}").format(name, serve, write))
    conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}, {}").format(name, serve, write))
    if writable:
        conn.execute(sql.SQL("GRANT INSERT, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(name, write))
        conn.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(name, write))
    return roles


def grant_tables_to_service_roles(conn: Any, schema: str, tables: list[str], writable: bool = False) -> None:
    """`grant_to_service_roles` for some tables of `schema` only (a schema the service's own tables share)."""
    from psycopg import sql

    from retrieval_core.db.migrations.roles import ServiceRoles

    roles = ServiceRoles.of(conn.execute("SELECT current_database()").fetchone()[0])
    serve, write, name = sql.Identifier(roles.serve), sql.Identifier(roles.write), sql.Identifier(schema)
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}, {}").format(name, serve, write))
    for table in tables:
        target = sql.Identifier(schema, table)
        conn.execute(sql.SQL("GRANT SELECT ON TABLE {} TO {}, {}").format(target, serve, write))
        if writable:
            conn.execute(sql.SQL("GRANT INSERT, DELETE ON TABLE {} TO {}").format(target, write))
    if writable:
        conn.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(name, write))
