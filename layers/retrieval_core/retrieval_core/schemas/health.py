"""GET /api/v1/health: the overall status and each check (database, schema, pgvector, embedder)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from retrieval_core.schemas.common import ResponseModel

CheckStatus = Literal["ok", "failed", "overloaded", "skipped"]


class HealthCheck(ResponseModel):
    """One check of GET /api/v1/health."""

    status: CheckStatus = Field(
        description="`ok`; `failed`; `overloaded` (every database connection busy: retry shortly); "
        "`skipped` (not run because a check it needs failed)."
    )
    reason: str | None = Field(
        default=None, description="Unless `ok`: what is wrong and what to do. Never a host, user or key."
    )


class SchemaCheck(HealthCheck):
    """The schema version recorded by migrations against the one this code needs (newer is fine)."""

    version: int | None = Field(default=None, description="Recorded in schema_migrations; absent: none.")
    required_version: int = Field(description="The version this code needs (SCHEMA_VERSION).")


class PgvectorCheck(HealthCheck):
    """The installed `vector` extension: 0.8 or newer (iterative index scans)."""

    version: str | None = Field(default=None, description="e.g. `0.8.5`; absent: not installed.")


class EmbedderCheck(HealthCheck):
    """The embedding provider is configured. Never a call to the provider, never a secret read."""

    provider: str = Field(description="EMBEDDING_PROVIDER: local, openai, gemini or bedrock.")
    model: str
    loaded: bool | None = Field(
        default=None,
        description="Local provider only: the model is in memory (else the first query loads it).",
    )


class HealthChecks(ResponseModel):
    """Each check by name."""

    database: HealthCheck = Field(description="A round trip to PostgreSQL on the service's connections.")
    # `schema` would shadow a BaseModel attribute; the alias keeps the wire name.
    schema_check: SchemaCheck = Field(alias="schema")
    pgvector: PgvectorCheck
    embedder: EmbedderCheck


class HealthResponse(ResponseModel):
    """Readiness: HTTP 200 when every check is `ok`, else 503 with the same body."""

    status: Literal["ok", "degraded", "overloaded"] = Field(
        description="`ok`; `degraded` (a check failed: see its reason); `overloaded` (every database "
        "connection busy, nothing failed: retry shortly)."
    )
    checks: HealthChecks
