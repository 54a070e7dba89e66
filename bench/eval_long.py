"""Where the answer gets to inside long documents: `make eval-long`; writes docs/quality.md "Long documents".

Each set of ../shared/eval-long (documents/, queries.jsonl, judgments.jsonl) is loaded as a user loads
a folder, with `retrieval sync` into store `long-<set>-<strategy>-<size>` of the embedded PostgreSQL
under .data, created with that chunking as its own (`--strategy`, `--chunk-size`, `--chunk-overlap`;
every vector through the cache under .data/vectors), then every method of
`retrieval_core.evaluation.long_documents` runs over the judged questions: the same code as `retrieval
eval-long`. `--queries N` takes the first N questions of each set.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import REPO, machine
from bench.eval import OUT, VECTORS, write_block

if TYPE_CHECKING:
    from retrieval_core.documents.chunking import Chunking

LONG_DIR = REPO.parent / "shared" / "eval-long"
ANCHOR = "<!-- eval-long:notes -->"


def load(folder: Path, store: str, chunking: Chunking, fresh: bool) -> float:
    """Sync the set's documents/ into `store`, made with `chunking`, with the CLI's own command; the
    seconds it took."""
    from retrieval_core.cli.main import main
    from retrieval_core.container import get_document_service
    from retrieval_core.documents.models import StoreDefinition
    from retrieval_core.exceptions import StoreNotFoundError

    documents = get_document_service()
    if fresh:
        with contextlib.suppress(StoreNotFoundError):
            documents.delete_store(store)
    documents.put_store(store, StoreDefinition(chunking=chunking))
    started = time.perf_counter()
    code = main(["sync", str(folder / "documents"), "--store", store])
    if code not in (0, 1):  # 1: some files failed, which the report names
        raise SystemExit(f"retrieval sync of {folder.name} exited {code}")
    return time.perf_counter() - started


def stored_size(store: str) -> tuple[int, int, int]:
    """(documents, chunks, bytes of chunk text) of `store`."""
    from retrieval_core.container import get_service

    with get_service().database.connection() as conn:
        row = conn.execute(
            "SELECT count(DISTINCT c.document_id), count(*), coalesce(sum(octet_length(c.content)), 0) "
            "FROM chunks c JOIN stores s ON s.id = c.store_id WHERE s.name = %s",
            (store,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def evaluate(folder: Path, chunking: Chunking, limit: int | None, fresh: bool, command: str) -> str:
    """The Markdown block of one set."""
    from retrieval_core.container import get_service
    from retrieval_core.evaluation.long_documents import run_long_evaluation

    store = f"long-{folder.name}-{chunking.strategy}-{chunking.size}"
    started = time.perf_counter()
    load_before = os.getloadavg()
    load_s = load(folder, store, chunking, fresh)
    report = run_long_evaluation(get_service(), store, folder, limit=limit)
    documents, chunks, size = stored_size(store)
    total_s = time.perf_counter() - started
    return "\n".join(
        [
            f"### {folder.name}: {chunking.strategy} chunks of {chunking.size:,} characters",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()} (load average "
            f"{load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after). Command: `{command}`. Took "
            f"{total_s:.0f} s, of which {load_s:.0f} s syncing the folder. {report.questions:,} questions; "
            f"{documents} documents stored as {chunks:,} chunks ({size / 1e6:.2f} MB of text) of at most "
            f"{chunking.size:,} characters overlapping by {chunking.overlap}, strategy {chunking.strategy}, "
            f"embedded with the local {get_service().embedder.model}.",
            "",
            report.table,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "sets", nargs="*", type=Path, help="set folders; default every one of ../shared/eval-long"
    )
    parser.add_argument(
        "--strategy", default="fixed", choices=["fixed", "contextual"], help="chunking strategy"
    )
    parser.add_argument("--chunk-size", type=int, default=1000, help="characters per chunk at most")
    parser.add_argument("--chunk-overlap", type=int, help="characters repeated (default: 15%% of the size)")
    parser.add_argument("--queries", type=int, help="only the first N questions of each set")
    parser.add_argument("--fresh", action="store_true", help="drop each store and load it again")
    parser.add_argument("--no-write", action="store_true", help="print the tables, leave docs alone")
    args = parser.parse_args()
    from bench.vector_cache import CachedEmbedder
    from retrieval_core import container
    from retrieval_core.documents.chunking import Chunking
    from retrieval_core.settings import get_settings

    overlap = args.chunk_overlap if args.chunk_overlap is not None else args.chunk_size * 15 // 100
    chunking = Chunking(args.strategy, args.chunk_size, overlap)
    folders = [p.resolve() for p in args.sets] or sorted(
        p for p in LONG_DIR.iterdir() if (p / "judgments.jsonl").exists()
    )
    command = "make eval-long" + (f" ARGS='{' '.join(sys.argv[1:])}'" if len(sys.argv) > 1 else "")
    # Every vector of the sync and of the questions through the cache on disk: a re-run only searches.
    service = container.get_service()
    embedder = CachedEmbedder(service.embedder, VECTORS)
    container.replace_service(container.build_service(get_settings(), service.database, embedder))
    try:
        for folder in folders:
            block = evaluate(folder, chunking, args.queries, args.fresh, command)
            print(block, flush=True)
            if not args.no_write:
                key = f"{folder.name}:{chunking.strategy}:{chunking.size}"
                write_block(key, block, kind="eval-long", anchor=ANCHOR)
                print(f"\nwritten to {OUT.relative_to(REPO)}")
    finally:
        embedder.close()


if __name__ == "__main__":
    os.chdir(REPO)
    main()
