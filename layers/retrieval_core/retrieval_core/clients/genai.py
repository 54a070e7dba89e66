"""The google-genai client as every Gemini caller here builds it. google-genai and httpx load on call."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING

from pydantic import SecretStr

from retrieval_core.clients.retry import RETRY_MAX_DELAY_S

if TYPE_CHECKING:
    from google.genai import Client
    from google.genai.errors import APIError
    from google.genai.types import HttpRetryOptions


def build_genai_client(
    *,
    api_key: SecretStr,
    base_url: str | None,
    timeout_s: float,
    retry_attempts: int = 1,
    retry_base_delay_s: float = 0.0,
    retryable_statuses: Collection[int] = (),
    api_version: str | None = None,
) -> Client:
    """A Gemini API client (not Vertex) with our timeout and, when statuses are given, retry policy.

    Without `retryable_statuses` the client never retries by itself (the caller does). `api_version`
    None: the SDK's default. Raises ImportError when google-genai is not installed; callers turn that
    into their own error.
    """
    # Imported after google-genai, which needs it anyway.
    import httpx
    from google import genai
    from google.genai import types

    retry = (
        retry_options(retry_attempts, retry_base_delay_s, retryable_statuses) if retryable_statuses else None
    )
    return genai.Client(
        vertexai=False,
        api_key=api_key.get_secret_value(),
        http_options=types.HttpOptions(
            base_url=base_url,
            api_version=api_version,
            timeout=int(timeout_s * 1000),
            retry_options=retry,
            # Our own httpx client pins the transport (google-genai prefers httpx2 when it is
            # installed), so the transport errors callers catch are the ones raised.
            httpx_client=httpx.Client(timeout=timeout_s),
        ),
    )


def retry_options(
    attempts: int, base_delay_s: float, retryable_statuses: Collection[int]
) -> HttpRetryOptions:
    """The SDK's own retry policy: `attempts` in all, exponential backoff from `base_delay_s`."""
    from google.genai import types

    return types.HttpRetryOptions(
        attempts=attempts,
        initial_delay=base_delay_s,
        max_delay=RETRY_MAX_DELAY_S,
        exp_base=2,
        jitter=base_delay_s,
        http_status_codes=sorted(retryable_statuses),
    )


def key_rejected(exc: APIError) -> bool:
    """True when the Gemini API refused the API key: 401/403, or 400 INVALID_ARGUMENT with API_KEY_INVALID."""
    return exc.code in (401, 403) or "API_KEY_INVALID" in json.dumps(exc.details, default=str)
