"""Retrieval quality on BEIR-format sets: `make eval [DATASET=folder]`, `make eval-all`; writes
docs/quality.md.

Each set is loaded into store `eval-<folder name>` of the embedded PostgreSQL under .data, through the
production write path (unchanged documents are skipped on a re-run, and every vector comes from the
cache under .data/vectors when it was embedded before), then `retrieval_core.evaluation` runs every
method, the same code as `retrieval eval`, with one extra row: the BM25 anchor computed by bm25s
(bench/bm25_anchor.py).

The weighted-fusion sweep is reported on the same queries it sweeps (the sets have no held-out split).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import EVAL_DIR, REPO, machine

OUT = REPO / "docs" / "quality.md"
VECTORS = REPO / ".data" / "vectors"
NOTES = "<!-- notes -->"


def store_name(folder: Path) -> str:
    """The store a set is loaded into: `eval-` and the folder's name, in the characters a name may hold."""
    return "eval-" + re.sub(r"[^a-z0-9-]+", "-", folder.name.lower()).strip("-")


def qrels_file(folder: Path) -> Path:
    """The set's test judgments: qrels/test.tsv (BEIR's name for the split every set here provides)."""
    path = folder / "qrels" / "test.tsv"
    if not path.exists():
        raise SystemExit(f"{folder}: no qrels/test.tsv")
    return path


def load(folder: Path, fresh: bool) -> tuple[str, float]:
    """Load the set's corpus into its store (through the vector cache); the store name and seconds taken.

    Each record is written as its own source through DocumentService, the write path of the HTTP API,
    the CLI and S3 sync (tests/writing.py).
    """
    from bench.vector_cache import CachedEmbedder
    from retrieval_core.container import get_document_service, get_service
    from retrieval_core.evaluation.beir import read_corpus
    from retrieval_core.exceptions import StoreNotFoundError
    from retrieval_core.settings import get_settings
    from tests.writing import TextDocument, ensure_store, write_documents

    service = get_service()
    settings = get_settings()
    name = store_name(folder)
    if fresh:
        with contextlib.suppress(StoreNotFoundError):
            get_document_service().delete_store(name)
    embedder = CachedEmbedder(service.embedder, VECTORS)
    start = time.perf_counter()
    ensure_store(service, name, embedder)
    documents = (TextDocument(i, text, title) for i, title, text in read_corpus(folder / "corpus.jsonl"))
    report = write_documents(service, name, documents, settings.chunk_size, settings.chunk_overlap, embedder)
    seconds = time.perf_counter() - start
    print(
        f"{name}: {report.documents_written} documents written ({report.chunks_written} chunks), "
        f"{report.documents_unchanged} unchanged, {report.documents_empty} empty; vectors: "
        f"{embedder.hits} from the cache, {embedder.misses} embedded; {seconds:.1f} s"
    )
    embedder.close()
    return name, seconds


def evaluate(folder: Path, fresh: bool, command: str) -> str:
    """The Markdown block of one set: what was run, when and how, and the table."""
    from bench.bm25_anchor import bm25_method
    from bench.vector_cache import CachedEmbedder
    from retrieval_core.container import get_service
    from retrieval_core.evaluation import beir
    from retrieval_core.evaluation.runner import evaluate_store
    from retrieval_core.settings import get_settings

    started = time.perf_counter()
    load_before = os.getloadavg()
    name, load_s = load(folder, fresh)
    service = get_service()
    settings = get_settings()
    anchor = bm25_method(folder / "corpus.jsonl")
    embedder = CachedEmbedder(service.embedder, VECTORS)
    report = evaluate_store(
        service,
        name,
        beir.read_queries(folder / "queries.jsonl"),
        beir.read_qrels(qrels_file(folder)),
        extra=[anchor],
        embedder=embedder,
    )
    embedder.close()
    total_s = time.perf_counter() - started
    load_after = os.getloadavg()
    return "\n".join(
        [
            f"### {folder.name}",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}, with other work running "
            f"(load average {load_before[0]:.2f} before, {load_after[0]:.2f} after). Command: `{command}`. "
            f"Took {total_s:.0f} s, of which {load_s:.0f} s loading the store. Embeddings: the local "
            f"{service.embedder.model}; chunks of at most {settings.chunk_size:,} characters overlapping by "
            f"{settings.chunk_overlap}.",
            "",
            report.markdown(),
        ]
    )


def write_block(folder_name: str, block: str, kind: str = "eval", anchor: str = NOTES) -> None:
    """Replace the set's block of docs/quality.md (between its `kind` markers), or add it before `anchor`."""
    start, end = f"<!-- {kind}:{folder_name}:start -->", f"<!-- {kind}:{folder_name}:end -->"
    text = OUT.read_text() if OUT.exists() else f"# Retrieval quality\n\n{anchor}\n"
    marked = f"{start}\n{block}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + marked + rest.split(end, 1)[1]
    elif anchor in text:
        before, after = text.split(anchor, 1)
        text = f"{before}{marked}\n\n{anchor}{after}"
    else:
        text = f"{text.rstrip()}\n\n{marked}\n"
    OUT.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "dataset",
        nargs="*",
        type=Path,
        help="BEIR folders (corpus.jsonl, queries.jsonl, qrels/test.tsv); default ../shared/eval/msmarco-5k",
    )
    parser.add_argument("--all", action="store_true", help="every folder under ../shared/eval")
    parser.add_argument("--fresh", action="store_true", help="drop each set's store and load it again")
    parser.add_argument("--no-write", action="store_true", help="print the tables, leave docs alone")
    args = parser.parse_args()
    if args.all:
        folders = sorted(p for p in EVAL_DIR.parent.iterdir() if (p / "corpus.jsonl").exists())
        command = "make eval-all"
    else:
        folders = [p.resolve() for p in args.dataset] or [EVAL_DIR]
        command = f"make eval DATASET={' '.join(map(str, args.dataset))}" if args.dataset else "make eval"
    for folder in folders:
        block = evaluate(folder, args.fresh, command)
        print(block, flush=True)
        if not args.no_write:
            write_block(folder.name, block)
            print(f"\nwritten to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
