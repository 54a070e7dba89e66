"""KnowledgeService: answers and retrieves over Gemini File Search, cached through our cache."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from retrieval_core.backends.gemini.debug import debug
from retrieval_core.backends.gemini.gemini_client import GeminiCaller
from retrieval_core.backends.gemini.resolve import StoreEntry, StoreResolver
from retrieval_core.backends.gemini.sources import chunk_results, extract_sources
from retrieval_core.backends.prompt_context import formatted_if_asked
from retrieval_core.cache.cache_keys import FORMAT_FIELDS, search_key
from retrieval_core.cache.json_cache import CacheStatus
from retrieval_core.cache.search_cache import SearchCache
from retrieval_core.exceptions import InvalidRequestError, UpstreamError
from retrieval_core.filters.expression import And, Comparison, Node, Or
from retrieval_core.filters.predicate import MetadataValue
from retrieval_core.filters.sql import MetadataFilterValue, check_keys, filter_keys
from retrieval_core.filters.tree import COMPARISONS, is_tree, parse_tree
from retrieval_core.grants import Grant
from retrieval_core.observability import metrics
from retrieval_core.schemas.knowledge import (
    Backend,
    KnowledgeAnswer,
    KnowledgeSearchRequest,
    KnowledgeSource,
    ResolvedStore,
)
from retrieval_core.schemas.retrieve import Pipeline, RetrieveRequest, RetrieveResponse
from retrieval_core.search.duplicates import first_of_each_text

if TYPE_CHECKING:
    from google.genai import Client

    from retrieval_core.backends.answers import AnswerEvent
    from retrieval_core.schemas.answer import AnswerRequest

BACKEND: Backend = "gemini"
ENGINE = "gemini-file-search"
# Gemini has no store version: answers are keyed on the resolved name and expire by TTL alone.
NO_VERSION = 0
# Answer length for a retrieve request, which returns the chunks, not the text.
RETRIEVE_MAX_OUTPUT_TOKENS = 256
GEMINI_PICKS_CONTEXT = "not supported for Gemini File Search stores; Gemini picks the chunks it reads"
_FILTER_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class KnowledgeService:
    """Knowledge answers with sources from Gemini File Search, and store-name resolution for both backends."""

    def __init__(
        self,
        caller: GeminiCaller,
        cache: SearchCache,
        *,
        default_model: str,
        page_size: int,
        find_pgvector_store: Callable[[str], list[StoreEntry]] | None = None,
        allowed_metadata_keys: frozenset[str] | None = None,
        allowed_models: frozenset[str] = frozenset(),
    ) -> None:
        self.caller = caller
        # Models an answer request may name (GENERATION_MODELS_ALLOWED), and GEMINI_MODEL.
        self.allowed_models = frozenset({default_model, *allowed_models})
        self.allowed_metadata_keys = allowed_metadata_keys
        self.cache = cache
        self.default_model = default_model
        self.page_size = page_size
        self.gemini_stores = StoreResolver(BACKEND, lambda _: self._list_gemini_stores(), cache.stores)
        self.pgvector_stores = (
            StoreResolver("pgvector", find_pgvector_store, cache.stores) if find_pgvector_store else None
        )

    # Resolution.

    def resolve(self, name: str, backend: Backend, grant: Grant) -> ResolvedStore:
        """GET /api/v1/stores/resolve: the same five steps over Gemini's stores or our stores table.

        A resolution to a store outside `grant` is a 404 naming `name`, exactly as an unknown store.
        """
        grant.require_scope("read")
        if backend == "pgvector":
            if self.pgvector_stores is None:
                raise InvalidRequestError("backend: pgvector resolution is not configured here")
            resolved = self.pgvector_stores.resolve(name)
        else:
            resolved = self.gemini_stores.resolve(name)
        grant.require_store(resolved.name, name)
        return resolved

    def _granted_gemini_store(self, name: str, grant: Grant) -> str:
        """The full name of the Gemini store `name` designates, if `grant` covers it (404 otherwise)."""
        store = self.gemini_stores.resolve(name).name
        grant.require_store(store, name)
        return store

    def _list_gemini_stores(self) -> list[StoreEntry]:
        def list_all(client: Client, timeout_ms: int) -> list[StoreEntry]:
            pager = client.file_search_stores.list(
                config={"page_size": self.page_size, "http_options": {"timeout": timeout_ms}}
            )
            stores = [StoreEntry(s.name, s.display_name) for s in pager.page if s.name]
            pages = 1
            while pager.config.get("page_token"):
                pager.next_page()
                stores.extend(StoreEntry(s.name, s.display_name) for s in pager.page if s.name)
                pages += 1
            debug("listed %d File Search stores in %d pages", len(stores), pages)
            return stores

        return self.caller.call("listing File Search stores", list_all)

    # Search.

    def search(self, request: KnowledgeSearchRequest, grant: Grant) -> tuple[KnowledgeAnswer, CacheStatus]:
        """search(): resolve the store, serve from cache or ask Gemini, extract the sources.

        `grant` needs the read scope and the store (by its full name), checked before the cache.
        """
        grant.require_scope("read")
        check_filter_keys(request.metadata_filter, self.allowed_metadata_keys)
        store = self._granted_gemini_store(request.store, grant)
        model = request.model or self.default_model

        def compute() -> dict[str, Any]:
            text, grounding = self._generate(
                store,
                request.query,
                model=model,
                top_k=request.top_k,
                metadata_filter=request.metadata_filter,
                system_instruction=request.system_instruction,
                max_output_tokens=request.max_output_tokens,
            )
            sources = extract_sources(grounding)
            debug("extracted %d sources (%d scored)", len(sources), sum(s.score is not None for s in sources))
            answer = KnowledgeAnswer(text=text, sources=sources, grounding_metadata=grounding)
            return answer.model_dump(mode="json", by_alias=True)

        body, status = self._through_cache("knowledge-search", store, model, request, compute)
        return KnowledgeAnswer.model_validate(body), status

    def retrieve(
        self, request: RetrieveRequest, embed_query: object = None, *, grant: Grant
    ) -> tuple[RetrieveResponse, CacheStatus]:
        """POST /api/v1/rag/retrieve on a File Search store: the grounding chunks, graded (docs/gemini.md).

        `grant` is checked as in `search`. `embed_query` is not used: Gemini embeds the query itself.
        """
        grant.require_scope("read")
        refuse_unsupported_options(request)
        check_filter_keys(request.metadata_filter, self.allowed_metadata_keys)
        metadata_filter = gemini_filter(request.metadata_filter)
        store = self._granted_gemini_store(_required_store(request.store), grant)
        model = self.default_model

        def compute() -> dict[str, Any]:
            _, grounding = self._generate(
                store,
                request.query,
                model=model,
                top_k=request.similarity_top_k,
                metadata_filter=metadata_filter,
                system_instruction=None,
                max_output_tokens=RETRIEVE_MAX_OUTPUT_TOKENS,
            )
            sources = extract_sources(grounding)
            assert request.grade is not None  # searchMode "keyword", which takes none, is refused above
            kept = graded(sources, request.grade)
            if request.collapse_duplicates:  # File Search keeps no content hash: same text, same chunk
                kept = first_of_each_text(kept, lambda s: s.chunk)
            response = RetrieveResponse(
                results=chunk_results(kept),
                query=request.query,
                total_results=len(kept),
                engine_used=ENGINE,
                store=store,
                pipeline=Pipeline(candidates_considered=len(sources)),
            )
            return response.model_dump(mode="json", by_alias=True)

        body, status = self._through_cache("retrieve", store, model, request, compute)
        return formatted_if_asked(RetrieveResponse.model_validate(body), request), status

    def answer(
        self, request: AnswerRequest, grant: Grant, *, streaming: bool = False
    ) -> tuple[Iterator[AnswerEvent], CacheStatus]:
        """POST /api/v1/rag/answer on a File Search store: Gemini's answer and its grounding supports as
        citations, in the answer shape. Retrieval and generation are one generateContent call, so the
        whole text arrives at once (one piece when streamed); `grounded` is false without supports."""
        # Imported with the first answer: a retrieve or a knowledge search never loads the answer path.
        from retrieval_core.backends.answers import check_model
        from retrieval_core.backends.gemini.file_search_answer import (
            file_search_answer,
            file_search_system_text,
        )
        from retrieval_core.generation.prompt import PROMPT_VERSION
        from retrieval_core.schemas.answer import AnswerResponse

        grant.require_scope("read")
        refuse_unsupported_options(request)
        if request.max_context_tokens is not None:
            raise InvalidRequestError.for_field(
                "maxContextTokens", "not supported by Gemini", "unsupported", GEMINI_PICKS_CONTEXT
            )
        check_filter_keys(request.metadata_filter, self.allowed_metadata_keys)
        metadata_filter = gemini_filter(request.metadata_filter)
        store = self._granted_gemini_store(_required_store(request.store), grant)
        model = check_model(request.model, self.allowed_models, self.default_model)

        def compute() -> dict[str, Any]:
            started = time.perf_counter()
            text, grounding = self._generate(
                store,
                request.query,
                model=model,
                top_k=request.similarity_top_k,
                metadata_filter=metadata_filter,
                system_instruction=file_search_system_text(request.system_instruction),
                max_output_tokens=request.max_output_tokens,
            )
            elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
            answer = file_search_answer(request, store, model, text, grounding, elapsed_ms)
            return answer.model_dump(mode="json", by_alias=True)

        # The prompt's version too: changed grounding rules must not serve answers written under the old.
        version = {"promptVersion": PROMPT_VERSION}
        body, status = self._through_cache("answer", store, model, request, compute, version)
        answer = AnswerResponse.model_validate(body)
        return iter([answer.text, answer] if streaming and answer.text else [answer]), status

    def _through_cache(
        self,
        operation: str,
        store: str,
        model: str,
        request: RetrieveRequest | KnowledgeSearchRequest,
        compute: Callable[[], dict[str, Any]],
        identity: dict[str, str] | None = None,
    ) -> tuple[dict[str, Any], CacheStatus]:
        ttl_s = self.cache.ttl_for(request.cache_ttl_ms)
        if ttl_s is None:
            debug("%s: cacheTTLms=0, not cached", operation)
            return compute(), CacheStatus.BYPASS
        # Every request option is part of the key (systemInstruction and maxOutputTokens included).
        key = search_key(
            backend=BACKEND,
            store=store,
            store_version=NO_VERSION,
            operation=operation,
            request=request.model_dump(mode="json", exclude={"store", *FORMAT_FIELDS}),
            context={"model": model, **(identity or {})},
        )
        cached = self.cache.get_answer(key)
        if cached is not None:
            debug("%s: cache hit (key %s)", operation, key)
            metrics.count("CacheHit")
            return cached, CacheStatus.HIT
        debug("%s: cache miss (key %s, ttl %.0f s)", operation, key, ttl_s)
        metrics.count("CacheMiss")
        body = compute()
        self.cache.put_answer(key, body, ttl_s)
        return body, CacheStatus.MISS

    def _generate(
        self,
        store: str,
        query: str,
        *,
        model: str,
        top_k: int | None,
        metadata_filter: str | None,
        system_instruction: str | None,
        max_output_tokens: int,
    ) -> tuple[str, dict[str, Any] | None]:
        """generateContent with the fileSearch tool; (answer text, raw groundingMetadata)."""

        def generate(client: Client, timeout_ms: int) -> bytes | str:
            from google.genai import types

            config = types.GenerateContentConfig(
                tools=[
                    types.Tool(
                        file_search=types.FileSearch(
                            file_search_store_names=[store], top_k=top_k, metadata_filter=metadata_filter
                        )
                    )
                ],
                system_instruction=system_instruction,
                max_output_tokens=max_output_tokens,
                # The raw body: the SDK's models drop grounding fields they do not know (the legacy shapes).
                should_return_http_response=True,
                http_options=types.HttpOptions(timeout=timeout_ms),
            )
            response = client.models.generate_content(model=model, contents=query, config=config)
            raw = response.sdk_http_response.body if response.sdk_http_response else None
            return raw or ""

        started = time.perf_counter()
        raw = self.caller.call("generateContent", generate, store=store, blame=_blame(metadata_filter))
        debug(
            "generateContent on %s: %d bytes in %.1f ms",
            store,
            len(raw),
            (time.perf_counter() - started) * 1000,
        )
        return parse_generate_response(raw)


def _required_store(name: str | None) -> str:
    if not name:
        raise InvalidRequestError.for_field(
            "store", "required for gemini", "missing", "required for the Gemini backend"
        )
    return name


def _blame(metadata_filter: str | None) -> Callable[[str], str | None]:
    # Gemini's 400 names no field; a message about a filter is about the caller's, when one was sent.
    def field(message: str) -> str | None:
        return "metadataFilter" if metadata_filter and "filter" in message.lower() else None

    return field


def parse_generate_response(raw: bytes | str) -> tuple[str, dict[str, Any] | None]:
    """(text of the first candidate, its groundingMetadata) from a generateContent JSON body."""
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        raise UpstreamError("the Gemini API answered with a body that is not JSON") from None
    if not isinstance(body, dict):
        raise UpstreamError("the Gemini API answered with an unexpected body")
    candidates = body.get("candidates") or []
    candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    parts = parts if isinstance(parts, list) else []
    # Thought summaries are not part of the answer.
    text = "".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    )
    grounding = candidate.get("groundingMetadata")
    return text, grounding if isinstance(grounding, dict) else None


def refuse_unsupported_options(request: RetrieveRequest) -> None:
    """Refuse (422 `unsupported`) each retrieve option that Gemini File Search would ignore."""
    sent = request.model_fields_set
    rerank = request.rerank
    # Each option Gemini would ignore; hybrid and MMR options are refused with searchMode, useHybrid, rerank.
    unsupported = {
        "docIds": "use metadataFilter" if request.doc_ids else None,
        "searchMode": "Gemini runs its own retrieval"
        if "search_mode" in sent and request.search_mode != "vector"
        else None,
        "useHybrid": "Gemini runs its own retrieval" if request.use_hybrid else None,
        "rerank": "Gemini ranks its own chunks" if rerank is not None and rerank.enabled else None,
        "rerank.topK": "every graded chunk is returned"
        if rerank is not None and "top_k" in rerank.model_fields_set
        else None,
        "engineName": "Gemini File Search is the engine" if "engine_name" in sent else None,
        "search": "the index knobs are pgvector's" if request.search is not None else None,
        "expand": "Gemini returns its chunks without their neighbours"
        if request.expand is not None
        else None,
    }
    for field, hint in unsupported.items():
        if hint is not None:
            raise InvalidRequestError.for_field(
                field,
                "not supported by Gemini",
                "unsupported",
                f"not supported for Gemini File Search stores; {hint}",
            )


def check_filter_keys(
    metadata_filter: MetadataFilterValue | None, allowed_keys: frozenset[str] | None
) -> None:
    """ALLOWED_METADATA_KEYS on a filter Gemini evaluates (422 naming the allowed keys).

    With an allow-list, an expression must be one our parser reads (docs/api.md "Metadata filters", a subset
    of Gemini's AIP-160 syntax): a filter whose keys cannot be told is refused, not passed on unchecked.
    """
    if allowed_keys is None or not metadata_filter:
        return
    check_keys(filter_keys(metadata_filter), allowed_keys)


# Tree operators that Gemini's AIP-160 filters express with the same meaning.
_GEMINI_OPERATORS = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_TREE_NAMES = {op: name for name, op in COMPARISONS.items()}


def gemini_filter(metadata_filter: MetadataFilterValue | None) -> str | None:
    """Our `metadataFilter` in Gemini's filter syntax: `k = "v" AND n = 3`.

    An expression string is passed through as it is: Gemini evaluates it (the string syntax is Gemini's).
    A filter tree is translated; an operator Gemini has no equal of is refused (422 naming it).
    """
    if not metadata_filter:
        return None
    if isinstance(metadata_filter, str):
        return metadata_filter
    if is_tree(metadata_filter):
        return _gemini_node(parse_tree(metadata_filter))
    return " AND ".join(_gemini_comparison(key, "=", value) for key, value in metadata_filter.items())


def _gemini_node(node: Node) -> str:
    if isinstance(node, And | Or):
        joiner = " AND " if isinstance(node, And) else " OR "
        return joiner.join(f"({_gemini_node(operand)})" for operand in node.operands)
    if isinstance(node, Comparison) and node.op == "IN":
        assert isinstance(node.value, tuple)
        return " OR ".join(_gemini_comparison(node.key, "=", value) for value in node.value)
    if isinstance(node, Comparison) and node.op in _GEMINI_OPERATORS:
        assert not isinstance(node.value, tuple)
        return _gemini_comparison(node.key, _GEMINI_OPERATORS[node.op], node.value)
    name = _TREE_NAMES[node.op] if isinstance(node, Comparison) else "exists"
    raise InvalidRequestError.for_field(
        "metadataFilter",
        f"the operator {name} is not supported by Gemini File Search",
        "unsupported",
        f"{name} is not supported for Gemini File Search stores; use equals, notEquals, "
        "greaterThan(OrEquals), lessThan(OrEquals), in, andAll or orAll",
    )


def _gemini_comparison(key: str, op: str, value: MetadataValue) -> str:
    if not _FILTER_KEY.match(key):
        raise _filter_error(key, "Gemini metadata keys must be identifiers ([A-Za-z_][A-Za-z0-9_]*)")
    if isinstance(value, bool):
        raise _filter_error(key, "Gemini custom metadata holds strings and numbers, not booleans")
    return f"{key} {op} {json.dumps(value)}"


def _filter_error(key: str, message: str) -> InvalidRequestError:
    return InvalidRequestError.for_field(f"metadataFilter.{key}", message, "unsupported")


def graded(sources: list[KnowledgeSource], grade: float) -> list[KnowledgeSource]:
    """Sources scoring at least `grade`, highest first; unscored ones only when grade is 0, last."""
    kept = [
        s for s in sources if (s.score is not None and s.score >= grade) or (s.score is None and grade == 0)
    ]
    # Stable: Gemini's own order among equal scores and among the unscored.
    return sorted(kept, key=lambda s: (s.score is None, -(s.score or 0.0)))
