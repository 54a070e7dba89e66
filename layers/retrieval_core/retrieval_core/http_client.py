"""The httpx client our own HTTP callers (OpenAI-compatible embeddings, the HTTP reranker) build."""

from __future__ import annotations

import httpx
from pydantic import SecretStr


def json_client(api_key: SecretStr | None, timeout_s: float, base_url: str = "") -> httpx.Client:
    """A client that accepts JSON and, when `api_key` is set, sends it as a bearer token."""
    headers = {"Accept": "application/json"}
    if api_key is not None and api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    return httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)
