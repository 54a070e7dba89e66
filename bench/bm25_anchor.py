"""The BM25 anchor of every quality table: bm25s with its defaults, outside the service.

k1 1.5, b 0.75, the Lucene variant, English stopwords, no stemming; each document indexed as its
title and text; ranked at document level (only documents sharing a term with the query; BEIR's BM25
runs return no others).
"""

from __future__ import annotations

from pathlib import Path

from retrieval_core.evaluation.beir import read_corpus
from retrieval_core.evaluation.metrics import documents_of
from retrieval_core.evaluation.runner import DEPTH, Method, Query

NAME = "BM25 anchor (bm25s)"


def bm25_method(corpus: Path, depth: int = DEPTH) -> Method:
    """A method ranking the documents of `corpus` (BEIR corpus.jsonl) by bm25s's BM25."""
    import bm25s
    import numpy as np

    ids: list[str] = []
    texts: list[str] = []
    for doc_id, title, text in read_corpus(corpus):
        ids.append(doc_id)
        texts.append(f"{title} {text}" if title else text)
    tokenizer = bm25s.tokenization.Tokenizer(stopwords="en")
    retriever = bm25s.BM25()
    retriever.index(tokenizer.tokenize(texts, show_progress=True), show_progress=True)
    k = min(depth, len(ids))

    def rank(query: Query) -> list[str]:
        tokens = tokenizer.tokenize([query.text], update_vocab=False, show_progress=False)
        if not any(len(t) for t in tokens):
            return []
        found, scores = retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        keep = np.asarray(scores[0]) > 0
        return documents_of(ids[int(i)] for i in np.asarray(found[0])[keep])

    return Method(NAME, "bm25s: k1 1.5, b 0.75, lucene, English stopwords, title + text", rank)
