"""The local embedder's two runtimes on this machine: passages per second and resident memory.

`.venv/bin/python -m bench.local_embedders` embeds the first 1,000 msmarco-5k passages (batch 64) with
LocalEmbedder in a fresh subprocess per runtime, so each peak RSS (ru_maxrss) counts that runtime alone:
interpreter, libraries, weights and activations.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from bench.common import REPO, machine

PASSAGES = 1000
BATCH = 64
RUNS = {
    "torch (sentence-transformers)": ["torch"],
    "numpy fp32": ["numpy"],
    "numpy fp32, batches in corpus order": ["numpy", "--unsorted"],
}


def measure(runtime: str, sort_by_length: bool) -> dict[str, float]:
    """One runtime's numbers, measured in this process."""
    from bench.common import load_passages
    from retrieval_core.embeddings.local import LocalEmbedder

    passages = load_passages(limit=PASSAGES)
    embedder = LocalEmbedder(batch_size=BATCH, runtime=runtime)  # type: ignore[arg-type]
    start = time.perf_counter()
    embedder.embed(["warm up"], "query")
    load_s = time.perf_counter() - start
    if runtime == "numpy":
        # The loaded runtime is MiniLMEncoder.encode: its encoder holds the switch.
        embedder._load().__self__.sort_by_length = sort_by_length  # type: ignore[attr-defined]
    start = time.perf_counter()
    embedder.embed(passages, "document")
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    embedder.embed(["what is the boiling point of water at altitude"], "query")
    query_ms = (time.perf_counter() - start) * 1000
    return {
        "load_s": load_s,
        "passages_per_s": len(passages) / seconds,
        "query_ms": query_ms,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=["numpy", "torch"], help="measure one runtime, print JSON")
    parser.add_argument("--unsorted", action="store_true", help="numpy: batch texts in the order given")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, sort_by_length=not args.unsorted)))
        return

    print(f"{PASSAGES} msmarco-5k passages, batch {BATCH}; {machine()}\n")
    print("| runtime | load + first text (s) | passages/s | one query (ms) | peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|")
    for name, worker_args in RUNS.items():
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
            f"| {name} | {r['load_s']:.2f} | {r['passages_per_s']:.1f} | {r['query_ms']:.1f} "
            f"| {r['max_rss_mb']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
