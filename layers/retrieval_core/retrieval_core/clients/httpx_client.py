"""The httpx client our own HTTP callers (OpenAI-compatible embeddings, the HTTP reranker) build."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

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


def retry_after_s(headers: Mapping[str, str]) -> int | None:
    """Whole seconds a throttled server asks us to wait: `retry-after-ms` (OpenAI's), else `Retry-After`
    in seconds or as an HTTP date; None when it says nothing usable."""
    milliseconds = headers.get("retry-after-ms")
    seconds: float | None = None
    try:
        if milliseconds is not None:
            seconds = float(milliseconds) / 1000
        elif (value := headers.get("retry-after")) is not None:
            seconds = float(value) if value.strip().replace(".", "", 1).isdigit() else _seconds_until(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return math.ceil(seconds) if seconds is not None and 0 < seconds < math.inf else None


def _seconds_until(http_date: str) -> float:
    moment = parsedate_to_datetime(http_date)
    return (moment - datetime.now(moment.tzinfo or UTC)).total_seconds()
