"""Rerank strategies behind one interface; `get_reranker` picks one by name.

`bge` is an HTTP reranker service (TEI or Cohere/Jina-style), `llm` asks Gemini to score the
candidates, `bedrock` calls the Bedrock Agent Runtime Rerank API. MMR, a diversity reordering that
needs no service, lives in `rerank.mmr`. Importing this package loads no client library: httpx,
google-genai, boto3 and numpy are imported by the strategy that needs them, on first use.
"""

from __future__ import annotations

import threading
from typing import Literal, get_args

from retrieval_core.clients.provider_keys import gemini_key, reranker_key
from retrieval_core.rerank.base import Reranker, RerankScore
from retrieval_core.settings import Settings

__all__ = [
    "RerankScore",
    "RerankStrategy",
    "Reranker",
    "build_reranker",
    "clear_reranker_cache",
    "get_reranker",
]

RerankStrategy = Literal["bge", "llm", "bedrock"]
STRATEGIES: tuple[str, ...] = get_args(RerankStrategy)

_cache: dict[tuple[object, ...], Reranker] = {}
_cache_lock = threading.Lock()


def _config_key(strategy: str, settings: Settings) -> tuple[object, ...] | None:
    """The settings a strategy depends on, or None when the strategy is not configured."""
    common = (strategy, settings.rerank_timeout_s, settings.rerank_attempts)
    if strategy == "bge":
        if not settings.reranker_service_url:
            return None
        # Where the key comes from, not the key: a key in a secret is read on each rerank.
        key = reranker_key(settings)
        return (
            *common,
            settings.reranker_service_url,
            settings.reranker_api,
            settings.reranker_model,
            key.from_environment,
            key.secret,
            settings.reranker_batch_size,
        )
    if strategy == "llm":
        gemini = gemini_key(settings)
        if not gemini.configured:
            return None
        return (
            *common,
            gemini.from_environment,
            gemini.secret,
            settings.gemini_base_url,
            settings.rerank_llm_model,
        )
    if strategy == "bedrock":
        return (
            *common,
            settings.bedrock_rerank_model,
            settings.bedrock_region,
            settings.bedrock_agent_runtime_endpoint_url,
        )
    raise ValueError(f"unknown rerank strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")


def build_reranker(strategy: RerankStrategy, settings: Settings) -> Reranker | None:
    """A new reranker for `strategy`, or None when it is not configured. No client is created yet.

    Not configured: `bge` without RERANKER_SERVICE_URL, `llm` without GEMINI_API_KEY or
    GEMINI_API_KEY_SECRET_ARN. `bedrock` is always configured; missing AWS credentials or region
    surface as RerankerUnavailableError.
    """
    if _config_key(strategy, settings) is None:
        return None
    if strategy == "bge":
        from retrieval_core.rerank.http_service import HTTPReranker

        return HTTPReranker.from_settings(settings)
    if strategy == "llm":
        from retrieval_core.rerank.llm import GeminiReranker

        return GeminiReranker.from_settings(settings)
    from retrieval_core.rerank.bedrock import BedrockReranker

    return BedrockReranker.from_settings(settings)


def get_reranker(strategy: RerankStrategy, settings: Settings) -> Reranker | None:
    """The process-wide reranker for `strategy` and these settings (None when not configured).

    Instances are cached per process so that their HTTP connections and clients are reused.
    """
    key = _config_key(strategy, settings)
    if key is None:
        return None
    with _cache_lock:
        reranker = _cache.get(key)
        if reranker is None:
            reranker = build_reranker(strategy, settings)
            assert reranker is not None  # the key said it is configured
            _cache[key] = reranker
        return reranker


def clear_reranker_cache() -> None:
    """Forget the cached rerankers (tests, or after the settings changed)."""
    with _cache_lock:
        _cache.clear()
