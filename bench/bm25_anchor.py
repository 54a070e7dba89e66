"""The BM25 anchor of every quality table: bm25s with its defaults, outside the service.

k1 1.5, b 0.75, the Lucene variant, English stopwords, no stemming; each document indexed as its
title and text; ranked at document level (only documents sharing a term with the query; BEIR's BM25
runs return no others).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from retrieval_core.evaluation.beir import read_corpus
from retrieval_core.evaluation.ranking_metrics import documents_of
from retrieval_core.evaluation.runner import DEPTH, Method, Query

NAME = "BM25 anchor (bm25s)"


def bm25_method(corpus: Path, depth: int = DEPTH) -> Method:
    """A method ranking the documents of `corpus` (BEIR corpus.jsonl) by bm25s's BM25."""
    texts = [(doc_id, f"{title} {text}" if title else text) for doc_id, title, text in read_corpus(corpus)]
    how = "bm25s: k1 1.5, b 0.75, lucene, English stopwords, title + text"
    return Method(NAME, how, _bm25s_ranker(texts, depth, progress=True))


def chunk_bm25_method(chunks: list[tuple[str, str]], depth: int = DEPTH) -> Method:
    """bm25s as the anchor, but over (document id, chunk text) pairs, a document ranked by its best chunk.

    Given the chunks a store holds, this is the anchor at the service's granularity: what is left between
    it and the service's keyword search is tokenisation and stemming (PostgreSQL's text search) and k1.
    """
    name = "BM25 anchor over the store's chunks (bm25s)"
    return Method(name, "bm25s as the anchor, chunk level", _bm25s_ranker(chunks, depth, progress=False))


def _bm25s_ranker(texts: list[tuple[str, str]], depth: int, progress: bool) -> Callable[[Query], list[str]]:
    """Documents by the bm25s score of their best text among (document id, text) pairs."""
    import bm25s
    import numpy as np

    tokenizer = bm25s.tokenization.Tokenizer(stopwords="en")
    retriever = bm25s.BM25()
    retriever.index(tokenizer.tokenize([t for _, t in texts], show_progress=progress), show_progress=progress)
    k = min(depth, len(texts))

    def rank(query: Query) -> list[str]:
        tokens = tokenizer.tokenize([query.text], update_vocab=False, show_progress=False)
        if not any(len(t) for t in tokens):
            return []
        found, scores = retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        keep = np.asarray(scores[0]) > 0
        return documents_of(texts[int(i)][0] for i in np.asarray(found[0])[keep])

    return rank


def main() -> None:
    """nDCG@10 of the anchor at document level and at chunk level, beside the service's keyword search.

    `python -m bench.bm25_anchor [SET ...]` on the stores `make eval-all` loaded (`eval-<set>`).
    """
    import sys

    from bench.common import REPO
    from bench.eval import VECTORS, qrels_file, store_name
    from bench.vector_cache import CachedEmbedder
    from retrieval_core.container import get_service
    from retrieval_core.evaluation import beir
    from retrieval_core.evaluation.runner import (
        DEFAULT_METHODS,
        embed_queries,
        evaluate,
        judged_queries,
        service_method,
    )

    sets = REPO.parent / "shared" / "eval"
    service = get_service()
    embedder = CachedEmbedder(service.embedder, VECTORS)
    keyword_only = next(spec for spec in DEFAULT_METHODS if spec.name == "keyword only")
    for name in sys.argv[1:] or sorted(p.name for p in sets.iterdir() if p.is_dir()):
        folder = sets / name
        store = store_name(folder)
        with service.database.connection() as conn:
            chunks = [
                (str(doc), str(text))
                for doc, text in conn.execute(
                    "SELECT c.document_id, c.content FROM chunks c JOIN stores s ON s.id = c.store_id"
                    " WHERE s.name = %s ORDER BY c.document_id, c.chunk_index",
                    (store,),
                )
            ]
        queries = beir.read_queries(folder / "queries.jsonl")
        qrels = beir.read_qrels(qrels_file(folder))
        ids, _ = judged_queries(queries, qrels)
        # Real query vectors: grade 0 still drops chunks of negative similarity, keyword-only too.
        judged = embed_queries(embedder, queries, ids, progress=False)
        methods = [
            bm25_method(folder / "corpus.jsonl"),
            chunk_bm25_method(chunks),
            service_method(service, store, keyword_only),
        ]
        results = evaluate(methods, judged, qrels, progress=False)
        cells = ", ".join(f"{r.method.name} {r.mean_ndcg:.3f}" for r in results)
        print(f"{name} ({len(chunks):,} chunks of {len({d for d, _ in chunks}):,} documents): {cells}")
    embedder.close()


if __name__ == "__main__":
    main()
