"""A store of 120 distinct chunks of about 4,000 characters each: deep answers (100 results) that are
large (about 0.4 MB plain, 1.3 MB with returnFormatted), for the result limits and reply-size bounds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.opening_embedder import OpeningEmbedder

WIDE_STORE = "wide-100"
WIDE_CHUNKS = 120
CHUNK_CHARS = 4_000
VOCABULARY = [
    f"{a}{b}"
    for a in ("river", "stone", "cloud", "ember", "frost", "grove", "harbor", "meadow")
    for b in ("light", "path", "song", "field", "gate", "watch", "fall", "crest")
]


def wide_text(index: int) -> str:
    """A text of its own words (no two are near-duplicates), CHUNK_CHARS long."""
    rng = random.Random(index)
    words = [f"Note {index} about lakes and rivers."]
    while sum(len(w) + 1 for w in words) < CHUNK_CHARS:
        words.append(rng.choice(VOCABULARY))
    return " ".join(words)[:CHUNK_CHARS]


@pytest.fixture(scope="session")
def wide_store(service: Any) -> str:
    """WIDE_STORE, written once per session: one chunk per document, embedded from its opening words
    (OpeningEmbedder: the tests using it count and measure results; none asserts which ranks first)."""
    from tests.writing import TextDocument, ensure_store, write_documents

    embedder = OpeningEmbedder(service.embedder)
    store = ensure_store(service, WIDE_STORE, embedder)
    documents = [
        TextDocument(id=f"wide-{i:03}", text=wide_text(i), title=f"Wide note {i}") for i in range(WIDE_CHUNKS)
    ]
    write_documents(service, store, documents, CHUNK_CHARS + 100, 0, embedder)
    return WIDE_STORE
