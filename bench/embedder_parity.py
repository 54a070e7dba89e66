"""The torch-free runtimes of MiniLM against sentence-transformers on every dev set: same ranking quality?

For each BEIR set in ../shared/eval, every document (title, blank line, text, as ingest builds it) and
every judged query is embedded by each runtime of the local embedder; exact dense search over the whole
corpus ranks the documents, and nDCG@10 (gains 2^grade - 1, as bench.eval) is reported per runtime, with
its difference from torch and the lowest cosine between its vector and torch's of one text (documents
and queries). Documents are embedded whole (truncated at 256 tokens by every runtime alike), not
chunked: this compares the runtimes, not the service's chunking. Vectors are kept under
.data/embedder-parity so a re-run only scores; torch's are computed once, and only when absent (then
the `torch` extra must be installed).

Run: `.venv/bin/python -m bench.embedder_parity [--runtimes numpy onnx onnx-w8 onnx-int8]` (torch takes about
20 minutes on 2 cores for the three sets; each torch-free runtime 5 to 15).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from bench.common import REPO
from retrieval_core.evaluation.ranking_metrics import ndcg_at

EVAL_ROOT = REPO.parent / "shared" / "eval"
CACHE = REPO / ".data" / "embedder-parity"
COMPARED = ("numpy", "onnx", "onnx-w8", "onnx-int8")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    # split("\n"), not splitlines(): texts may hold U+2028, which splitlines() also breaks at.
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().split("\n"):
        if not line.strip():
            continue
        query_id, doc_id, grade = line.split("\t")
        if grade == "score":  # a header line
            continue
        qrels.setdefault(query_id, {})[doc_id] = int(grade)
    return qrels


def vectors(name: str, runtime: str, kind: str, texts: list[str]) -> Any:
    import numpy as np

    from retrieval_core.embeddings.local import LocalEmbedder

    path = CACHE / f"{name}-{kind}-{runtime}.npy"
    if path.is_file():
        return np.load(path)
    started = time.perf_counter()
    embedder = LocalEmbedder(batch_size=64, runtime=runtime)  # type: ignore[arg-type]
    array = np.asarray(embedder.embed(texts, "document" if kind == "corpus" else "query"), dtype=np.float32)
    print(f"  {name} {kind} {runtime}: {len(texts)} texts in {time.perf_counter() - started:.0f} s")
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return array


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtimes", nargs="+", default=list(COMPARED), help="compared with torch")
    compared = parser.parse_args().runtimes
    import numpy as np

    rows = []
    for folder in sorted(p for p in EVAL_ROOT.iterdir() if (p / "corpus.jsonl").is_file()):
        name = folder.name
        corpus = read_jsonl(folder / "corpus.jsonl")
        qrels = read_qrels(folder / "qrels" / "test.tsv")
        queries = {q["_id"]: q["text"] for q in read_jsonl(folder / "queries.jsonl") if q["_id"] in qrels}
        ids = [d["_id"] for d in corpus]
        texts = [f"{d['title']}\n\n{d['text']}" if d.get("title") else d["text"] for d in corpus]
        query_ids = list(queries)
        scores: dict[str, float] = {}
        embedded: dict[str, tuple[Any, Any]] = {}
        for runtime in ("torch", *compared):
            docs = vectors(name, runtime, "corpus", texts)
            asked = vectors(name, runtime, "queries", [queries[q] for q in query_ids])
            embedded[runtime] = (docs, asked)
            ranked = np.argsort(-(asked @ docs.T), axis=1, kind="stable")[:, :10]
            scores[runtime] = sum(
                ndcg_at([ids[i] for i in ranked[n]], qrels[q]) for n, q in enumerate(query_ids)
            ) / len(query_ids)
        for runtime in compared:
            cosines = np.concatenate(
                [np.sum(embedded["torch"][i] * embedded[runtime][i], axis=1) for i in (0, 1)]
            )
            difference = scores[runtime] - scores["torch"]
            assert not math.isnan(difference)
            rows.append(
                f"| {name} | {len(texts):,} | {len(query_ids)} | {runtime} | {scores['torch']:.4f} "
                f"| {scores[runtime]:.4f} | {difference:+.4f} | {float(cosines.min()):.6f} "
                f"| {int(np.sum(cosines < 0.99))} |"
            )

    print(
        "| set | documents | queries | runtime | nDCG@10 torch | nDCG@10 runtime | difference "
        "| lowest cosine | texts below 0.99 |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
