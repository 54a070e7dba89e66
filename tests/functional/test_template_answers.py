"""What the stack grants the functions that answer (POST /rag/answer, the MCP answer tool, queue jobs):
exactly the Bedrock models listed, or the chat provider's key, and nothing with the offline default."""

from __future__ import annotations

from typing import Any

from retrieval_core.settings.generation import DEFAULT_GENERATION_MODELS
from tests.template import SECRET_ARN, deployed, grants, role_statements

ANSWERING = ("RetrieveFunctionRole", "McpFunctionRole", "RetrieveQueueFunctionRole")
NOT_ANSWERING = ("SimilaritySearchFunctionRole", "ResolveStoreFunctionRole", "DocumentsFunctionRole")
INVOKE = ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream")
LISTED = ("anthropic.claude-3-5-haiku-20241022-v1:0", "meta.llama3-70b-instruct-v1:0")
CHAT_KEY = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/chat-AbC"


def model_arn(model: str) -> str:
    return f"arn:aws:bedrock:us-east-1::foundation-model/{model}"


def answer_grants(deployment: dict[str, Any], role: str) -> set[tuple[str, str]]:
    """The role's grants to stream from a model, and those on the models or the key answers use."""
    return {
        (action, resource)
        for action, resource in grants(role_statements(deployment, role))
        if action == "bedrock:InvokeModelWithResponseStream" or resource in ANSWER_RESOURCES
    }


ANSWER_RESOURCES = {
    model_arn("amazon.nova-lite-v1:0"),
    model_arn("amazon.nova-pro-v1:0"),
    model_arn("anthropic.claude-3-5-haiku-20241022-v1:0"),
    model_arn("meta.llama3-70b-instruct-v1:0"),
    CHAT_KEY,
}


def test_bedrock_answers_may_invoke_exactly_the_model_and_the_listed_ones() -> None:
    deployment = deployed(
        {
            "DatabaseSecretArn": SECRET_ARN,
            "GenerationProvider": "bedrock",
            "GenerationModel": "amazon.nova-pro-v1:0",
            "GenerationModelsAllowed": ",".join(LISTED),
        }
    )
    models = [
        "amazon.nova-pro-v1:0",
        "anthropic.claude-3-5-haiku-20241022-v1:0",
        "meta.llama3-70b-instruct-v1:0",
    ]
    expected = {(action, model_arn(model)) for action in INVOKE for model in models}
    for role in ANSWERING:
        assert answer_grants(deployment, role) == expected, role
    for role in NOT_ANSWERING:
        assert answer_grants(deployment, role) == set(), role


def test_bedrock_answers_without_a_model_may_invoke_the_default_only() -> None:
    deployment = deployed({"DatabaseSecretArn": SECRET_ARN, "GenerationProvider": "bedrock"})
    # The template's default is the service's (GENERATION_MODEL unset): the model it is allowed to call.
    expected = {(action, model_arn(DEFAULT_GENERATION_MODELS["bedrock"])) for action in INVOKE}
    assert answer_grants(deployment, "RetrieveFunctionRole") == expected
    variables = deployment["RetrieveFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["GENERATION_PROVIDER"] == "bedrock" and "GENERATION_MODEL" not in variables


def test_the_default_extractive_answers_are_granted_nothing() -> None:
    deployment = deployed({"DatabaseSecretArn": SECRET_ARN})
    assert "GenerationModelsPolicy" not in deployment
    for role in ANSWERING + NOT_ANSWERING:
        assert answer_grants(deployment, role) == set(), role


def test_openai_answers_read_exactly_their_key_in_the_functions_that_answer() -> None:
    deployment = deployed(
        {
            "DatabaseSecretArn": SECRET_ARN,
            "GenerationProvider": "openai",
            "GenerationApiKeySecretArn": CHAT_KEY,
        }
    )
    expected = {("secretsmanager:GetSecretValue", CHAT_KEY), ("ssm:GetParameter", CHAT_KEY)}
    for role in ANSWERING:
        assert answer_grants(deployment, role) == expected, role
    for role in NOT_ANSWERING:
        assert answer_grants(deployment, role) == set(), role
    variables = deployment["McpFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["GENERATION_API_KEY_SECRET_ARN"] == CHAT_KEY
