"""Schemathesis fuzzes the app through its own OpenAPI document.

In process (ASGI, no network), on the embedded PostgreSQL with the sample store: valid and invalid
requests generated from the schema, at least 1,000 in all. No response may be a 5xx, and every response
must match the schema documented for its status code.
"""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from retrieval_core.api.app import create_app
from tests.fakes.gemini import FakeGemini
from tests.integration.knowledge_support import GEMINI_KEY, knowledge_env, stock_fake

FUZZ_REQUESTS = 1_100

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())


@pytest.mark.usefixtures("sample_store")
def test_fuzz_at_least_1000_generated_requests_get_no_5xx_and_conform_to_the_schema() -> None:
    sent: Counter[str] = Counter()
    statuses: Counter[int] = Counter()

    @given(
        case=st.one_of(
            schema.as_strategy(GenerationMode.POSITIVE), schema.as_strategy(GenerationMode.NEGATIVE)
        )
    )
    @settings(
        max_examples=FUZZ_REQUESTS,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: schemathesis.Case) -> None:
        response = case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
        sent[case.operation.label] += 1
        statuses[response.status_code] += 1

    # The Gemini routes talk to a local fake Gemini API, as a deployment with Gemini configured would.
    with FakeGemini(api_key=GEMINI_KEY) as gemini, knowledge_env(gemini):
        stock_fake(gemini)
        fuzz()
    assert sum(sent.values()) >= 1_000, sent
    # Every operation was exercised, and both accepted and refused requests were among them.
    assert {label.split()[-1] for label in sent} >= {
        "/api/v1/rag/retrieve",
        "/api/v1/rag/retrieve/batch",
        "/api/v1/chunks/similarity-search",
        "/api/v1/knowledge/search",
        "/api/v1/stores/resolve",
        "/api/v1/health",
    }, sent
    assert statuses[200] > 0 and statuses[422] > 0, statuses
