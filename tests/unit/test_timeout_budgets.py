"""Every outbound call of an HTTP function ends before the function's Timeout (template.yaml) and API
Gateway's 29 s integration limit, with the defaults a deploy configures: an answer that would come too
late is our 504 upstream_timeout, not the gateway's error."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_core.clients.deadline import LAMBDA_MARGIN_S, budget_s
from retrieval_core.clients.retry import RETRY_ATTEMPTS, RETRY_BASE_DELAY_S, worst_case_s
from retrieval_core.settings import Settings
from tests.template import source

API_GATEWAY_LIMIT_S = 29
# Time the function keeps, after the deadline, to turn a given-up call into its answer.
ANSWER_MARGIN_S = 3.0


def http_functions() -> dict[str, dict[str, Any]]:
    """The functions behind the HTTP API, by logical id."""
    resources = source()["Resources"]
    return {
        name: resource["Properties"]
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function"
        and any(e["Type"] == "HttpApi" for e in resource["Properties"].get("Events", {}).values())
    }


def deployed_settings(function: dict[str, Any]) -> Settings:
    """Settings as the template configures them: literal environment values, parameters at their default."""
    template = source()
    env = {
        **template["Globals"]["Function"]["Environment"]["Variables"],
        **function.get("Environment", {}).get("Variables", {}),
    }
    values: dict[str, Any] = {}
    for name, value in env.items():
        if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in template["Parameters"]:
            value = template["Parameters"][value["Ref"]].get("Default")
        if isinstance(value, str | int | float) and name.lower() in Settings.model_fields:
            values[name.lower()] = value
    return Settings(**values)


def function_timeout_s(function: dict[str, Any]) -> int:
    timeout: int = function.get("Timeout", source()["Globals"]["Function"]["Timeout"])
    return timeout


def test_the_http_functions_are_found() -> None:
    expected = {
        "RetrieveFunction",
        "SimilaritySearchFunction",
        "ResolveStoreFunction",
        "DocumentsFunction",
        "McpFunction",
    }
    assert expected <= set(http_functions())


@pytest.mark.parametrize("name", sorted(http_functions()))
def test_every_outbound_call_ends_before_the_function_and_the_gateway_give_up(name: str) -> None:
    function = http_functions()[name]
    settings = deployed_settings(function)
    timeout_s = function_timeout_s(function)
    assert timeout_s <= API_GATEWAY_LIMIT_S
    deadline_s = budget_s(settings.request_deadline_s, lambda_remaining_s=timeout_s)
    assert deadline_s + ANSWER_MARGIN_S <= timeout_s
    # Each client's own worst case, then cut to the request's deadline (one deadline for the request:
    # an embedding call and a rerank in one request share it).
    worst = {
        "gemini": worst_case_s(
            settings.gemini_retry_attempts, settings.http_timeout_s, settings.gemini_retry_base_delay_s
        ),
        "embeddings": worst_case_s(RETRY_ATTEMPTS, settings.http_timeout_s, RETRY_BASE_DELAY_S),
        "rerank": settings.rerank_timeout_s,
    }
    for client, seconds in worst.items():
        assert min(seconds, deadline_s) + ANSWER_MARGIN_S <= timeout_s, client


def test_the_deadline_is_what_bounds_gemini_by_default() -> None:
    # Without the deadline Gemini's retries alone would outlast the function: this is why it exists.
    settings = Settings()
    attempts, base_delay_s = settings.gemini_retry_attempts, settings.gemini_retry_base_delay_s
    assert worst_case_s(attempts, settings.http_timeout_s, base_delay_s) > API_GATEWAY_LIMIT_S
    assert settings.request_deadline_s + ANSWER_MARGIN_S <= API_GATEWAY_LIMIT_S


def test_the_rerank_budget_parameter_cannot_exceed_the_deadline() -> None:
    maximum = source()["Parameters"]["RerankTimeoutSeconds"]["MaxValue"]
    assert maximum <= Settings().request_deadline_s


def test_in_lambda_the_deadline_keeps_a_margin_of_the_remaining_time() -> None:
    assert budget_s(25.0, lambda_remaining_s=None) == 25.0
    assert budget_s(25.0, lambda_remaining_s=10.0) == 10.0 - LAMBDA_MARGIN_S
    assert budget_s(25.0, lambda_remaining_s=1.0) == 0.0
