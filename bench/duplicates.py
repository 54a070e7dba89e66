"""What collapsing exact duplicates costs a retrieve: `python -m bench.duplicates [--top-k 10] [--passes 4]`.

Loads msmarco-5k's passages (../shared/eval/msmarco-5k) as single text documents into store
`bench-duplicates` of the embedded PostgreSQL under .data (kept: a re-run reuses it), then gives the
nearest passage of each of the first half of the queries `--copies` copies under other ids, so that
those queries' first results are duplicates and the other half's are not. Times
`RetrievalService.retrieve` (naive engine, `similarityTopK` = `--top-k`, no cache, query vectors
computed beforehand) for dense and hybrid search, with `collapseDuplicates` true and false, the four
interleaved query by query; the first pass warms the pages and is not counted. Prints the median per
method for each half and how many distinct passages the answers held, then the time of the lookup a
write makes for every document's hash at once.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench.common import EVAL_DIR, load_queries, machine, median

STORE = "bench-duplicates"
METHODS: dict[str, dict[str, Any]] = {
    "dense, collapsed": {},
    "dense, every copy": {"collapseDuplicates": False},
    "hybrid, collapsed": {"useHybrid": True},
    "hybrid, every copy": {"useHybrid": True, "collapseDuplicates": False},
}


def load(documents: Any) -> None:
    """The corpus as one text document per passage, unless the store holds it already."""
    from retrieval_core.documents.models import SourceInput, StoreDefinition
    from retrieval_core.exceptions import StoreNotFoundError

    try:
        documents.get_store(STORE)
        return
    except StoreNotFoundError:
        pass
    with (EVAL_DIR / "corpus.jsonl").open() as lines:
        passages = [json.loads(line) for line in lines]
    sources = (
        SourceInput(str(p["_id"]), f"{p.get('title', '')}\n\n{p['text']}".strip().encode(), "text/plain")
        for p in passages
    )
    for result in documents.write_sources(STORE, sources, create=StoreDefinition()):
        if not hasattr(result, "source_id"):
            raise SystemExit(f"could not load the corpus: {result}")


def set_copies(documents: Any, first: list[str], copies: int) -> None:
    """Exactly `copies` copies of each passage of `first` under `copy-<n>/<id>`, and no other copy."""
    from retrieval_core.documents.models import SourceInput

    page, _ = documents.list_documents(STORE, prefix="copy-", limit=1000)
    wanted = {f"copy-{n}/{d}" for d in first for n in range(copies)}
    for info in page:
        if info.id not in wanted:
            documents.delete_source(STORE, info.id)
    present = {info.id for info in page}
    for document_id in sorted(set(first)):
        for n in range(copies):
            if f"copy-{n}/{document_id}" not in present:
                data = _stored_text(document_id)
                documents.write_source(STORE, SourceInput(f"copy-{n}/{document_id}", data, "text/plain"))


def _stored_text(document_id: str) -> bytes:
    """The bytes the passage was written from (the corpus line, as `load` wrote it)."""
    with (EVAL_DIR / "corpus.jsonl").open() as lines:
        for line in lines:
            passage = json.loads(line)
            if str(passage["_id"]) == document_id:
                return f"{passage.get('title', '')}\n\n{passage['text']}".strip().encode()
    raise KeyError(document_id)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args()

    from retrieval_core.container import get_document_service, get_service
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest

    service, documents = get_service(), get_document_service()
    load(documents)
    queries = list(load_queries().values())
    vectors = dict(zip(queries, service.embedder.embed(queries, "query"), strict=True))

    def retrieve(query: str, options: dict[str, Any]) -> list[str]:
        body = {"query": query, "grade": 0.0, "store": STORE, "engineName": "naive", "cacheTTLms": 0}
        request = RetrieveRequest.model_validate({**body, "similarityTopK": args.top_k, **options})
        answer, _ = service.retrieve(request, lambda q: vectors[q], grant=OPEN_GRANT)
        return [r.metadata["documentId"] for r in answer.results]

    half = len(queries) // 2
    nearest = [retrieve(q, {"collapseDuplicates": False})[0].split("/", 1)[-1] for q in queries[:half]]
    set_copies(documents, nearest, args.copies)
    groups = {"with copies": queries[:half], "without": queries[half:]}

    samples: dict[tuple[str, str], list[float]] = {(g, m): [] for g in groups for m in METHODS}
    distinct: dict[tuple[str, str], list[float]] = {(g, m): [] for g in groups for m in METHODS}
    for number in range(args.passes):
        for group, members in groups.items():
            for query in members:
                for method, options in METHODS.items():
                    start = time.perf_counter()
                    ids = retrieve(query, options)
                    elapsed = (time.perf_counter() - start) * 1000
                    if number:
                        samples[(group, method)].append(elapsed)
                        distinct[(group, method)].append(len({i.split("/")[-1] for i in ids}))
    print(f"{machine()}; {len(queries)} queries x {args.passes - 1} passes, similarityTopK {args.top_k};")
    print(f"the nearest passage of each of the first {half} queries stored {args.copies + 1} times")
    for group, method in samples:
        print(
            f"{group:12} {method:20} p50 {median(samples[(group, method)]):6.2f} ms;"
            f" distinct passages per answer (median) {median(distinct[(group, method)]):.0f}"
        )
    print(f"write-time lookup of every document's hash at once: {lookup_ms(service):.1f} ms")


def lookup_ms(service: Any) -> float:
    """Milliseconds of the duplicate lookup a write makes (db/documents.py), for all of the store's hashes."""
    from retrieval_core.db.documents import same_content_ids
    from retrieval_core.db.stores import find_store_named

    with service.database.connection() as conn:
        store = find_store_named(conn, STORE)
        assert store is not None
        hashes = [
            r[0]
            for r in conn.execute("SELECT content_sha256 FROM documents WHERE store_id = %s", (store.id,))
        ]
        start = time.perf_counter()
        same_content_ids(conn, store, hashes, 11)
        elapsed = (time.perf_counter() - start) * 1000
    print(f"({len(hashes)} hashes)")
    return elapsed


if __name__ == "__main__":
    main()
