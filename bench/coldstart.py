"""Cold start of the built Lambda handlers against the floor of the chosen stack. Run with `make coldstart`.

For each function in .aws-sam/build/template.yaml, a fresh python3.12 whose sys.path holds only the
built function folder and the layer's python/ (as in Lambda) imports the handler module, which builds
the FastAPI app; the time of that import is one sample. The floor is a minimal FastAPI app with one
route wrapped by Mangum, importing psycopg, pgvector and the Powertools Logger, from the same layer.
Runs are interleaved so that drift on the machine hits every row alike; the median of each is kept.

Handlers are measured twice: without LAMBDA_TASK_ROOT (tracing off, as locally) and with it (tracing
on, as in Lambda with `Tracing: Active`, which loads the X-Ray SDK and botocore).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / ".aws-sam" / "build"
REPORT = REPO / "docs" / "benchmarks-bundle.md"
TARGET_RATIO = 1.15
MIB = 1024 * 1024

# Environment a deployment would give the functions, minus anything that would reach the network:
# building a handler must not connect anywhere, so these hosts are never contacted.
FUNCTION_ENV = {
    "POWERTOOLS_SERVICE_NAME": "retrieval-service",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    "POWERTOOLS_METRICS_NAMESPACE": "RetrievalService",
    "AUTO_MIGRATE": "false",
    "DATABASE_HOST": "rag-proxy.proxy-abc123.us-east-1.rds.amazonaws.com",
    "DATABASE_PORT": "5432",
    "DATABASE_NAME": "postgres",
    "DATABASE_IAM_AUTH": "false",
    "EMBEDDING_PROVIDER": "bedrock",
    "EMBEDDING_MODEL": "amazon.titan-embed-text-v2:0",
    "EMBEDDING_DIMENSION": "1024",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
}

FLOOR_APP = textwrap.dedent(
    """
    import psycopg
    from aws_lambda_powertools import Logger
    from fastapi import FastAPI
    from mangum import Mangum
    from pgvector.psycopg import register_vector

    logger = Logger(service="floor")
    app = FastAPI()


    @app.get("/ping")
    def ping() -> dict[str, str]:
        return {"status": "ok"}


    handler = Mangum(app, lifespan="off")
    """
)

# Runs in the isolated interpreter: standard library only until the handler import.
PROBE = textwrap.dedent(
    """
    import importlib, json, sys, time
    started = time.perf_counter()
    module_name, attribute = sys.argv[1].rsplit(".", 1)
    getattr(importlib.import_module(module_name), attribute)
    elapsed = time.perf_counter() - started
    print(json.dumps({"import_ms": elapsed * 1000, "modules": len(sys.modules)}))
    """
)


@dataclass
class Target:
    """One thing to cold-start: a handler spec with the folders on its sys.path."""

    label: str
    handler: str
    path: list[Path]
    env: dict[str, str]
    samples: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    modules: int = 0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples)


def find_python312() -> str:
    """A python3.12 that runs: on PATH, else from pyenv (whose shim may exist but refuse to run)."""
    candidates = [shutil.which("python3.12")]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/3.12.*/bin/python3.12"), reverse=True)
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    raise SystemExit("no python3.12 found (PATH or pyenv); it is what Lambda runs")


def built_functions() -> tuple[list[tuple[str, str, Path]], Path]:
    """(logical id, handler, code folder) of each built function, and the layer folder."""
    from samtranslator.yaml_helper import yaml_parse

    built = BUILD_DIR / "template.yaml"
    if not built.is_file():
        raise SystemExit("no .aws-sam/build/template.yaml: run `make build` first")
    template = yaml_parse(built.read_text())
    resources = template["Resources"]
    (layer,) = [
        BUILD_DIR / r["Properties"]["ContentUri"]
        for r in resources.values()
        if r["Type"] == "AWS::Serverless::LayerVersion"
    ]
    functions = [
        (name, r["Properties"]["Handler"], BUILD_DIR / r["Properties"]["CodeUri"])
        for name, r in resources.items()
        if r["Type"] == "AWS::Serverless::Function"
    ]
    return functions, layer


def measure(python: str, target: Target, cwd: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(str(p) for p in target.path),
        "PYTHONDONTWRITEBYTECODE": "1",
        **target.env,
    }
    started = datetime.now(UTC)
    proc = subprocess.run(
        [python, "-S", "-s", "-P", "-c", PROBE, target.handler],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall_ms = (datetime.now(UTC) - started).total_seconds() * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{target.label} failed to import:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    target.samples.append(result["import_ms"])
    target.wall.append(wall_ms)
    target.modules = result["modules"]


def layer_size(layer: Path) -> int:
    return sum(f.stat().st_size for f in layer.rglob("*") if f.is_file())


def biggest(layer: Path, count: int = 6) -> list[tuple[str, int]]:
    sizes = {
        entry.name: (
            sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
            if entry.is_dir()
            else entry.stat().st_size
        )
        for entry in (layer / "python").iterdir()
    }
    return sorted(sizes.items(), key=lambda item: item[1], reverse=True)[:count]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="samples per row (default 7)")
    parser.add_argument("--no-write", action="store_true", help=f"print only; do not write {REPORT.name}")
    args = parser.parse_args(argv)

    python = find_python312()
    python_version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    ).stdout.strip()
    functions, layer = built_functions()
    layer_python = layer / "python"

    with tempfile.TemporaryDirectory(prefix="coldstart-") as tmp:
        floor_dir = Path(tmp) / "floor"
        floor_dir.mkdir()
        (floor_dir / "floor_app.py").write_text(FLOOR_APP)
        lambda_env = {**FUNCTION_ENV, "AWS_LAMBDA_FUNCTION_NAME": "coldstart"}
        floor = Target(
            "floor: FastAPI + Mangum + psycopg + pgvector + Logger",
            "floor_app.handler",
            [floor_dir, layer_python],
            lambda_env,
        )
        handlers: list[Target] = []
        for name, handler, code in functions:
            handlers.append(Target(f"{name} (tracing off)", handler, [code, layer_python], lambda_env))
            handlers.append(
                Target(
                    f"{name} (tracing on, as in Lambda)",
                    handler,
                    [code, layer_python],
                    {**lambda_env, "LAMBDA_TASK_ROOT": str(code)},
                )
            )
        targets = [floor, *handlers]
        for target in targets:  # warm-up: the page cache, not the interpreter, is what this warms
            measure(python, target, Path(tmp))
            target.samples.clear()
            target.wall.clear()
        for _ in range(args.runs):
            for target in targets:
                measure(python, target, Path(tmp))

    size = layer_size(layer)
    lines = [
        f"| what | import + app construction, median of {args.runs} (ms) | process wall, median (ms) "
        "| modules loaded | ratio to floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for target in targets:
        ratio = target.median_ms / floor.median_ms
        verdict = "" if target is floor else (" ✅" if ratio <= TARGET_RATIO else " ❌")
        lines.append(
            f"| {target.label} | {target.median_ms:.0f} | {statistics.median(target.wall):.0f} | {target.modules} "
            f"| {ratio:.2f}×{verdict} |"
        )
    table = "\n".join(lines)
    heavy = ", ".join(f"{name} {bytes_ / MIB:.1f}" for name, bytes_ in biggest(layer))
    size_line = f"Layer unzipped: {size / MIB:.1f} MiB ({size / 1e6:.1f} MB); biggest entries (MiB): {heavy}."
    print(table)
    print()
    print(size_line)

    if not args.no_write:
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        command = "make coldstart  (= .venv/bin/python bench/coldstart.py, after sam build --cached)"
        REPORT.parent.mkdir(exist_ok=True)
        REPORT.write_text(
            REPORT_TEMPLATE.format(
                when=when,
                machine=f"{cpu_model()}, nproc {os.cpu_count()}, python {python_version} ({python})",
                command=command,
                table=table,
                size_line=size_line,
                target=TARGET_RATIO,
                runs=args.runs,
            )
        )
        print(f"\nwritten to {REPORT.relative_to(REPO)}")
    return 0


REPORT_TEMPLATE = """# Bundle benchmarks: cold start and layer size

- Date: {when}
- Machine: {machine}
- Command: `{command}`

## Cold start of the built handlers

Each sample is a fresh python3.12 (`-S -s -P`) whose sys.path holds only the built function folder and
the layer's `python/`, importing the handler module; that import builds the FastAPI app, the Powertools
Logger and Metrics (and the Tracer when tracing is on). No database connection is made: the service is
built on the first request. The floor is the least any handler on this stack can cost: a one-route
FastAPI app wrapped by Mangum, importing psycopg, pgvector and the Powertools Logger, from the same
layer. Rows were measured interleaved, {runs} samples each after one warm-up round. Target: handler
≤ {target}× floor.

{table}

{size_line}

"Tracing on" is what Lambda runs with `Tracing: Active`: Powertools' Tracer imports the X-Ray SDK,
which imports botocore. With SnapStart (enabled on the published alias) that import happens once,
before the snapshot, and restored instances do not pay it.
"""


if __name__ == "__main__":
    sys.exit(main())
