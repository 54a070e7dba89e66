"""The data of bench/tenants.py: the dev corpora, their cached vectors, a constant-time embedder, and the
documents of the measured and filler stores.

Vectors come from bench/eval.py's cache (`.data/vectors`, bench/vector_cache.py): every chunk of the three
dev sets and every query, looked up once (a text never embedded before is embedded then, once, and kept)
and saved beside the database as one numpy file. Writes then embed with `TableEmbedder`, a dictionary
lookup: no model call per write.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import REPO
from tests.writing import TextDocument

EVAL = REPO.parent / "shared" / "eval"
SETS = ("msmarco-5k", "scifact", "nfcorpus")  # the three dev sets of bench/keyword_scale.py
CHUNK_SIZE, CHUNK_OVERLAP = 1000, 150  # the service's defaults (Settings)
# The metadata key of every document: about 1% of a store's documents hold "b01", 10% "b10".
BUCKET = "bucket"
FILTERS: dict[str, dict[str, Any] | None] = {
    "dense": None,
    "filtered 1%": {BUCKET: "b01"},
    "filtered 10%": {BUCKET: "b10"},
}
NOISE = 0.02  # sd of the noise on a derived vector, as bench/keyword_scale.py adds to its repeats
WORD_DROP = 0.15  # share of words a repeat of a chunk drops (bench/keyword_scale.py)


def bucket_of(n: int) -> str:
    """The bucket of a store's n-th document (from 0): "b01" for 1 in 100, "b10" for 10, else "rest"."""
    slot = n % 100
    if slot == 0:
        return "b01"
    return "b10" if slot <= 10 else "rest"


def filler_size(index: int) -> int:
    """How many documents filler store `index` holds: 1 to 5, spread evenly, stable across runs."""
    return 1 + stable_int(f"filler-size:{index}") % 5


def stable_int(text: str) -> int:
    """A number from `text` that is the same in every process (unlike hash())."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass(frozen=True, slots=True)
class Record:
    """A document of a dev set."""

    set: str
    id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class BaseChunk:
    """A chunk of a dev-set document as the writer cuts it, and the row of its vector."""

    record: Record
    title: str
    index: int
    text: str
    row: int


def read_records() -> dict[str, list[Record]]:
    """The documents of each dev set, in corpus order."""
    from retrieval_core.evaluation.beir import read_corpus

    return {
        name: [Record(name, i, title, text) for i, title, text in read_corpus(EVAL / name / "corpus.jsonl")]
        for name in SETS
    }


def read_query_texts() -> dict[str, list[str]]:
    """The queries of each dev set."""
    from retrieval_core.evaluation.beir import read_queries

    return {name: list(read_queries(EVAL / name / "queries.jsonl").values()) for name in SETS}


def prepared_texts(document: TextDocument) -> list[str]:
    """What the writer embeds for `document` (its prepare step, which is pure)."""
    from retrieval_core.documents.prepare import prepare_source

    prepared = prepare_source(document.source(), CHUNK_SIZE, CHUNK_OVERLAP, "-")
    return [text for doc in prepared.documents for text in doc.embedding_texts()]


def record_document(record: Record, doc_id: str, n: int) -> TextDocument:
    """`record` as a document of a store, the n-th of that store (which sets its bucket)."""
    return TextDocument(doc_id, record.text, record.title, {BUCKET: bucket_of(n)})


class VectorTable:
    """Vectors by cache key (bench/vector_cache.py's `text_key`), in one float32 array."""

    def __init__(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        self.rows = {key: row for row, key in enumerate(keys)}
        self.keys = list(keys)
        self.vectors = vectors

    def row(self, text: str, kind: str) -> int | None:
        from bench.vector_cache import text_key

        return self.rows.get(text_key(text, kind))  # type: ignore[arg-type]

    def save(self, path: Path) -> None:
        np.savez(path, keys=np.array(self.keys), vectors=self.vectors)

    @classmethod
    def load(cls, path: Path) -> VectorTable:
        data = np.load(path)
        return cls([str(k) for k in data["keys"]], data["vectors"])


def build_vectors(
    records: dict[str, list[Record]], queries: dict[str, list[str]], cache_dir: Path
) -> VectorTable:
    """Every chunk's and query's vector, through bench/eval.py's cache (misses embedded once, kept)."""
    from bench.vector_cache import CachedEmbedder, text_key
    from retrieval_core.embeddings import get_embedder

    wanted: dict[str, tuple[str, str]] = {}
    for record in (r for rs in records.values() for r in rs):
        for text in prepared_texts(record_document(record, record.id, 1)):
            wanted.setdefault(text_key(text, "document"), (text, "document"))
    for text in (q for qs in queries.values() for q in qs):
        wanted.setdefault(text_key(text, "query"), (text, "query"))
    cached = CachedEmbedder(get_embedder(), cache_dir)
    keys = list(wanted)
    parts = []
    for kind in ("document", "query"):
        chosen = [k for k in keys if wanted[k][1] == kind]
        texts = [wanted[k][0] for k in chosen]
        for start in range(0, len(texts), 2000):
            parts.append((chosen[start : start + 2000], cached.embed(texts[start : start + 2000], kind)))
    print(f"vectors: {cached.hits:,} from the cache, {cached.misses:,} embedded by the model", flush=True)
    cached.close()
    ordered = [k for chunk_keys, _ in parts for k in chunk_keys]
    vectors = np.asarray([v for _, vs in parts for v in vs], dtype=np.float32)
    return VectorTable(ordered, vectors)


class TableEmbedder:
    """A constant-time embedder: a text's cached vector, else a vector derived from a parent's.

    A text registered with `derive` gets its parent row's vector plus Gaussian noise (sd NOISE) seeded by
    the text; any other unknown text gets a row picked by its hash, plus the same noise. Never calls a model.
    """

    def __init__(self, model: str, table: VectorTable) -> None:
        self.model = model
        self.dimension = int(table.vectors.shape[1])
        self.table = table
        self.parents: dict[str, int] = {}

    def derive(self, text: str, row: int) -> None:
        """Embed `text` as a variant of the vector in `row`."""
        self.parents[text] = row

    def forget(self) -> None:
        """Drop the registered variants."""
        self.parents.clear()

    def embed(self, texts: Sequence[str], kind: Any) -> list[list[float]]:
        out = []
        for text in texts:
            row = self.table.row(text, kind)
            if row is not None:
                out.append(self.table.vectors[row].tolist())
                continue
            seed = stable_int(text)
            parent = self.parents.get(text, seed % len(self.table.keys))
            noise = np.random.default_rng(seed).normal(0, NOISE, self.dimension)
            out.append((self.table.vectors[parent] + noise).astype(np.float32).tolist())
        return out


def base_chunks(records: dict[str, list[Record]], table: VectorTable) -> list[BaseChunk]:
    """Every chunk of the three sets as the writer cuts them (its own prepare step), with its vector's row."""
    from retrieval_core.documents.prepare import prepare_source

    chunks = []
    for record in (r for name in SETS for r in records[name]):
        source = record_document(record, record.id, 1).source()
        for doc in prepare_source(source, CHUNK_SIZE, CHUNK_OVERLAP, "-").documents:
            for index, (chunk, embedded) in enumerate(zip(doc.chunks, doc.embedding_texts(), strict=True)):
                row = table.row(embedded, "document")
                if row is not None:
                    chunks.append(BaseChunk(record, doc.title, index, chunk.text, row))
    return chunks


def large_documents(chunks: list[BaseChunk], rows: int) -> Iterator[tuple[TextDocument, int]]:
    """`rows` one-chunk documents and their parent vector's row: the sets' chunks, then repeats of them.

    Repeat r > 0 drops each word with probability WORD_DROP (seeded by r) and its vector gets noise, as
    bench/keyword_scale.py makes its 200,000 chunks; each chunk is its own document, holding its title.
    """
    n = 0
    repeat = 0
    while n < rows:
        words = random.Random(repeat)
        for chunk in chunks:
            if n >= rows:
                return
            text = chunk.text
            if repeat:
                text = " ".join(w for w in text.split() if words.random() >= WORD_DROP) or text
            doc_id = f"{chunk.record.set}/{chunk.record.id}#{chunk.index}~{repeat}"
            yield TextDocument(doc_id, text, chunk.title, {BUCKET: bucket_of(n)}), chunk.row
            n += 1
        repeat += 1


def medium_documents(records: list[Record], chunks: int) -> list[TextDocument]:
    """The set's documents in corpus order until they hold `chunks` chunks (0: all of them)."""
    documents: list[TextDocument] = []
    total = 0
    for record in records:
        if chunks and total >= chunks:
            break
        documents.append(record_document(record, record.id, len(documents)))
        total += len(prepared_texts(documents[-1]))
    return documents


def filler_documents(index: int, first: int, pool: Sequence[Record]) -> list[TextDocument]:
    """Filler store `index`'s documents, drawn from `pool` (stable); `first`: the fillers' running count
    of documents before this store, so that the buckets make 1% and 10% of all filler documents."""
    picked = random.Random(index).sample(range(len(pool)), filler_size(index))
    return [record_document(pool[p], f"{pool[p].set}/{pool[p].id}", first + k) for k, p in enumerate(picked)]


def filler_offsets(start: int, stop: int) -> Iterator[tuple[int, int]]:
    """(index, documents of the fillers before it) for fillers start..stop-1 (fillers count from 1)."""
    first = sum(filler_size(i) for i in range(1, start))
    for index in range(start, stop):
        yield index, first
        first += filler_size(index)


@dataclass
class Queries:
    """The texts and precomputed vectors of a measured store's queries."""

    texts: list[str]
    vectors: np.ndarray

    @classmethod
    def of(cls, texts: list[str], table: VectorTable) -> Queries:
        found = [(t, row) for t in texts if (row := table.row(t, "query")) is not None]
        return cls([t for t, _ in found], table.vectors[[row for _, row in found]])


def mixed_queries(queries: dict[str, list[str]], count: int) -> list[str]:
    """`count` queries drawn from all three sets (seeded), as bench/keyword_scale.py draws them."""
    texts = [text for name in SETS for text in queries[name]]
    return random.Random(18).sample(texts, min(count, len(texts)))
