"""Where McpFunction's cold start goes, stage by stage. Run with `make build`, then
`.venv/bin/python -m bench.mcp_import`.

Each sample is a fresh python3.12 on the built McpFunction's sys.path (function folder, core layer, the
stand-in runtime of bench/coldstart.py), importing in four timed stages:

1. what every HTTP function imports: the Lambda wrapper (FastAPI, Mangum, Powertools) and the health
   router;
2. `mcp_types`, the protocol's pydantic models: the least any server on the official SDK needs;
3. the SDK modules the server uses (`mcp.server.lowlevel`, `mcp.server.streamable_http_manager`, its
   request context and errors). Importing any `mcp.*` module first runs the package's `__init__`, which
   imports the client stack and, through it, the whole server and HTTP stack;
4. our own `api/mcp/` modules, and building the handler.

Prints the median of each stage and the modules each loads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import textwrap

from bench.coldstart import (
    BUILD_DIR,
    FUNCTION_ENV,
    built_functions,
    lambda_runtime_packages,
    require_python312,
)
from bench.common import run_isolated

STAGES = ("HTTP function share", "mcp_types", "the SDK's server modules", "our api/mcp and the handler")

PROBE = textwrap.dedent(
    """
    import json, sys, time
    marks = [(time.perf_counter(), len(sys.modules))]
    def mark():
        marks.append((time.perf_counter(), len(sys.modules)))
    from retrieval_core.lambdas.cold_start import collector_paused
    with collector_paused():
        from retrieval_core.api.lambda_handler import build_handler
        import retrieval_core.api.routers.health
        mark()
        import mcp_types
        mark()
        import mcp.server.context, mcp.server.lowlevel, mcp.shared.exceptions
        import mcp.server.streamable_http_manager
        mark()
        from retrieval_core.api.mcp.server import mcp_router
        handler = build_handler(mcp_router())
        mark()
    print(json.dumps([[(b[0] - a[0]) * 1000, b[1] - a[1]] for a, b in zip(marks, marks[1:])]))
    """
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes (default 15)")
    args = parser.parse_args(argv)
    python = require_python312()
    functions, layer = built_functions()
    (code,) = [code for name, _, code in functions if name == "McpFunction"]
    path = [code, layer / "python", lambda_runtime_packages(python)]
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": ":".join(str(p) for p in path),
        "PYTHONDONTWRITEBYTECODE": "1",
        **FUNCTION_ENV,
        "AWS_LAMBDA_FUNCTION_NAME": "coldstart",
        "LAMBDA_TASK_ROOT": str(code),
    }
    samples: list[list[list[float]]] = []
    for _ in range(args.runs + 1):  # the first is a warm-up of the file cache
        proc = run_isolated(python, ["-c", PROBE], env, BUILD_DIR)
        if proc.returncode != 0:
            raise SystemExit(f"the probe failed:\n{proc.stderr[-3000:]}")
        samples.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    samples = samples[1:]
    print(f"McpFunction's import, by stage: median of {args.runs} fresh python3.12 processes\n")
    print("| stage | median (ms) | range (ms) | modules |")
    print("|---|---:|---:|---:|")
    for index, stage in enumerate(STAGES):
        times = [sample[index][0] for sample in samples]
        modules = int(samples[-1][index][1])
        print(f"| {stage} | {statistics.median(times):.0f} | {min(times):.0f}–{max(times):.0f} | {modules} |")
    totals = [sum(stage[0] for stage in sample) for sample in samples]
    print(f"| total | {statistics.median(totals):.0f} | {min(totals):.0f}–{max(totals):.0f} | |")


if __name__ == "__main__":
    main()
