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
    "DATABASE_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/db-AbCdEf",
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
    baseline: Target | None = None  # the floor this row is compared with
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


def import_times(python: str, target: Target, cwd: Path) -> dict[str, float]:
    """Self ms per imported module, from one `python -X importtime` run of `target`."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(str(p) for p in target.path),
        "PYTHONDONTWRITEBYTECODE": "1",
        **target.env,
    }
    proc = subprocess.run(
        [python, "-S", "-s", "-P", "-X", "importtime", "-c", PROBE, target.handler],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    times: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line.split(":", 1)[1].split("|")
        times[name.strip()] = int(self_us) / 1000
    return times


def extra_imports(base: dict[str, float], other: dict[str, float], count: int = 5) -> str:
    """Where `other` spends import time that `base` does not: self ms of the modules only `other`
    imports, summed per top-level package, biggest first."""
    per_package: dict[str, float] = {}
    for name, ms in other.items():
        if name not in base:
            package = name.split(".", 1)[0]
            per_package[package] = per_package.get(package, 0.0) + ms
    top = sorted(per_package.items(), key=lambda item: item[1], reverse=True)[:count]
    return ", ".join(f"`{name}` {ms:.0f} ms" for name, ms in top)


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


def compiled_copy(python: str, folders: list[Path], into: Path) -> list[Path]:
    """Copies of `folders` with every module byte-compiled (hash-checked .pyc, valid on any mtime)."""
    copies = []
    for folder in folders:
        copy = into / folder.parent.name / folder.name
        shutil.copytree(folder, copy)
        copies.append(copy)
    subprocess.run(
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            *map(str, copies),
        ],
        check=True,
        capture_output=True,
    )
    return copies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="samples per row (default 7)")
    parser.add_argument(
        "--with-bytecode",
        action="store_true",
        help="also measure the floor and the first handler with the layer byte-compiled beforehand",
    )
    parser.add_argument("--no-write", action="store_true", help=f"print only; do not write {REPORT.name}")
    args = parser.parse_args(argv)

    python = find_python312()
    python_version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    ).stdout.strip()
    functions, layer = built_functions()
    layer_python = layer / "python"
    lambda_env = {**FUNCTION_ENV, "AWS_LAMBDA_FUNCTION_NAME": "coldstart"}

    with tempfile.TemporaryDirectory(prefix="coldstart-") as tmp_name:
        tmp = Path(tmp_name)
        floor_dir = tmp / "floor"
        floor_dir.mkdir()
        (floor_dir / "floor_app.py").write_text(FLOOR_APP)
        floor = Target(FLOOR_LABEL, "floor_app.handler", [floor_dir, layer_python], lambda_env)
        floor.baseline = floor
        targets = [floor]
        for name, handler, code in functions:
            targets.append(
                Target(f"{name} (tracing off)", handler, [code, layer_python], lambda_env, baseline=floor)
            )
            traced_env = {**lambda_env, "LAMBDA_TASK_ROOT": str(code)}
            targets.append(
                Target(
                    f"{name} (tracing on, as in Lambda)",
                    handler,
                    [code, layer_python],
                    traced_env,
                    baseline=floor,
                )
            )
        if args.with_bytecode:
            name, handler, code = functions[0]
            compiled_floor, compiled_code, compiled_layer = compiled_copy(
                python, [floor_dir, code, layer], tmp / "compiled"
            )
            compiled_python = compiled_layer / "python"
            floor_pyc = Target(
                f"{FLOOR_LABEL}, bytecode precompiled",
                "floor_app.handler",
                [compiled_floor, compiled_python],
                lambda_env,
            )
            floor_pyc.baseline = floor_pyc
            targets += [
                floor_pyc,
                Target(
                    f"{name} (tracing off), bytecode precompiled",
                    handler,
                    [compiled_code, compiled_python],
                    lambda_env,
                    baseline=floor_pyc,
                ),
            ]
        for target in targets:  # warm-up: the page cache, not the interpreter, is what this warms
            measure(python, target, tmp)
            target.samples.clear()
            target.wall.clear()
        for _ in range(args.runs):
            for target in targets:
                measure(python, target, tmp)
        off, on = targets[1], targets[2]
        floor_imports = import_times(python, floor, tmp)
        off_imports = import_times(python, off, tmp)
        on_imports = import_times(python, on, tmp)

    why = (
        f"`python -X importtime` of {off.label.split()[0]}: beyond the floor it spends "
        f"{extra_imports(floor_imports, off_imports)}; tracing on adds "
        f"{extra_imports(off_imports, on_imports)}."
    )
    lines = [
        f"| what | import + app construction, median of {args.runs} (ms) | process wall, median (ms) "
        "| modules loaded | ratio to floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for target in targets:
        baseline = target.baseline or floor
        ratio = target.median_ms / baseline.median_ms
        verdict = "" if target is baseline else (" ✅" if ratio <= TARGET_RATIO else " ❌")
        cells = [target.label, f"{target.median_ms:.0f}", f"{statistics.median(target.wall):.0f}"]
        cells += [str(target.modules), f"{ratio:.2f}×{verdict}"]
        lines.append(f"| {' | '.join(cells)} |")
    table = "\n".join(lines)

    size = layer_size(layer)
    botocore = sum(
        layer_size(entry) if entry.is_dir() else entry.stat().st_size
        for entry in layer_python.glob("botocore*")
    )
    heavy = ", ".join(f"{name} {bytes_ / MIB:.1f}" for name, bytes_ in biggest(layer))
    size_line = (
        f"Layer unzipped: {size / MIB:.1f} MiB ({size / 1e6:.1f} MB); biggest entries (MiB): {heavy}. "
        f"Without botocore (the Lambda runtime has it) it would be {(size - botocore) / MIB:.1f} MiB."
    )
    print(table)
    print()
    print(size_line)
    print(why)

    if not args.no_write:
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        shown_args = " ".join(argv if argv is not None else sys.argv[1:])
        command = f"make coldstart{f' ARGS={shown_args!r}' if shown_args else ''}"
        REPORT.parent.mkdir(exist_ok=True)
        REPORT.write_text(
            REPORT_TEMPLATE.format(
                when=when,
                machine=f"{cpu_model()}, nproc {os.cpu_count()}, python {python_version} ({python})",
                command=command,
                table=table,
                size_line=size_line,
                why=why,
                target=TARGET_RATIO,
                runs=args.runs,
            )
        )
        print(f"\nwritten to {REPORT.relative_to(REPO)}")
    return 0


FLOOR_LABEL = "floor: FastAPI + Mangum + psycopg + pgvector + Logger"


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
layer. Rows were measured interleaved, {runs} samples each after one warm-up round; bytecode writing is
off, as on Lambda's read-only /opt and /var/task. Target: handler ≤ {target}× floor. On this shared
2-core machine the ratio of a row moves by up to about ±0.1 between runs.

{table}

Where the time goes: {why}

- **Tracing off** is the handler itself. What it adds to the floor is its own modules (models,
  repository, runtime) and pydantic-settings with python-dotenv, which `settings.py` uses.
- **Tracing on** is what Lambda runs with `Tracing: Active`: the Powertools Tracer loads the X-Ray SDK,
  which loads botocore (and urllib3, dateutil, wrapt). The handler patches only what the configured
  deployment calls: httpx for the openai and gemini providers, botocore for bedrock or when database
  credentials come from Secrets Manager or IAM; such a deployment imports botocore on its first request
  anyway. SnapStart (on the published alias the API invokes) runs all of this once, before the
  snapshot; restored instances do not pay it.
- **No bytecode in the layer**: `sam build` installs sources without `.pyc`, and Lambda cannot write
  them, so every cold start compiles every module it imports. The "bytecode precompiled" rows (when
  measured) show what a build that runs `compileall` would save; the `.pyc` files would add about
  25–30 MiB to the layer.

## Layer size

{size_line}

botocore is in the layer only because `aws-xray-sdk` (the Powertools `tracer` extra) requires it; the
Lambda runtime already has botocore and boto3, and the layer's copy shadows the runtime's, so the
runtime's boto3 runs on a botocore it was not released with. `BuildMethod: python3.12` cannot leave a
transitive dependency out (aws/aws-sam-cli#5367); a `makefile` build of the layer that installs the same
requirements and drops botocore would meet the 60 MiB target. cryptography comes with google-auth,
which google-genai requires.
"""


if __name__ == "__main__":
    sys.exit(main())
