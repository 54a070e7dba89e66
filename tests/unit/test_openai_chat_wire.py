"""What the OpenAI-compatible generator reads and writes on the wire: the token limit's field, server-sent
events and Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from retrieval_core.clients.httpx_client import retry_after_s
from retrieval_core.generation.openai_compatible import sse_data, token_limit_field


@pytest.mark.parametrize(
    ("base_url", "field"),
    [
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://api.openai.com/v1/", "max_completion_tokens"),
        ("http://localhost:11434/v1", "max_tokens"),  # Ollama
        ("http://vllm.internal:8000/v1", "max_tokens"),
        ("https://api.openai.com.example.net/v1", "max_tokens"),
    ],
)
def test_only_api_openai_com_gets_max_completion_tokens(base_url: str, field: str) -> None:
    assert token_limit_field(base_url) == field


def test_sse_data_joins_each_events_data_lines_and_skips_the_rest() -> None:
    lines = [
        ": keep-alive",
        "event: message",
        'data: {"a": 1}',
        "",
        "",
        "id: 7",
        "data:first",
        "data: second",
        "retry: 100",
        "",
        "data: [DONE]",
    ]
    assert list(sse_data(lines)) == ['{"a": 1}', "first\nsecond", "[DONE]"]


def test_sse_data_of_no_events_is_empty() -> None:
    assert list(sse_data(["", ": ping", ""])) == []


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7),
        ({"Retry-After": "1.2"}, 2),
        ({"retry-after-ms": "1500", "Retry-After": "9"}, 2),  # OpenAI's milliseconds win
        ({"Retry-After": "0"}, None),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # in the past
        ({}, None),
    ],
)
def test_retry_after_in_seconds_or_milliseconds(headers: dict[str, str], seconds: int | None) -> None:
    assert retry_after_s(httpx.Headers(headers)) == seconds


def test_retry_after_as_an_http_date() -> None:
    moment = datetime.now(UTC) + timedelta(seconds=30)
    seconds = retry_after_s(httpx.Headers({"Retry-After": format_datetime(moment, usegmt=True)}))
    assert seconds is not None and 28 <= seconds <= 31
