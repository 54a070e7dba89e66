"""The small bundled corpus that `make serve` loads into store `sample`."""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path

from .db import repository
from .ingest import ensure_store, ingest_documents, read_documents
from .service import RetrievalService
from .settings import get_settings

logger = logging.getLogger(__name__)

SAMPLE_STORE = "sample"


def sample_corpus_path() -> Path:
    """Path of the bundled `sample_corpus.jsonl`."""
    return Path(str(resources.files("retrieval_core") / "sample_corpus.jsonl"))


def load_sample_corpus(service: RetrievalService) -> int:
    """Load the sample corpus into store `sample` if that store holds no chunks; return chunks written."""
    settings = get_settings()
    store = ensure_store(service.database, service.embedder, SAMPLE_STORE, "Sample corpus")
    with service.database.connection() as conn:
        if repository.count_chunks(conn, store):
            return 0
    logger.info("loading the sample corpus into store %r", SAMPLE_STORE)
    report = ingest_documents(
        service.database,
        service.embedder,
        store,
        read_documents(sample_corpus_path()),
        settings.chunk_size,
        settings.chunk_overlap,
        on_version=service.publish_store_version,
    )
    return report.chunks_written
