"""The httpx client our own HTTP callers (OpenAI-compatible embeddings, the HTTP reranker) build."""

from __future__ import annotations

import httpx
from pydantic import SecretStr


def json_client(timeout_s: float, base_url: str = "") -> httpx.Client:
    """A client that accepts JSON. The key goes on each request (`bearer`): it may be rotated."""
    return httpx.Client(base_url=base_url, headers={"Accept": "application/json"}, timeout=timeout_s)


def bearer(api_key: SecretStr | None) -> dict[str, str]:
    """The Authorization header sending `api_key` as a bearer token; no header without a key."""
    if api_key is None or not api_key.get_secret_value():
        return {}
    return {"Authorization": f"Bearer {api_key.get_secret_value()}"}
