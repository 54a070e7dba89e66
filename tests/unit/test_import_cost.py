"""Cold start: importing a handler must not pull in heavy clients or open connections.

A deterministic bound instead of a timing (timings live in the benchmarks): the
modules below each cost hundreds of milliseconds and are loaded on first use only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = [
    "torch",
    "numpy",
    "sentence_transformers",
    "transformers",
    "google.genai",
    "boto3",
    "psycopg_pool",
    "uvicorn",
    # Only the OpenAI and Gemini clients need it, on their first call.
    "httpx",
    # The local model's tokenizer: the first embedding, or the first returnFormatted answer, loads it.
    "tokenizers",
    # Settings read the environment themselves: pydantic-settings and python-dotenv are 30 modules more.
    "pydantic_settings",
    "dotenv",
]

# The MCP SDK's streamable HTTP transport imports sse-starlette, which imports uvicorn's logging setup
# (44 ms of the handler's import, measured with -X importtime); nothing of ours can leave it out.
IMPORTED_BY_SDK = {"mcp": ("uvicorn",)}

PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
assert callable(module.handler)
import retrieval_core.container as runtime
print(json.dumps({"modules": sorted(sys.modules), "service_built": runtime._service is not None}))
"""


# Modules a handler's cold start leaves to the request that needs them. The retrieve and similarity-search
# bodies and the filter language: functions that hold the pgvector service but never search. The migration
# runner: only the migrate function, or a process with AUTO_MIGRATE, migrates. Context packing: an answer
# that asks for it.
SEARCH_ONLY = (
    "retrieval_core.schemas.retrieve",
    "retrieval_core.schemas.similarity_search",
    "retrieval_core.schemas.search_options",
    "retrieval_core.filters.sql",
    "retrieval_core.filters.expression",
)
MIGRATION_RUNNER = "retrieval_core.db.migrations.runner"
CONTEXT_PACKING = ("retrieval_core.search.context_packing", "retrieval_core.search.token_count")
LEFT_TO_FIRST_USE = {
    "documents": (*SEARCH_ONLY, MIGRATION_RUNNER, *CONTEXT_PACKING),
    "ingest": (*SEARCH_ONLY, MIGRATION_RUNNER, *CONTEXT_PACKING),
    "migrate": SEARCH_ONLY,
    "retrieve": (MIGRATION_RUNNER, *CONTEXT_PACKING),
}


def imported_by_handler(function: str) -> tuple[set[str], bool]:
    """The modules a fresh interpreter holds after importing `function`'s handler, and whether that import
    built the service."""
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_LAMBDA_FUNCTION_NAME": function,
        "AWS_DEFAULT_REGION": "us-east-1",
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "POWERTOOLS_METRICS_NAMESPACE": "Test",
        # This checkout's layer, as Lambda puts the layer on sys.path (not whatever the venv installed).
        "PYTHONPATH": str(ROOT / "layers" / "retrieval_core"),
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "functions" / function / "app.py")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return set(report["modules"]), report["service_built"]


@pytest.mark.parametrize("function", sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py")))
def test_handler_import_loads_no_heavy_module_and_no_connection(function: str) -> None:
    if function == "mcp":
        pytest.importorskip("mcp")  # the `mcp` extra; `make check-min-deps` runs without it
    loaded, service_built = imported_by_handler(function)
    assert not [m for m in HEAVY if m in loaded and m not in IMPORTED_BY_SDK.get(function, ())]
    assert service_built is False


@pytest.mark.parametrize("function", sorted(LEFT_TO_FIRST_USE))
def test_a_handler_leaves_what_its_cold_start_does_not_need_to_first_use(function: str) -> None:
    loaded, _ = imported_by_handler(function)
    assert [m for m in LEFT_TO_FIRST_USE[function] if m in loaded] == []
