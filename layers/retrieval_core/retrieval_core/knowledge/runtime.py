"""The process-wide KnowledgeService, built on first use. It connects to nothing until a request needs it:
Gemini calls build the google-genai client, pgvector resolutions the database service."""

from __future__ import annotations

import threading

from ..db import repository
from ..db.errors import database_errors
from ..runtime import build_cache, get_service
from ..settings import get_settings
from .gemini_client import GeminiCaller
from .resolve import StoreEntry
from .service import KnowledgeService

_lock = threading.Lock()
_service: KnowledgeService | None = None


def _list_pgvector_stores() -> list[StoreEntry]:
    with database_errors("listing stores"), get_service().database.connection() as conn:
        return [StoreEntry(s.name, s.display_name) for s in repository.list_stores(conn)]


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
                    list_pgvector_stores=_list_pgvector_stores,
                    allowed_metadata_keys=settings.metadata_keys_allowed,
                )
    return _service


def reset_knowledge_service() -> None:
    """Forget the service (and its client and in-process cache); the next request builds a new one."""
    global _service
    with _lock:
        _service = None
