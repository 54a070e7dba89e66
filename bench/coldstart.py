"""Cold start of the built Lambda handlers against the floor of the chosen stack. Run with `make coldstart`.

For each function in .aws-sam/build/template.yaml, a fresh python3.12 whose sys.path holds only the
built function folder, the layer's python/ and then the runtime's own packages (as in Lambda: boto3 and
botocore, which the layer leaves to the runtime; a pinned copy installed once under
.aws-sam/lambda-runtime/ stands in for them) imports the handler module, which builds the FastAPI app;
the time of that import is one sample. The floor is a minimal FastAPI app with one route wrapped by
Mangum, importing psycopg, pgvector and the Powertools Logger, with the same sys.path. Runs are
interleaved so that drift on the machine hits every row alike; the median of each is kept.

Handlers are measured three times: without LAMBDA_TASK_ROOT (tracing off, as locally) and with it (tracing
on, as in Lambda with `Tracing: Active`, started on demand), and a third time as a SnapStart init, which
loads the X-Ray SDK and patches botocore at init (shown, not held to the target). With --with-bytecode,
the floor and the first handler are measured again on two copies of the layer: without any bytecode,
and with every module byte-compiled.
"""

from __future__ import annotations

import argparse
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

from bench import first_request
from bench.common import find_python312, run_isolated

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / ".aws-sam" / "build"
REPORT = REPO / "docs" / "benchmarks-bundle.md"
TARGET_RATIO = 1.15
MIB = 1024 * 1024
LAYER_TARGET_BYTES = 60 * MIB

# What the Lambda python3.12 runtime provides besides the standard library (in
# /var/lang/lib/python3.12/site-packages, after /opt/python on sys.path): the AWS SDK for Python and
# what it requires. Pinned so that runs repeat; AWS moves the runtime's version on its own schedule
# ("Runtime-included SDK versions" in the Lambda developer guide), so bump this now and then.
LAMBDA_RUNTIME_SDK = ("boto3==1.43.108", "botocore==1.43.108")
LAMBDA_RUNTIME_CACHE = REPO / ".aws-sam" / "lambda-runtime"

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
    # An on-demand start: the one a request waits for (SnapStart and provisioned concurrency init ahead).
    "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
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
    judged: bool = True  # held to TARGET_RATIO: a start a request waits for
    samples: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    modules: int = 0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples)


def require_python312() -> str:
    """The python3.12 to measure with; exits with a clear message when there is none."""
    python = find_python312()
    if python is None:
        raise SystemExit("no python3.12 found (PATH or pyenv); it is what Lambda runs")
    return python


def lambda_runtime_packages(python: str) -> Path:
    """A folder holding what the Lambda runtime provides (LAMBDA_RUNTIME_SDK and its requirements),
    installed with `python`'s pip the first time and reused after."""
    folder = LAMBDA_RUNTIME_CACHE / "-".join(spec.replace("==", "-") for spec in LAMBDA_RUNTIME_SDK)
    if folder.is_dir():
        return folder
    LAMBDA_RUNTIME_CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=LAMBDA_RUNTIME_CACHE))
    try:
        proc = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "--target",
                str(staging),
                *LAMBDA_RUNTIME_SDK,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"pip could not install {' '.join(LAMBDA_RUNTIME_SDK)}:\n{proc.stderr[-3000:]}"
            )
        try:
            staging.rename(folder)  # whole or not at all
        except OSError:
            if not folder.is_dir():  # else another run installed it meanwhile
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def built_functions() -> tuple[list[tuple[str, str, Path]], Path]:
    """(logical id, handler, code folder) of each built function, and the layer folder."""
    from samtranslator.yaml_helper import yaml_parse

    built = BUILD_DIR / "template.yaml"
    if not built.is_file():
        raise SystemExit("no .aws-sam/build/template.yaml: run `make build` first")
    template = yaml_parse(built.read_text())
    resources = template["Resources"]
    # The core layer, which every function carries (ParsersLayer only adds parsing packages).
    layer = BUILD_DIR / resources["RetrievalCoreLayer"]["Properties"]["ContentUri"]
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
    proc = run_isolated(python, ["-c", PROBE, target.handler], env, cwd)
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
    proc = run_isolated(python, ["-X", "importtime", "-c", PROBE, target.handler], env, cwd)
    proc.check_returncode()
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


def layer_variant(python: str, layer: Path, into: Path, bytecode: bool) -> Path:
    """A copy of `layer` with no bytecode at all, or with every module byte-compiled as the build
    compiles the cold-start ones (unchecked-hash .pyc, valid whatever the files' mtimes)."""
    copy = into / ("all-bytecode" if bytecode else "no-bytecode") / layer.name
    shutil.copytree(layer, copy)
    for cache in list(copy.rglob("__pycache__")):
        shutil.rmtree(cache)
    if bytecode:
        subprocess.run(
            [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(copy)],
            check=True,
            capture_output=True,
        )
    return copy


def bytecode_size(layer: Path) -> int:
    return sum(f.stat().st_size for f in layer.rglob("*.pyc"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="samples per row (default 7)")
    parser.add_argument(
        "--with-bytecode",
        action="store_true",
        help="also measure the floor and the first handler on copies of the layer without any bytecode "
        "and with every module byte-compiled",
    )
    parser.add_argument(
        "--first-request",
        action="store_true",
        help=f"also measure the init and first invocation of {first_request.FUNCTION} (moto_server and an "
        "embedded PostgreSQL)",
    )
    parser.add_argument("--no-write", action="store_true", help=f"print only; do not write {REPORT.name}")
    args = parser.parse_args(argv)

    python = require_python312()
    python_version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    ).stdout.strip()
    functions, layer = built_functions()
    runtime = lambda_runtime_packages(python)
    lambda_env = {**FUNCTION_ENV, "AWS_LAMBDA_FUNCTION_NAME": "coldstart"}

    with tempfile.TemporaryDirectory(prefix="coldstart-") as tmp_name:
        tmp = Path(tmp_name)
        floor_dir = tmp / "floor"
        floor_dir.mkdir()
        (floor_dir / "floor_app.py").write_text(FLOOR_APP)

        def rows(layer_dir: Path, suffix: str, measured: list[tuple[str, str, Path]]) -> list[Target]:
            """The floor and `measured` handlers, all on the same sys.path tail: layer, then runtime."""
            tail = [layer_dir / "python", runtime]
            floor = Target(f"{FLOOR_LABEL}{suffix}", "floor_app.handler", [floor_dir, *tail], lambda_env)
            floor.baseline = floor
            found = [floor]
            for name, handler, code in measured:
                traced_env = {**lambda_env, "LAMBDA_TASK_ROOT": str(code)}
                ahead_env = {**traced_env, "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"}
                found += [
                    Target(f"{name} (tracing off){suffix}", handler, [code, *tail], lambda_env, floor),
                    Target(
                        f"{name} (tracing on, as in Lambda){suffix}",
                        handler,
                        [code, *tail],
                        traced_env,
                        floor,
                    ),
                    # No request waits on a SnapStart init: measured to show what it does at init, not judged.
                    Target(
                        f"{name} (tracing on, SnapStart init: all at init){suffix}",
                        handler,
                        [code, *tail],
                        ahead_env,
                        floor,
                        judged=False,
                    ),
                ]
            return found

        targets = rows(layer, "", functions)
        built_rows = list(targets)
        variants: list[tuple[str, Path]] = [("as built", layer)]
        if args.with_bytecode:
            for bytecode, what, suffix in (
                (False, "without any bytecode", " — layer without bytecode"),
                (True, "with every module byte-compiled", " — layer all byte-compiled"),
            ):
                variant = layer_variant(python, layer, tmp, bytecode)
                variants.append((what, variant))
                targets += rows(variant, suffix, functions[:1])
        sizes = [(what, layer_size(folder), bytecode_size(folder)) for what, folder in variants]

        for target in targets:  # warm-up: the page cache, not the interpreter, is what this warms
            measure(python, target, tmp)
            target.samples.clear()
            target.wall.clear()
        for _ in range(args.runs):
            for target in targets:
                measure(python, target, tmp)
        first_request_section = ""
        if args.first_request:
            (code,) = [code for name, _, code in functions if name == first_request.FUNCTION]
            first_rows = first_request.measure(
                python, code, [code, layer / "python", runtime], lambda_env, args.runs
            )
            first_request_section = FIRST_REQUEST_SECTION.format(
                table=first_request.table(first_rows, args.runs), doc=first_request.__doc__
            )
        floor, off, on, ahead = built_rows[:4]
        floor_imports = import_times(python, floor, tmp)
        off_imports = import_times(python, off, tmp)
        on_imports = import_times(python, on, tmp)
        ahead_imports = import_times(python, ahead, tmp)

    why = (
        f"`python -X importtime` of {off.label.split()[0]}: beyond the floor it spends "
        f"{extra_imports(floor_imports, off_imports)}; tracing on adds "
        f"{extra_imports(off_imports, on_imports) or 'no module at init'}; a SnapStart init, which loads "
        f"the X-Ray SDK and patches at init, adds {extra_imports(off_imports, ahead_imports)}."
    )
    lines = [
        f"| what | import + app construction, median of {args.runs} (ms) | process wall, median (ms) "
        "| modules loaded | ratio to floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for target in targets:
        baseline = target.baseline or floor
        ratio = target.median_ms / baseline.median_ms
        verdict = (
            "" if target is baseline or not target.judged else (" ✅" if ratio <= TARGET_RATIO else " ❌")
        )
        cells = [target.label, f"{target.median_ms:.0f}", f"{statistics.median(target.wall):.0f}"]
        cells += [str(target.modules), f"{ratio:.2f}×{verdict}"]
        lines.append(f"| {' | '.join(cells)} |")
    table = "\n".join(lines)

    _, size, pyc = sizes[0]
    layer_python = layer / "python"
    sdk = sorted(
        entry.name for entry in layer_python.iterdir() if entry.name.startswith(("boto", "s3transfer"))
    )
    heavy = ", ".join(f"{name} {bytes_ / MIB:.1f}" for name, bytes_ in biggest(layer))
    size_line = (
        f"Layer unzipped: {size / MIB:.1f} MiB ({size / 1e6:.1f} MB), of which {pyc / MIB:.1f} MiB is the "
        f"bytecode of the modules imported at cold start; biggest entries (MiB): {heavy}. "
        f"boto3, botocore and s3transfer in the layer: {', '.join(sdk) or 'none'}."
    )
    for what, other_size, other_pyc in sizes[1:]:
        size_line += (
            f" The same layer {what}: {other_size / MIB:.1f} MiB ({other_pyc / MIB:.1f} MiB bytecode)."
        )

    handler_rows = [t for t in built_rows if t.baseline is not t and t.judged]
    met = [t.label for t in handler_rows if t.median_ms / floor.median_ms <= TARGET_RATIO]
    missed = [t.label for t in handler_rows if t.median_ms / floor.median_ms > TARGET_RATIO]
    verdicts = (
        f"- Layer ≤ {LAYER_TARGET_BYTES // MIB} MiB unzipped: "
        f"**{'met' if size <= LAYER_TARGET_BYTES else 'missed'}** ({size / MIB:.1f} MiB).\n"
        f"- Each handler ≤ {TARGET_RATIO}× the floor (layer as built): "
        f"met by {', '.join(met) or 'none'}; **missed by {', '.join(missed) or 'none'}**."
    )
    print(table)
    print()
    print(size_line)
    print(verdicts)
    print(why)
    print(first_request_section)

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
                verdicts=verdicts,
                why=why,
                first_request=first_request_section,
                target=TARGET_RATIO,
                runs=args.runs,
                sdk=" and ".join(LAMBDA_RUNTIME_SDK),
            )
        )
        print(f"\nwritten to {REPORT.relative_to(REPO)}")
    return 0


FLOOR_LABEL = "floor: FastAPI + Mangum + psycopg + pgvector + Logger"

FIRST_REQUEST_SECTION = """
## Init and first request (`--first-request`)

{doc}
{table}
"""


REPORT_TEMPLATE = """# Bundle benchmarks: cold start and layer size

- Date: {when}
- Machine: {machine}
- Command: `{command}` (it runs `make build` first)

## Targets

{verdicts}

## Cold start of the built handlers

Each sample is a fresh python3.12 (`-S -s -P`) whose sys.path holds only the built function folder, the
layer's `python/` and then, as in Lambda, the runtime's own packages ({sdk} with their requirements,
installed under `.aws-sam/lambda-runtime/`; the layer leaves these to the runtime). It imports the
handler module; that import builds the FastAPI app, the Powertools Logger and Metrics (and, with tracing
on, the hooks that build the Tracer and patch libraries later). No database connection is made: the
service is built on the first request. The floor is the least any handler on this stack can cost: a
one-route FastAPI app wrapped by Mangum,
importing psycopg, pgvector and the Powertools Logger, with the same sys.path from the same layer (each
group of rows has its own floor, from its own copy of the layer). Rows were measured interleaved, {runs}
samples each after one warm-up round; bytecode writing is off, as on Lambda's read-only /opt and
/var/task. The environment is an on-demand start's (`AWS_LAMBDA_INITIALIZATION_TYPE=on-demand`). Target:
handler ≤ {target}× floor. On this shared 2-core machine the ratio of a row moves by up to about ±0.1
between runs.

{table}

Where the time goes: {why}

- **Bytecode**: Lambda cannot write `.pyc` (/opt is read-only), so a module without one is compiled at
  every cold start. The layer's Makefile byte-compiles exactly the layer modules a handler imports at
  cold start (it builds a handler with every router, tracing on, in an isolated python3.12 during the
  build, as a SnapStart init: what an on-demand start leaves to its first request is compiled too), as
  `unchecked-hash` `.pyc`, valid whatever mtimes the files get in the zip, with the `.py`
  kept for tracebacks. The "without bytecode" rows (with `--with-bytecode`) show what that saves; the
  "all byte-compiled" rows, what compiling the rest too (google-genai, google-auth, cryptography, ...,
  imported only on use) would add at cold start, for the size given below, which does not fit.
- **Tracing off** is the handler itself. What it adds to the floor is its own modules (models,
  repository, runtime) and pydantic-settings with python-dotenv, which `settings.py` uses.
- **Tracing on** is what Lambda runs with `Tracing: Active`. On an on-demand start
  (`retrieval_core/lambdas/tracing.py`) the init only registers what tracing needs: the first invocation
  builds the Powertools Tracer, which loads the X-Ray SDK, before running the handler, and botocore
  (for bedrock, or credentials from Secrets Manager or IAM, as configured here) and httpx are patched
  by an import hook when something first imports them, before anything can call them. Loading the
  SDK and patching at init used to import the runtime's botocore there, which the handler itself only
  imports with boto3 on its first request. Where the init runs before any request (SnapStart, on the
  published alias the API invokes, and provisioned concurrency), all of it is still done at init and
  kept in the snapshot: restored instances do not pay it. The stand-in runtime folder holds `.pyc`
  (pip writes them); that the real runtime's boto3 ships bytecode too is assumed, not measured.
{first_request}
## Layer size

{size_line}

The layer is built by `layers/retrieval_core/Makefile` (`BuildMethod: makefile`): the pinned
requirements as Lambda-platform wheels, minus what the python3.12 runtime provides (boto3, botocore,
s3transfer, and python-dateutil and six, which only botocore needs). `BuildMethod: python3.12` could not
leave botocore out (aws/aws-sam-cli#5367): aws-xray-sdk requires it, and its 20 MiB shadowed the
runtime's own copy. cryptography comes with google-auth, which google-genai requires.
"""


if __name__ == "__main__":
    sys.exit(main())
