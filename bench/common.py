"""Helpers shared by the benchmarks: timing, the machine description, the eval data set."""

from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EVAL_DIR = REPO.parent / "shared" / "eval" / "msmarco-5k"


def machine() -> str:
    """One line naming the CPU, core count and Python."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def timed_ms(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall-clock milliseconds of `repeat` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def median(samples: list[float]) -> float:
    """The median."""
    return statistics.median(samples)


def load_queries() -> dict[str, str]:
    """query id -> text of the eval set."""
    with (EVAL_DIR / "queries.jsonl").open() as lines:
        return {str(q["_id"]): q["text"] for q in map(json.loads, lines)}


def find_python312() -> str | None:
    """A working python3.12, what Lambda runs: on PATH, else pyenv's (whose shim may exist but refuse)."""
    candidates = [shutil.which("python3.12")]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/3.12.*/bin/python3.12"), reverse=True)
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


def moto_environment() -> dict[str, str]:
    """Environment for code under benchmark that talks to moto_server: dummy credentials, quiet logs."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_METRICS_NAMESPACE": "Bench",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


def bench_store(service: Any) -> str:
    """`msmarco-5k` when `make bench` has ingested it, else the sample store (loaded if needed)."""
    from retrieval_core.documents.sample import load_sample_corpus
    from retrieval_core.exceptions import StoreNotFoundError

    try:
        return str(service.get_store("msmarco-5k").name)
    except StoreNotFoundError:
        load_sample_corpus(service)
        return "sample"


def load_passages(limit: int | None = None) -> list[str]:
    """The eval corpus's passages as ingest embeds them: each chunk, after its title when there is one."""
    from retrieval_core.documents.chunking import chunk_text
    from retrieval_core.settings import Settings

    defaults = Settings.model_fields
    size, overlap = defaults["chunk_size"].default, defaults["chunk_overlap"].default
    passages: list[str] = []
    with (EVAL_DIR / "corpus.jsonl").open() as lines:
        for record in map(json.loads, lines):
            title = record.get("title") or ""
            for chunk in chunk_text(record["text"], size, overlap):
                passages.append(f"{title}\n\n{chunk}" if title else chunk)
                if limit is not None and len(passages) == limit:
                    return passages
    return passages


def run_isolated(
    python: str, args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`python -S -s -P` with `args`: an interpreter that sees no site-packages, only what `env` puts
    on its path (output captured, two minutes at most, the exit status left to the caller)."""
    return subprocess.run(
        [python, "-S", "-s", "-P", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
