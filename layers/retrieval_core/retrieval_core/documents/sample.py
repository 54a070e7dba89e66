"""The small bundled corpus that `make serve` loads into store `sample`."""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.exceptions import StoreNotFoundError
from retrieval_core.settings import get_settings

logger = logging.getLogger(__name__)

SAMPLE_STORE = "sample"


def sample_corpus_path() -> Path:
    """Path of the bundled `sample_corpus.jsonl`."""
    return Path(str(resources.files("retrieval_core.documents") / "sample_corpus.jsonl"))


def load_sample_corpus(service: RetrievalService) -> int:
    """Load the sample corpus into store `sample` if that store holds no chunks; return chunks written."""
    from retrieval_core.documents.models import SourceInput, StoreDefinition
    from retrieval_core.documents.service import DocumentService

    settings = get_settings()
    documents = DocumentService(service, settings.chunk_size, settings.chunk_overlap)
    try:
        if documents.get_store(SAMPLE_STORE).chunk_count:
            return 0
    except StoreNotFoundError:
        pass
    logger.info("loading the sample corpus into store %r", SAMPLE_STORE)
    path = sample_corpus_path()
    # A BEIR-style JSONL: each record's `_id` is its document id, as with `retrieval ingest`.
    source = SourceInput(path.name, path.read_bytes(), name=path.name)
    written = documents.write_source(
        SAMPLE_STORE, source, create=StoreDefinition(display_name="Sample corpus")
    )
    return written.chunk_count
