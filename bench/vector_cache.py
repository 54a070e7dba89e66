"""Embeddings kept on disk across runs, so that re-running an eval only searches.

One SQLite file per embedding model and runtime under `.data/vectors/`; a vector's key is the SHA-256
of its kind (query or document) and text. Vectors are stored as 4-byte floats, what pgvector keeps.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from array import array
from collections.abc import Sequence
from pathlib import Path

from retrieval_core.embeddings.base import Embedder, EmbeddingKind


def cache_path(root: Path, embedder: Embedder) -> Path:
    """The cache file of `embedder`: named by its model and, for the local model, its runtime."""
    runtime = str(getattr(embedder, "runtime", "") or "")
    name = "--".join(part for part in (embedder.model, runtime) if part)
    return root / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', name)}.sqlite"


def text_key(text: str, kind: EmbeddingKind) -> str:
    """The cache key of one text: its kind matters, as some models embed queries differently."""
    return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()


class CachedEmbedder:
    """Wraps an embedder: known texts come from disk, the others are embedded in one call and kept."""

    def __init__(self, inner: Embedder, root: Path) -> None:
        self.inner = inner
        self.path = cache_path(root, inner)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self.hits = 0
        self.misses = 0

    @property
    def model(self) -> str:
        """The wrapped embedder's model."""
        return self.inner.model

    @property
    def dimension(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dimension

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        """Vectors of `texts`, in order; only texts never embedded before reach the wrapped embedder."""
        keys = [text_key(t, kind) for t in texts]
        found: dict[str, list[float]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):  # SQLite's limit on parameters of one statement
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, blob in self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part
            ):
                found[key] = array("f", blob).tolist()
        missing = [i for i, key in enumerate(keys) if key not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = self.inner.embed([texts[i] for i in missing], kind)
            rows = []
            for i, vector in zip(missing, vectors, strict=True):
                found[keys[i]] = list(vector)
                rows.append((keys[i], array("f", vector).tobytes()))
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
        return [found[key] for key in keys]

    def close(self) -> None:
        """Close the cache file."""
        self._db.close()
