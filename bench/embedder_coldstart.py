"""Cold start of the local embedder in Lambda: the first embedding in a fresh python3.12 on the built layers.

`.venv/bin/python -m bench.embedder_coldstart [--runs 5]` after `make build` (with EmbedderLayer built).
Each run is a new python3.12 whose sys.path holds only what Lambda gives a function that embeds
locally: the built RetrievalCoreLayer's and EmbedderLayer's python/ (one /opt/python in Lambda), then
the runtime's boto3 (bench.coldstart's pinned stand-in). It times, with the environment the template
sets (LOCAL_EMBEDDER_RUNTIME, LOCAL_MODEL_DIR pointed at the built layer's models/ folder): importing
the embedder, then the first query (onnxruntime, tokenizer and model load, one inference), then a second
query. Bytecode writing is off, as on Lambda's read-only /opt. The median of the runs is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import textwrap

from bench.coldstart import BUILD_DIR, lambda_runtime_packages, require_python312
from bench.common import machine

PROBE = textwrap.dedent(
    """
    import json, time
    started = time.perf_counter()
    from retrieval_core.embeddings import get_embedder
    embedder = get_embedder()
    imported = time.perf_counter()
    embedder.embed(["what is the boiling point of water at altitude"], "query")
    first = time.perf_counter()
    embedder.embed(["how long does a passport renewal take"], "query")
    second = time.perf_counter()
    print(json.dumps({"import_ms": (imported - started) * 1000, "first_ms": (first - imported) * 1000,
                      "second_ms": (second - first) * 1000}))
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python = require_python312()
    runtime_dir = lambda_runtime_packages(python)
    layer = BUILD_DIR / "EmbedderLayer"
    (model_dir,) = (layer / "models").iterdir()
    (onnx_file,) = model_dir.glob("model.*.onnx")
    variant = onnx_file.name.split(".")[1]
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/nonexistent",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(BUILD_DIR / "RetrievalCoreLayer" / "python"), str(layer / "python"), str(runtime_dir)]
        ),
        "EMBEDDING_PROVIDER": "local",
        "LOCAL_EMBEDDER_RUNTIME": {"w8": "onnx-w8", "int8": "onnx-int8", "fp32": "onnx"}[variant],
        "LOCAL_MODEL_DIR": str(model_dir),
    }
    samples: list[dict[str, float]] = []
    for _ in range(args.runs):
        result = subprocess.run(
            [python, "-S", "-s", "-P", "-c", PROBE], env=env, capture_output=True, text=True, check=True
        )
        samples.append(json.loads(result.stdout.strip().splitlines()[-1]))
    print(f"{machine()}; {args.runs} fresh python3.12 processes on the built layers ({onnx_file.name})\n")
    print("| step | median (ms) | samples (ms) |")
    print("|---|---:|---|")
    for key, label in (
        ("import_ms", "import the embedder"),
        ("first_ms", "first query: load onnxruntime, tokenizer, model; embed"),
        ("second_ms", "second query"),
    ):
        values = [s[key] for s in samples]
        print(f"| {label} | {statistics.median(values):.0f} | {', '.join(f'{v:.0f}' for v in values)} |")


if __name__ == "__main__":
    main()
