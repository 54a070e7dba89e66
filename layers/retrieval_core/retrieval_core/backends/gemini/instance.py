"""The process-wide KnowledgeService, built on first use. It connects to nothing until a request needs it:
Gemini calls build the google-genai client, pgvector resolutions the database service."""

from __future__ import annotations

import threading

from retrieval_core.backends.gemini.gemini_client import GeminiCaller
from retrieval_core.backends.gemini.resolve import StoreEntry
from retrieval_core.backends.gemini.service import KnowledgeService
from retrieval_core.container import build_cache, get_service
from retrieval_core.db.errors import database_errors
from retrieval_core.db.stores import find_store
from retrieval_core.settings import get_settings

_lock = threading.Lock()
_service: KnowledgeService | None = None


def _find_pgvector_store(name: str) -> list[StoreEntry]:
    # The one rule of every path (name, then display name): resolve answers what retrieve would search.
    with database_errors("looking up the store"), get_service().database.connection() as conn:
        store = find_store(conn, name)
    return [StoreEntry(store.name, store.display_name)] if store else []


def get_knowledge_service() -> KnowledgeService:
    """The process-wide KnowledgeService (never built at import)."""
    global _service
    if _service is None:
        with _lock:
            if _service is None:
                settings = get_settings()
                _service = KnowledgeService(
                    GeminiCaller.from_settings(settings),
                    build_cache(settings),
                    default_model=settings.gemini_model,
                    page_size=settings.gemini_store_page_size,
                    find_pgvector_store=_find_pgvector_store,
                    allowed_metadata_keys=settings.metadata_keys_allowed,
                )
    return _service


def reset_knowledge_service() -> None:
    """Forget the service (and its client and in-process cache); the next request builds a new one."""
    global _service
    with _lock:
        _service = None
