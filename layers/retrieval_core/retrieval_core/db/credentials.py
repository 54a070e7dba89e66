"""Connection info for PostgreSQL on AWS: DATABASE_HOST/PORT/NAME plus a Secrets Manager secret or an
RDS IAM auth token.

Passwords and tokens only ever go into the returned conninfo: no message raised here quotes one, and
boto3 and the Powertools parameters utility are imported on first use, never at import time.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.conninfo import make_conninfo

from retrieval_core.clients.aws import aws_client
from retrieval_core.clients.secret_store import read_secret
from retrieval_core.exceptions import ConfigurationError, DatabaseUnavailableError
from retrieval_core.settings import Settings

# RDS Proxy and RDS IAM auth both require TLS; a secret-based connection to RDS should not fall back to
# plain text either.
SSL_MODE = "require"


def aws_conninfo(settings: Settings) -> str:
    """A libpq conninfo for DATABASE_HOST, authenticated by DATABASE_SECRET_ARN or DATABASE_IAM_AUTH."""
    host = settings.database_host
    if not host:
        raise ConfigurationError("DATABASE_HOST is not set")
    if settings.database_iam_auth and settings.database_secret_arn:
        raise ConfigurationError("set either DATABASE_SECRET_ARN or DATABASE_IAM_AUTH=true, not both")
    if settings.database_iam_auth:
        user = settings.database_user
        if not user:
            raise ConfigurationError(
                "DATABASE_IAM_AUTH=true needs DATABASE_USER, the database user to sign in as"
            )
        password = iam_auth_token(host, settings.database_port, user)
    elif settings.database_secret_arn:
        user, password = secret_credentials(settings.database_secret_arn)
    else:
        raise ConfigurationError(
            "DATABASE_HOST is set but no credentials are: set DATABASE_SECRET_ARN or DATABASE_IAM_AUTH=true"
        )
    return make_conninfo(
        host=host,
        port=settings.database_port,
        dbname=settings.database_name,
        user=user,
        password=password,
        sslmode=SSL_MODE,
    )


def secret_credentials(secret_arn: str) -> tuple[str, str]:
    """(username, password) from a secret in the RDS JSON shape (cached, see aws_secrets)."""
    raw = read_secret(
        secret_arn,
        lambda code: DatabaseUnavailableError(
            f"could not read the database secret DATABASE_SECRET_ARN names ({code})",
            {"operation": "reading the database secret"},
        ),
        variable="DATABASE_SECRET_ARN",
    )
    try:
        payload: Any = json.loads(raw)
    except ValueError:
        # `from None`: the decoder error keeps the document, i.e. the secret, in its attributes.
        raise ConfigurationError(
            'the database secret is not JSON; expected {"username": ..., "password": ...}'
        ) from None
    username = payload.get("username") if isinstance(payload, dict) else None
    password = payload.get("password") if isinstance(payload, dict) else None
    if not isinstance(username, str) or not username or not isinstance(password, str) or not password:
        raise ConfigurationError(
            'the database secret needs non-empty string fields "username" and "password"'
        )
    return username, password


def iam_auth_token(host: str, port: int, user: str) -> str:
    """A 15-minute RDS IAM auth token for `user`, signed locally with the function's role credentials."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        # A new client each time: this runs once per connection setup, and a client kept across a
        # SnapStart restore could hold credentials of the snapshotting environment.
        client = aws_client("rds")
        token: str = client.generate_db_auth_token(DBHostname=host, Port=port, DBUsername=user)
    except (BotoCoreError, ClientError) as exc:
        raise ConfigurationError(
            f"could not create an RDS IAM auth token ({type(exc).__name__}); "
            "check AWS_REGION and the function's role"
        ) from exc
    return token
