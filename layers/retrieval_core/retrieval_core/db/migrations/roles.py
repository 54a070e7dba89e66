"""The service's database roles, set up after the numbered migrations on every run.

Two LOGIN roles per database (roles are cluster-wide, so their names carry a per-database prefix):

- `<prefix>_serve`: the serving functions. SELECT on the service's tables, EXECUTE on its functions.
- `<prefix>_write`: the write functions. The same, plus INSERT, UPDATE, DELETE on the service's tables
  (`schema_migrations` stays read-only, `audit_log` append-only) and USAGE on its sequences.

Neither may run DDL: they own nothing and get no CREATE on any schema. "The service's tables" are the
ones the migrations create (their `CREATE TABLE` names, plus `schema_migrations`), wherever the search
path resolves them, so a table added by a later migration is granted on the next run, and a table of
the user's that shares the schema is not.

The step is idempotent. A migrating user who may create roles creates what is missing; one who may not
gets a MigrationError naming what is missing, and the SQL a DBA runs is in docs/security.md ("Database
roles"). Grants on the tables are made by the migrating user, who owns them; a grant that does not take
(the tables have another owner) is caught by the check that follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from retrieval_core.db.migrations.steps import MIGRATIONS, Migration
from retrieval_core.settings import Settings

SERVE_SUFFIX = "_serve"
WRITE_SUFFIX = "_write"
# PostgreSQL truncates identifiers to 63 bytes: the longest prefix that keeps both names whole.
MAX_PREFIX_LENGTH = 63 - len(SERVE_SUFFIX)
DOCS = 'docs/security.md, "Database roles"'

SERVE_TABLE_PRIVILEGES = ("SELECT",)
WRITE_TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")
# Tables no service role may change at will: the migrations' record (read-only) and the audit log
# (append-only: only the owner's pruning deletes from it).
LIMITED_TABLES = {"schema_migrations": ("SELECT",), "audit_log": ("SELECT", "INSERT")}
_CHANGES = ("INSERT", "UPDATE", "DELETE", "TRUNCATE")

_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_SEQUENCE = re.compile(r"CREATE\s+SEQUENCE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_Relation = tuple[int, str, str]  # oid, schema, name
_FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class RoleSetup:
    """What the roles step is asked to do: the prefix (None: the database's name) and whether the roles
    sign in with RDS IAM auth (then `rds_iam` is granted to them, where the role exists)."""

    prefix: str | None = None
    iam: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> RoleSetup | None:
        """The setup DATABASE_ROLES* ask for; None when DATABASE_ROLES is false."""
        if not settings.database_roles:
            return None
        return cls(settings.database_role_prefix, settings.database_roles_iam)


@dataclass(frozen=True)
class ServiceRoles:
    """The names of a database's two roles."""

    serve: str
    write: str

    @classmethod
    def of(cls, prefix: str) -> ServiceRoles:
        """`<prefix>_serve` and `<prefix>_write`; ValueError when the names would not fit an identifier."""
        if not prefix or len(prefix.encode()) > MAX_PREFIX_LENGTH:
            raise ValueError(
                f"a role prefix has 1 to {MAX_PREFIX_LENGTH} bytes; set DATABASE_ROLE_PREFIX to a shorter one"
            )
        return cls(prefix + SERVE_SUFFIX, prefix + WRITE_SUFFIX)


def service_names(migrations: Sequence[Migration] = MIGRATIONS) -> tuple[list[str], list[str], list[str]]:
    """The tables, sequences and functions the migrations create, by name, in order of appearance."""

    def names(pattern: re.Pattern[str], extra: Iterable[str] = ()) -> list[str]:
        found = [*extra, *(m.lower() for item in migrations for m in pattern.findall(item.sql))]
        return list(dict.fromkeys(found))

    return names(_TABLE, ["schema_migrations"]), names(_SEQUENCE), names(_FUNCTION)


def set_up_roles(
    conn: psycopg.Connection[Any], setup: RoleSetup, migrations: Sequence[Migration] = MIGRATIONS
) -> list[str]:
    """Create the roles if missing and allowed, grant what each needs; return what is still missing
    (empty when both roles are ready). Runs inside the migration's transaction."""
    prefix = setup.prefix or _scalar(conn, "SELECT current_database()")
    roles = ServiceRoles.of(str(prefix))
    tables, sequences, functions = _service_objects(conn, migrations)
    may_create = bool(
        _scalar(conn, "SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user")
    )
    missing: list[str] = []
    wanted = (
        (roles.serve, SERVE_TABLE_PRIVILEGES, ()),
        (roles.write, WRITE_TABLE_PRIVILEGES, sequences),
    )
    for role, privileges, role_sequences in wanted:
        if not _role_exists(conn, role):
            if not may_create:
                missing.append(f"role {role} does not exist (the migrating user may not create roles)")
                continue
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        if setup.iam:
            missing += _rds_iam(conn, role)
        missing += _connect_and_usage(conn, role, {schema for _, schema, _ in tables})
        missing += _table_grants(conn, role, tables, privileges)
        missing += _sequence_grants(conn, role, role_sequences)
        missing += _function_grants(conn, role, functions)
    return missing


def missing_roles_message(missing: Sequence[str]) -> str:
    """The error text: what is missing and where the SQL that fixes it is."""
    return (
        "the service's database roles are not ready: "
        + "; ".join(missing)
        + f". A DBA runs the SQL of {DOCS} "
        "(or the migration runs as a user who may create roles and owns the service's tables), then migrate "
        "again; DATABASE_ROLES=false skips this step when every function signs in as the migrating user"
    )


def _scalar(conn: psycopg.Connection[Any], query: str, params: Sequence[Any] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def _role_exists(conn: psycopg.Connection[Any], role: str) -> bool:
    return bool(_scalar(conn, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)", (role,)))


def _service_objects(
    conn: psycopg.Connection[Any], migrations: Sequence[Migration]
) -> tuple[list[_Relation], list[_Relation], list[tuple[int, str]]]:
    """(oid, schema, name) of each service table and sequence, (oid, signature) of each function."""
    table_names, sequence_names, function_names = service_names(migrations)
    tables = conn.execute(
        """SELECT c.oid, n.nspname, c.relname FROM unnest(%s::text[]) WITH ORDINALITY AS t(name, position)
           JOIN pg_class c ON c.oid = to_regclass(t.name) JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relkind IN ('r', 'p') ORDER BY t.position""",
        (table_names,),
    ).fetchall()
    # The named sequences, and those of the tables' identity and serial columns.
    sequences = conn.execute(
        """SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relkind = 'S' AND (c.oid = ANY (SELECT to_regclass(s) FROM unnest(%s::text[]) s)
               OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                              AND d.objid = c.oid AND d.deptype IN ('a', 'i')
                              AND d.refobjid = ANY (SELECT to_regclass(t) FROM unnest(%s::text[]) t)))
           ORDER BY 2, 3""",
        (sequence_names, table_names),
    ).fetchall()
    schemas = sorted({schema for _, schema, _ in tables})
    functions = conn.execute(
        """SELECT p.oid, p.oid::regprocedure::text
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = ANY (%s) AND p.proname = ANY (%s) ORDER BY 2""",
        (schemas, function_names),
    ).fetchall()
    return tables, sequences, functions


def _granted(conn: psycopg.Connection[Any], statement: sql.Composed) -> str | None:
    """Run a GRANT in a savepoint; None when it ran, else why not (the migrating user may not grant it)."""
    try:
        with conn.transaction():
            conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        return type(exc).__name__
    return None


def _rds_iam(conn: psycopg.Connection[Any], role: str) -> list[str]:
    """Grant `rds_iam` (RDS and Aurora only: elsewhere the role does not exist and nothing is needed)."""
    if not _role_exists(conn, "rds_iam"):
        return []
    if _scalar(conn, "SELECT pg_has_role(%s, 'rds_iam', 'MEMBER')", (role,)):
        return []
    if _granted(conn, sql.SQL("GRANT rds_iam TO {}").format(sql.Identifier(role))) is None:
        return []
    return [f"{role} is not a member of rds_iam (needed to sign in with IAM auth)"]


def _connect_and_usage(conn: psycopg.Connection[Any], role: str, schemas: set[str]) -> list[str]:
    """CONNECT on the database and USAGE on the tables' schemas: usually held through PUBLIC; granted
    only when not, which needs the database's or schema's owner."""
    database = str(_scalar(conn, "SELECT current_database()"))
    missing = _grant_unless_held(
        conn,
        ("SELECT has_database_privilege(%s, %s, 'CONNECT')", (role, database)),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), sql.Identifier(role)),
        f"{role} lacks CONNECT on database {database}",
    )
    for schema in sorted(schemas):
        missing += _grant_unless_held(
            conn,
            ("SELECT has_schema_privilege(%s, %s, 'USAGE')", (role, schema)),
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), sql.Identifier(role)),
            f"{role} lacks USAGE on schema {schema}",
        )
    return missing


def _grant_unless_held(
    conn: psycopg.Connection[Any], held: tuple[str, tuple[Any, ...]], grant: sql.Composed, lack: str
) -> list[str]:
    """Run `grant` unless the `held` query says the role has the privilege; [lack] when it could not."""
    if _scalar(conn, *held):
        return []
    return [lack] if _granted(conn, grant) is not None else []


def _table_grants(
    conn: psycopg.Connection[Any], role: str, tables: Sequence[_Relation], privileges: Sequence[str]
) -> list[str]:
    """Grant `privileges` on every table (SELECT only on the read-only ones), then check they took."""
    missing: list[str] = []
    for oid, schema, table in tables:
        target = sql.Identifier(schema, table)
        limit = LIMITED_TABLES.get(table)
        wanted = tuple(p for p in privileges if limit is None or p in limit)
        listed = sql.SQL(", ").join(sql.SQL(p) for p in wanted)
        _granted(conn, sql.SQL("GRANT {} ON TABLE {} TO {}").format(listed, target, sql.Identifier(role)))
        if limit is not None:
            withheld = sql.SQL(", ").join(sql.SQL(p) for p in _CHANGES if p not in wanted)
            _granted(
                conn, sql.SQL("REVOKE {} ON TABLE {} FROM {}").format(withheld, target, sql.Identifier(role))
            )
        lacking = [
            p
            for p in wanted
            if not _scalar(conn, "SELECT has_table_privilege(%s, %s::oid, %s)", (role, oid, p))
        ]
        if lacking:
            missing.append(f"{role} lacks {', '.join(lacking)} on table {schema}.{table}")
    return missing


def _sequence_grants(conn: psycopg.Connection[Any], role: str, sequences: Sequence[_Relation]) -> list[str]:
    missing: list[str] = []
    for oid, schema, name in sequences:
        target = sql.Identifier(schema, name)
        _granted(conn, sql.SQL("GRANT USAGE ON SEQUENCE {} TO {}").format(target, sql.Identifier(role)))
        if not _scalar(conn, "SELECT has_sequence_privilege(%s, %s::oid, 'USAGE')", (role, oid)):
            missing.append(f"{role} lacks USAGE on sequence {schema}.{name}")
    return missing


def _function_grants(
    conn: psycopg.Connection[Any], role: str, functions: Sequence[tuple[int, str]]
) -> list[str]:
    """EXECUTE is PUBLIC's by default; granted only where someone revoked it."""
    missing: list[str] = []
    for oid, signature in functions:
        # The signature is the catalog's own rendering (regprocedure), quoted by PostgreSQL.
        missing += _grant_unless_held(
            conn,
            ("SELECT has_function_privilege(%s, %s::oid, 'EXECUTE')", (role, oid)),
            sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(sql.SQL(signature), sql.Identifier(role)),
            f"{role} lacks EXECUTE on function {signature}",
        )
    return missing


def as_role(conninfo: str, role: str) -> str:
    """`conninfo` signing in as `role`, without its password: for a server that trusts local
    connections (the embedded PostgreSQL), where the roles have none."""
    params = conninfo_to_dict(conninfo)
    params.pop("password", None)
    params["user"] = role
    return make_conninfo("", **params)


def roles_of_conninfo(conninfo: str, setup: RoleSetup) -> ServiceRoles:
    """The roles `setup` names on the database `conninfo` connects to (its dbname, else its user's name,
    as libpq defaults it)."""
    params = conninfo_to_dict(conninfo)
    return ServiceRoles.of(setup.prefix or str(params.get("dbname") or params.get("user") or "postgres"))
