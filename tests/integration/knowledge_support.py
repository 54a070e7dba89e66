"""Shared by the knowledge-search and store-resolution tests: grounding payloads in the REST shape and an
app wired to a fake Gemini through the real google-genai client."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fakes.gemini import FakeGemini

GEMINI_KEY = "gm-knowledge-test-5f2c9e0a71b4"
HVAC_STORE = "fileSearchStores/hvac-kb-7f3a"
HVAC_DISPLAY = "HVAC Knowledge Base"
HVAC_MANUAL = f"{HVAC_STORE}/documents/hvac-manual-01"
HVAC_ESCALATION = f"{HVAC_STORE}/documents/escalation-02"

# File Search grounding: two chunks of one document (both kept) and a third chunk no support cites.
FILE_SEARCH_GROUNDING: dict[str, Any] = {
    "groundingChunks": [
        {
            "retrievedContext": {
                "title": "hvac-manual.pdf",
                "text": "Cold complaints: check the thermostat set point first.",
                "documentName": HVAC_MANUAL,
                "fileSearchStore": HVAC_STORE,
                "customMetadata": [
                    {"key": "source_type", "stringValue": "s3"},
                    {"key": "year", "numericValue": 2024},
                    {"key": "tags", "stringListValue": {"values": ["hvac", "cold"]}},
                ],
                "pageNumber": 12,
            }
        },
        {
            "retrievedContext": {
                "title": "hvac-manual.pdf",
                "text": "If the unit short-cycles, inspect the filter.",
                "documentName": HVAC_MANUAL,
                "fileSearchStore": HVAC_STORE,
                "pageNumber": 13,
            }
        },
        {
            "retrievedContext": {
                "title": "escalation.md",
                "text": "Escalate to facilities after 48 hours.",
                "documentName": HVAC_ESCALATION,
            }
        },
    ],
    "groundingSupports": [
        {
            "segment": {"startIndex": 0, "endIndex": 40, "text": "Check the thermostat and the filter."},
            "groundingChunkIndices": [0, 1],
            "confidenceScores": [0.62, 0.91],
        },
        {
            "segment": {"startIndex": 41, "endIndex": 80, "text": "Start with the thermostat."},
            "groundingChunkIndices": [0],
            "confidenceScores": [0.88],
        },
    ],
    "retrievalQueries": ["cold complaint procedure"],
}

WEB_GROUNDING: dict[str, Any] = {
    "webSearchQueries": ["hvac cold complaint"],
    "groundingChunks": [
        {"web": {"uri": "https://example.org/hvac", "title": "example.org", "domain": "example.org"}},
        {"web": {"uri": "https://example.net/cold", "title": "Cold rooms"}},
    ],
    "groundingSupports": [
        {"segment": {"text": "x"}, "groundingChunkIndices": [1], "confidenceScores": [0.7]},
    ],
}

LEGACY_GROUNDING: dict[str, Any] = {
    "groundingChunks": [
        {
            "chunk": {
                "name": "corpora/hvac/documents/manual/chunks/c1",
                "data": {"stringValue": "Legacy: check the thermostat."},
                "customMetadata": [{"key": "source_type", "stringValue": "gcs"}],
            }
        },
        {"chunkData": {"stringValue": "Legacy: bare chunk data."}},
    ],
}


def stock_fake(fake: FakeGemini) -> None:
    """Five stores over three pages (page size 2); HVAC is on the last page."""
    fake.add_store("billing-01", "Billing")
    fake.add_store("legal-02", "Legal")
    fake.add_store("hr-03")  # no display name
    fake.add_store("ops-04", "Operations")
    fake.add_store("hvac-kb-7f3a", HVAC_DISPLAY)
    fake.groundings[HVAC_STORE] = FILE_SEARCH_GROUNDING


@contextmanager
def knowledge_env(fake: FakeGemini, **extra: str) -> Iterator[None]:
    """Settings pointing the knowledge service at `fake`; services rebuilt before and after."""
    from retrieval_core.container import reset_knowledge_service
    from retrieval_core.settings import get_settings

    env = {
        "GEMINI_API_KEY": GEMINI_KEY,
        "GEMINI_BASE_URL": fake.url,
        "GEMINI_RETRY_BASE_DELAY_S": "0.01",
        "GEMINI_STORE_PAGE_SIZE": "2",
        **extra,
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        get_settings.cache_clear()
        reset_knowledge_service()
        try:
            yield
        finally:
            reset_knowledge_service()
    get_settings.cache_clear()


@contextmanager
def knowledge_client(fake: FakeGemini, **extra: str) -> Iterator[TestClient]:
    """A TestClient over the full app, its knowledge service talking to `fake`."""
    from retrieval_core.api.app import create_app

    with knowledge_env(fake, **extra), TestClient(create_app()) as client:
        yield client
