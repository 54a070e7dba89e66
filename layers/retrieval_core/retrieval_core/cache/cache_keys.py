"""Cache keys. Pure: no I/O.

A key built from a few chosen fields (`{storeName}:{query}:{metadataFilter}:{topK}`) would let two
requests that differ only in `systemInstruction` or `maxOutputTokens` share one cached answer.
Here a search key hashes every field of the request except the cache controls, so an
option added to a request model later becomes part of the key without anyone
remembering to add it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# Request fields that control caching itself and never change the answer.
CACHE_CONTROL_FIELDS = frozenset({"cache_ttl_ms"})
# Request fields that only shape how a cached answer is presented: the cache holds the answer without
# them and formatting runs on every serve, so a hit can never lack the `context` a request asks for.
FORMAT_FIELDS = frozenset({"return_formatted", "max_context_tokens"})


def _digest(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def search_key(
    *,
    backend: str,
    store: str,
    store_version: int,
    operation: str,
    request: Mapping[str, Any],
    context: Mapping[str, Any],
) -> str:
    """Key of one search answer.

    `request` is the request as a dict (every option that changes the answer); `context`
    holds what the service adds to it (embedding model, index settings, engine version).
    """
    options = {k: v for k, v in request.items() if k not in CACHE_CONTROL_FIELDS}
    return "search#" + _digest(
        {
            "backend": backend,
            "store": store,
            "version": store_version,
            "op": operation,
            "request": options,
            "context": dict(context),
        }
    )


def store_name_key(backend: str, name: str) -> str:
    """Key of a store-name resolution."""
    return "store#" + _digest({"backend": backend, "name": name})
