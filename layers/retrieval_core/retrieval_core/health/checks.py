"""The checks of GET /api/v1/health: database, schema, pgvector, embedder. Each is cheap and bounded.

A probe reuses the service's connections, waits at most PROBE_TIMEOUT_S for one, and never calls an
embedding provider or reads a secret: load balancers and uptime checks call it every few seconds.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from typing import Literal

from retrieval_core import container
from retrieval_core.db.errors import database_errors
from retrieval_core.db.migrations.steps import SCHEMA_VERSION
from retrieval_core.db.schema import PGVECTOR_MINIMUM, at_least, pgvector_version, schema_version
from retrieval_core.embeddings.api_key import embedder_configuration_problem
from retrieval_core.embeddings.base import Embedder
from retrieval_core.exceptions import DatabaseOverloadedError, DatabaseUnavailableError, RetrievalError
from retrieval_core.schemas.health import (
    EmbedderCheck,
    HealthCheck,
    HealthChecks,
    HealthResponse,
    PgvectorCheck,
    SchemaCheck,
)
from retrieval_core.settings import DEFAULT_LOCAL_RUNTIME, LocalRuntime, Settings, get_settings

# Longest wait for a connection: a probe must answer before its caller gives up on it.
PROBE_TIMEOUT_S = 2.0
MIGRATE_HINT = "run `retrieval migrate` (a deployed stack's MigrateFunction runs it on every deploy)"


@dataclass(frozen=True)
class DatabaseFacts:
    """What one probe read from the database."""

    schema_version: int | None
    pgvector_version: str | None


def check_health() -> HealthResponse:
    """Run every check; the answer is `ok` only when each one is."""
    settings = get_settings()
    database, facts = _check_database(settings)
    if facts is None:
        skipped = "not checked: the database did not answer"
        schema = SchemaCheck(status="skipped", reason=skipped, required_version=SCHEMA_VERSION)
        pgvector = PgvectorCheck(status="skipped", reason=skipped)
    else:
        schema = check_schema(facts.schema_version)
        pgvector = check_pgvector(facts.pgvector_version)
    embedder = check_embedder(settings)
    checks = HealthChecks(database=database, schema=schema, pgvector=pgvector, embedder=embedder)
    return HealthResponse(status=overall_status(checks), checks=checks)


def overall_status(checks: HealthChecks) -> Literal["ok", "degraded", "overloaded"]:
    """`degraded` when a check failed; else `overloaded` when the database is busy; else `ok`."""
    statuses = {c.status for c in (checks.database, checks.schema_check, checks.pgvector, checks.embedder)}
    if "failed" in statuses:
        return "degraded"
    if "overloaded" in statuses:
        return "overloaded"
    return "ok"


def _check_database(settings: Settings) -> tuple[HealthCheck, DatabaseFacts | None]:
    timeout_s = min(PROBE_TIMEOUT_S, float(settings.db_connect_timeout_s))
    try:
        database = container.get_database()
        with database_errors("checking health"), database.connection(timeout_s) as conn:
            facts = DatabaseFacts(schema_version(conn), pgvector_version(conn))
    except DatabaseOverloadedError as exc:
        reason = f"{exc.message}; if it lasts, raise DB_POOL_MAX_SIZE or the server's max_connections"
        return HealthCheck(status="overloaded", reason=reason), None
    except DatabaseUnavailableError as exc:
        reason = (
            f"{exc.message}: check that PostgreSQL runs and accepts this service's connections "
            "(DATABASE_URL, or DATABASE_HOST and its credentials)"
        )
        return HealthCheck(status="failed", reason=reason), None
    except RetrievalError as exc:
        # A configuration error, typically: its message says what to set (and never quotes a secret).
        return HealthCheck(status="failed", reason=exc.message), None
    return HealthCheck(status="ok"), facts


def check_schema(found: int | None) -> SchemaCheck:
    """`ok` when the recorded version is SCHEMA_VERSION or newer (migrations only add)."""
    if found is None:
        reason = f"no retrieval schema: {MIGRATE_HINT}"
        return SchemaCheck(status="failed", reason=reason, required_version=SCHEMA_VERSION)
    if found < SCHEMA_VERSION:
        reason = f"the schema is at version {found}, older than this code's {SCHEMA_VERSION}: {MIGRATE_HINT}"
        return SchemaCheck(status="failed", reason=reason, version=found, required_version=SCHEMA_VERSION)
    return SchemaCheck(status="ok", version=found, required_version=SCHEMA_VERSION)


def check_pgvector(version: str | None) -> PgvectorCheck:
    """`ok` when the `vector` extension is installed at 0.8 or newer."""
    if version is None:
        reason = f"the vector extension is not installed: {MIGRATE_HINT} (it creates the extension)"
        return PgvectorCheck(status="failed", reason=reason)
    if not at_least(version, PGVECTOR_MINIMUM):
        reason = (
            f"pgvector {version} is older than 0.8, which iterative index scans need: install a newer "
            "pgvector on the server, then run ALTER EXTENSION vector UPDATE"
        )
        return PgvectorCheck(status="failed", reason=reason, version=version)
    return PgvectorCheck(status="ok", version=version)


def check_embedder(settings: Settings) -> EmbedderCheck:
    """The provider is usable as configured; the local one reports whether its model is loaded yet."""
    provider = settings.embedding_provider
    if provider == "local":
        return _check_local_model()
    model = settings.resolved_embedding_model
    missing = embedder_configuration_problem(settings)
    if missing is not None:
        return EmbedderCheck(status="failed", reason=missing, provider=provider, model=model)
    return EmbedderCheck(status="ok", provider=provider, model=model)


def _check_local_model() -> EmbedderCheck:
    from retrieval_core.embeddings.local import MODEL_PACKAGE, RUNTIME_MODULES

    embedder = container.current_embedder()
    loaded = bool(getattr(embedder, "loaded", False))
    model_runtime: LocalRuntime = getattr(embedder, "runtime", DEFAULT_LOCAL_RUNTIME)
    model_dir = getattr(embedder, "model_dir", None)
    modules = RUNTIME_MODULES[model_runtime] + (() if model_dir is not None else (MODEL_PACKAGE,))
    if not loaded and not all(importlib.util.find_spec(name) for name in modules):
        install = "make install-torch" if model_runtime == "torch" else "make install-local"
        reason = (
            f"the local model or its runtime ({model_runtime}) is not installed: {install}, or set "
            "EMBEDDING_PROVIDER to openai, gemini or bedrock"
        )
        return EmbedderCheck(status="failed", reason=reason, provider="local", model=embedder.model)
    if not loaded and model_dir is not None and not model_dir.is_dir():
        reason = f"LOCAL_MODEL_DIR {model_dir} is not a folder"
        return EmbedderCheck(status="failed", reason=reason, provider="local", model=embedder.model)
    failure = _local_model_failure(embedder)
    if failure is not None:
        return EmbedderCheck(
            status="failed", reason=failure, provider="local", model=embedder.model, loaded=loaded
        )
    return EmbedderCheck(status="ok", provider="local", model=embedder.model, loaded=loaded)


# Embedders that produced one tiny embedding for a probe: each is tried once per process, not per probe.
_VERIFIED: set[int] = set()
_VERIFIED_LOCK = threading.Lock()


def _local_model_failure(embedder: Embedder) -> str | None:
    """Why the local model failed at its last load or embedding; a loaded model embeds one word, once."""
    if getattr(embedder, "loaded", False) and id(embedder) not in _VERIFIED:
        with _VERIFIED_LOCK:
            if id(embedder) not in _VERIFIED:
                try:
                    embedder.embed(["health"], "query")
                except RetrievalError as exc:
                    return exc.message
                _VERIFIED.add(id(embedder))
    failure = getattr(embedder, "failure", None)
    return failure if isinstance(failure, str) else None
