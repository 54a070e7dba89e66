"""The torch-free MiniLM against sentence-transformers on every dev set: same ranking quality?

For each BEIR set in ../shared/eval, every document (title, blank line, text, as ingest builds it) and
every judged query is embedded by both runtimes of the local embedder; exact dense search over the
whole corpus ranks the documents, and nDCG@10 (gains 2^grade - 1, as bench.eval) is reported per
runtime, with the lowest cosine between the two runtimes' vectors of one text. Documents are embedded
whole (truncated at 256 tokens by both runtimes alike), not chunked: this compares the runtimes, not
the service's chunking. Vectors are kept under .data/embedder-parity so a re-run only scores.

Run: `.venv/bin/python -m bench.embedder_parity` (about 25 minutes on 2 cores, torch the most of it).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from bench.common import REPO
from bench.eval import ndcg_at

EVAL_ROOT = REPO.parent / "shared" / "eval"
CACHE = REPO / ".data" / "embedder-parity"
RUNTIMES = ("torch", "numpy")


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
    argparse.ArgumentParser(description=__doc__).parse_args()
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
        for runtime in RUNTIMES:
            docs = vectors(name, runtime, "corpus", texts)
            asked = vectors(name, runtime, "queries", [queries[q] for q in query_ids])
            embedded[runtime] = (docs, asked)
            ranked = np.argsort(-(asked @ docs.T), axis=1, kind="stable")[:, :10]
            scores[runtime] = sum(
                ndcg_at([ids[i] for i in ranked[n]], qrels[q]) for n, q in enumerate(query_ids)
            ) / len(query_ids)
        cosines = np.concatenate(
            [np.sum(embedded["torch"][i] * embedded["numpy"][i], axis=1) for i in (0, 1)]
        )
        lowest = float(cosines.min())
        rows.append((name, len(texts), len(query_ids), scores["torch"], scores["numpy"], lowest))

    print("| set | documents | queries | nDCG@10 torch | nDCG@10 numpy | difference | lowest cosine |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, docs, asked, torch_score, numpy_score, lowest in rows:
        difference = numpy_score - torch_score
        assert not math.isnan(difference)
        print(
            f"| {name} | {docs:,} | {asked} | {torch_score:.4f} | {numpy_score:.4f} | {difference:+.4f} "
            f"| {lowest:.6f} |"
        )


if __name__ == "__main__":
    main()
