"""The service container: the process-wide services, each built once on first use (never at import).

The pgvector RetrievalService (database connections, migrations, embedder), the Gemini
KnowledgeService, the write side, and `get_backends()`: the one retrieve entry point over both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrieval_core.backends.pgvector.reranking import Rerankers
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.cache.backends import DynamoDBBackend, MemoryBackend
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.cache.search_cache import SearchCache
from retrieval_core.clients.aws import fail_open_options, lazy_aws_client
from retrieval_core.db.connection import Database, PooledConnections, SingleConnection
from retrieval_core.db.errors import database_errors
from retrieval_core.db.migrations.steps import SCHEMA_VERSION
from retrieval_core.db.schema import schema_version
from retrieval_core.embeddings import get_embedder
from retrieval_core.embeddings.base import Embedder
from retrieval_core.exceptions import ConfigurationError, SchemaNotReadyError
from retrieval_core.search.concurrency import ExpensiveSlots
from retrieval_core.settings import Settings, get_settings, in_lambda

if TYPE_CHECKING:
    from retrieval_core.backends.answers import Answerer
    from retrieval_core.backends.gemini.resolve import StoreEntry
    from retrieval_core.backends.gemini.service import KnowledgeService
    from retrieval_core.backends.router import Backends
    from retrieval_core.documents.service import DocumentService
    from retrieval_core.generation.base import Generator
    from retrieval_core.parsers.budget import ParseBudget

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_service: RetrievalService | None = None
# Kept apart from the service: with the schema behind, the service is not built but the connections are.
_database: Database | None = None
# The schema was found behind on these connections; once migrated, they are replaced (see below).
_schema_was_behind = False
_embedded_server: Any = None
_knowledge: KnowledgeService | None = None
_knowledge_lock = threading.Lock()
_generator: Generator | None = None
_generator_lock = threading.Lock()
# The documents' parse slots, one set per process (DocumentService itself is built per call).
_parse_slots: ExpensiveSlots | None = None


def database_conninfo(settings: Settings) -> str:
    """DATABASE_URL; else DATABASE_HOST with a secret or IAM token; else the embedded server (started now)."""
    global _embedded_server
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    if settings.database_host:
        from retrieval_core.db.credentials import aws_conninfo

        return aws_conninfo(settings)
    if in_lambda():
        raise ConfigurationError(
            "neither DATABASE_URL nor DATABASE_HOST is set; "
            "a Lambda function cannot start an embedded database"
        )
    from retrieval_core.db.embedded import start_embedded_postgres

    if _embedded_server is None:
        _embedded_server = start_embedded_postgres(
            settings.data_dir, shared_buffers_mb=settings.embedded_shared_buffers_mb
        )
    return str(_embedded_server.get_uri())


def build_database(settings: Settings, conninfo: str) -> Database:
    """One reused connection in Lambda; a pool everywhere else."""
    if in_lambda():
        return SingleConnection(conninfo, settings.db_connect_timeout_s, settings.db_statement_timeout_ms)
    return PooledConnections(
        conninfo,
        settings.db_pool_min_size,
        settings.db_pool_max_size,
        settings.db_connect_timeout_s,
        settings.db_statement_timeout_ms,
        pool_wait_s=settings.db_pool_wait_ms / 1000,
    )


def build_cache(settings: Settings) -> SearchCache:
    """DynamoDB when CACHE_TABLE_NAME is set (shared by every instance); an in-process LRU otherwise."""
    if settings.cache_table_name:
        # Fail-open: a slow cache must cost little, since it fails open; after a
        # failure the backend pauses (cache/backends.py).
        dynamodb_client = lazy_aws_client("dynamodb", fail_open_options(settings.dynamodb_endpoint_url))
        table = DynamoDBBackend(settings.cache_table_name, dynamodb_client)
        return SearchCache(
            JsonCache(table, "search"),
            JsonCache(table, "store"),
            shared=True,
            default_ttl_s=settings.cache_ttl_s,
        )
    return SearchCache(
        JsonCache(MemoryBackend(settings.search_cache_size), "search"),
        JsonCache(MemoryBackend(settings.store_cache_size), "store"),
        shared=False,
        default_ttl_s=settings.cache_ttl_s,
    )


def get_database() -> Database:
    """The process-wide connections, built on first use; with AUTO_MIGRATE, the schema is migrated first."""
    with _lock:
        return _database_locked()


def get_service() -> RetrievalService:
    """The process-wide RetrievalService, built on first use (never at import).

    With AUTO_MIGRATE off, it is built only once the schema is at SCHEMA_VERSION or newer: until then
    each call raises SchemaNotReadyError after one cheap query on the kept connections, so a deploy
    that migrates a minute later heals without a restart.
    """
    global _service
    if _service is None:
        with _lock:
            if _service is None:
                settings = get_settings()
                database = _database_locked()
                if not settings.auto_migrate:
                    database = _schema_ready_locked(database)
                _service = build_service(settings, database, get_embedder())
    return _service


def build_service(settings: Settings, database: Database, embedder: Embedder) -> RetrievalService:
    """A RetrievalService on `database` with `embedder`, configured from `settings`."""
    return RetrievalService(
        database,
        embedder,
        default_store=settings.default_store,
        ef_search=settings.hnsw_ef_search,
        cache=build_cache(settings),
        rerankers=build_rerankers(settings),
        allowed_metadata_keys=settings.metadata_keys_allowed,
        iterative_scan=settings.hnsw_iterative_scan,
        max_scan_tuples=settings.hnsw_max_scan_tuples,
        exact_search_max_rows=settings.exact_search_max_rows,
        attached_inspection_ttl_s=settings.attached_inspection_ttl_s,
        search_statement_timeout_ms=settings.search_statement_timeout_ms,
        expensive_statement_timeout_ms=settings.expensive_search_statement_timeout_ms,
        expensive_slots=ExpensiveSlots(
            settings.expensive_search_concurrency, settings.db_pool_wait_ms / 1000
        ),
    )


def _database_locked() -> Database:
    # Called with _lock held.
    global _database, _schema_was_behind
    if _database is None:
        settings = get_settings()
        conninfo = database_conninfo(settings)
        if settings.auto_migrate:
            # Only a process that migrates loads the runner: in Lambda, the migrate function does it.
            from retrieval_core.db.migrations.roles import RoleSetup
            from retrieval_core.db.migrations.runner import migrate, run_keyword_backfill

            with database_errors("migrating the schema"):
                migrate(conninfo, settings.db_connect_timeout_s, roles=RoleSetup.from_settings(settings))
            # Locally, chunks older than migration 7 are indexed for keyword search at once.
            with database_errors("indexing older chunks for keyword search"):
                run_keyword_backfill(conninfo, settings.db_connect_timeout_s)
        _database = build_database(settings, conninfo)
        _schema_was_behind = False
    return _database


def _schema_ready_locked(database: Database) -> Database:
    # Called with _lock held. SchemaNotReadyError while the schema is behind this code.
    global _database, _schema_was_behind
    with database_errors("checking the schema version"), database.connection() as conn:
        found = schema_version(conn)
    if found is None or found < SCHEMA_VERSION:
        _schema_was_behind = True
        raise SchemaNotReadyError(found, SCHEMA_VERSION)
    if _schema_was_behind:
        # Connections opened before the migration created the `vector` type have no adapter for it.
        database.close()
        _database = None
        database = _database_locked()
    return database


def get_document_service() -> DocumentService:
    """The write side over the process-wide RetrievalService (cheap: built per call; the parse slots it
    holds are the process's)."""
    global _parse_slots
    from retrieval_core.documents.service import DocumentService, parse_slots_of
    from retrieval_core.ocr import ocr_engine

    settings = get_settings()
    with _lock:
        if _parse_slots is None:
            _parse_slots = parse_slots_of(settings.parse_concurrency, settings.db_pool_wait_ms / 1000)
    return DocumentService(
        get_service(),
        settings.chunk_size,
        settings.chunk_overlap,
        parse_budget(settings),
        _parse_slots,
        settings.document_max_records,
        ocr_engine(settings.ocr_engine, settings.ocr_max_pages),
    )


def parse_budget(settings: Settings) -> ParseBudget:
    """What reading one document may cost, from the DOCUMENT_MAX_* settings and PARSE_TIMEOUT_S."""
    from retrieval_core.parsers.budget import BUDGET_FIELDS, ParseBudget

    # Each field is read from the setting its refusals name (ParseBudget.setting), so the two cannot drift.
    values = {name: getattr(settings, ParseBudget.setting(name).lower()) for name in BUDGET_FIELDS}
    return ParseBudget(**values)


def build_rerankers(settings: Settings) -> Rerankers:
    """The rerankers of `settings`; no client is created (or imported) until a request reranks."""

    def get(strategy: str) -> Any:
        from retrieval_core.rerank import get_reranker

        return get_reranker(strategy, settings)  # type: ignore[arg-type]

    identity = "|".join(
        str(part)
        for part in (
            settings.reranker_service_url,
            settings.reranker_api,
            settings.reranker_model,
            settings.rerank_llm_model,
            settings.bedrock_rerank_model,
        )
    )
    return Rerankers(get, "bge" if settings.reranker_service_url else None, identity)


def replace_service(service: RetrievalService | None) -> RetrievalService | None:
    """Install `service` as the process-wide one (None: build anew on next use); return the previous.

    The previous service's connections are left open (a test sets the shared service aside this way).
    """
    global _service, _database
    with _lock:
        previous, _service = _service, service
        if _database is not None and (previous is None or previous.database is not _database):
            _database.close()  # connections of a service never built: nobody else holds them
        _database = service.database if service is not None else None
    return previous


def reset_service() -> None:
    """Close connections and forget the service (and the parse slots); the next request builds new ones."""
    global _service, _database, _parse_slots
    with _lock:
        _parse_slots = None
        if _service is not None:
            _service.database.close()
        if _database is not None and (_service is None or _service.database is not _database):
            _database.close()
        _service = None
        _database = None


def current_embedder() -> Embedder:
    """The embedder requests use: the built service's, else the one it will be built with."""
    service = _service
    return service.embedder if service is not None else get_embedder()


def _find_pgvector_store(name: str) -> list[StoreEntry]:
    # The one rule of every path (name, then display name): resolve answers what retrieve would search.
    from retrieval_core.backends.gemini.resolve import StoreEntry
    from retrieval_core.db import stores as store_sql

    with database_errors("looking up the store"), get_service().database.connection() as conn:
        store = store_sql.find_store(conn, name)
    return [StoreEntry(store.name, store.display_name)] if store else []


def get_knowledge_service() -> KnowledgeService:
    """The process-wide KnowledgeService. It connects to nothing until a request needs it: Gemini calls
    build the google-genai client, pgvector resolutions the database service."""
    global _knowledge
    if _knowledge is None:
        with _knowledge_lock:
            if _knowledge is None:
                from retrieval_core.backends.gemini.gemini_client import GeminiCaller
                from retrieval_core.backends.gemini.service import KnowledgeService

                settings = get_settings()
                _knowledge = KnowledgeService(
                    GeminiCaller.from_settings(settings),
                    build_cache(settings),
                    default_model=settings.gemini_model,
                    page_size=settings.gemini_store_page_size,
                    find_pgvector_store=_find_pgvector_store,
                    allowed_metadata_keys=settings.metadata_keys_allowed,
                    allowed_models=settings.generation_models,
                )
    return _knowledge


def reset_knowledge_service() -> None:
    """Forget the KnowledgeService (its client and in-process cache); the next request builds a new one."""
    global _knowledge
    with _knowledge_lock:
        _knowledge = None


def get_generator() -> Generator:
    """The process-wide answer generator (GENERATION_PROVIDER), built on first use; no client until used."""
    global _generator
    if _generator is None:
        with _generator_lock:
            if _generator is None:
                from retrieval_core.generation import build_generator

                _generator = build_generator(get_settings(), current_embedder())
    return _generator


def replace_generator(generator: Generator | None) -> Generator | None:
    """Install `generator` as the process-wide one (None: build anew on next use); return the previous."""
    global _generator
    with _generator_lock:
        previous, _generator = _generator, generator
    return previous


def get_answerer(service: Callable[[], RetrievalService] = get_service) -> Answerer:
    """Grounded answers on pgvector stores and attached tables, from `service`'s retrieves (cheap: what
    it uses is built on first use)."""
    from retrieval_core.backends.answers import Answerer
    from retrieval_core.search.token_count import token_counter

    settings = get_settings()
    return Answerer(
        service,
        get_generator,
        settings.generation_models,
        lambda: token_counter(settings.local_model_dir),
    )


def get_backends() -> Backends:
    """The one retrieve entry point over the process-wide backends (cheap: each is built on first use)."""
    from retrieval_core.backends.router import Backends

    return Backends(
        get_service,
        get_knowledge_service,
        {"pgvector": get_answerer, "gemini": get_knowledge_service},
    )
