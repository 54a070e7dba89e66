"""template.yaml as CloudFormation deploys it, for both database shapes: the SAM transform applied, then
conditions and intrinsics resolved for given parameters (tests/bundle/template.py). No build, no AWS."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import APIRouter

from retrieval_core.cache.json_cache import CACHE_ERROR_METRIC, JsonCache
from retrieval_core.db.migrations.steps import SCHEMA_VERSION
from retrieval_core.ratelimit.counters import RateCounterError
from retrieval_core.ratelimit.limiter import RATE_LIMIT_ERROR_METRIC, RateLimiter
from retrieval_core.ratelimit.window import RateLimit
from tests.conftest import EVENTS_DIR
from tests.template import (
    API_KEY_SECRET_ARN,
    PARAMETERS,
    PSEUDO,
    SECRET_ARN,
    aws_managed_policies,
    deploy,
    deployed,
    grants,
    lint,
    resource_key,
    role_statements,
    rules_refusing,
    shape,
    source,
)

SHAPES = pytest.mark.parametrize("create_database", [True, False], ids=["created-database", "your-database"])

FUNCTIONS = (
    "RetrieveFunction",
    "SimilaritySearchFunction",
    "ResolveStoreFunction",
    "DocumentsFunction",
    "McpFunction",
    "RetrieveQueueFunction",
    "IngestFunction",
    "MigrateFunction",
)
# The functions that embed text: the query side and the write side.
EMBEDDING_FUNCTIONS = (
    "RetrieveFunction",
    "RetrieveQueueFunction",
    "DocumentsFunction",
    "IngestFunction",
    "McpFunction",
)
RERANKING_FUNCTIONS = ("RetrieveFunction", "RetrieveQueueFunction")

# Every function reads and writes the answer cache, and nothing else in DynamoDB.
CACHE_GRANTS = {(f"dynamodb:{action}", "CacheTable.Arn") for action in ("GetItem", "PutItem")}
# The HTTP functions also count requests there (docs/operations.md), on the ratelimit# items only.
RATE_LIMIT_GRANT = ("dynamodb:UpdateItem", "CacheTable.Arn")
HTTP_FUNCTIONS = (
    "RetrieveFunction",
    "SimilaritySearchFunction",
    "ResolveStoreFunction",
    "DocumentsFunction",
    "McpFunction",
)


def environment(resources: dict[str, Any], function: str) -> dict[str, Any]:
    variables: dict[str, Any] = resources[function]["Properties"]["Environment"]["Variables"]
    return variables


def of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in resources.items() if r["Type"] == kind}


def test_every_function_description_fits_lambdas_limit() -> None:
    # Lambda refuses a function description over 256 characters at deploy time; cfn-lint does not check.
    functions = {
        name: resource["Properties"].get("Description", "")
        for name, resource in source()["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    assert functions and {name: len(text) for name, text in functions.items() if len(text) > 256} == {}


def test_secret_and_bedrock_grant_only_that_secret_and_that_model() -> None:
    resources = deployed(
        {
            "DatabaseSecretArn": SECRET_ARN,
            "EmbeddingProvider": "bedrock",
            "EmbeddingModel": "amazon.titan-embed-text-v2:0",
            "EmbeddingDimension": "1024",
        }
    )
    model = "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0"
    assert grants(role_statements(resources, "RetrieveFunctionRole")) == CACHE_GRANTS | {
        RATE_LIMIT_GRANT,
        ("secretsmanager:GetSecretValue", SECRET_ARN),
        ("bedrock:InvokeModel", model),
    }
    # Similarity search never embeds text: no Bedrock access.
    assert grants(role_statements(resources, "SimilaritySearchFunctionRole")) == CACHE_GRANTS | {
        RATE_LIMIT_GRANT,
        ("secretsmanager:GetSecretValue", SECRET_ARN),
    }
    for role in ("RetrieveFunctionRole", "SimilaritySearchFunctionRole"):
        assert aws_managed_policies(resources, role) == {
            "AWSLambdaBasicExecutionRole",
            "AWSLambdaVPCAccessExecutionRole",
            "AWSXrayWriteOnlyAccess",
        }
    # Store resolution never embeds and never deletes: the cache's GetItem and PutItem and the secret.
    assert grants(role_statements(resources, "ResolveStoreFunctionRole")) == {
        ("dynamodb:GetItem", "CacheTable.Arn"),
        ("dynamodb:PutItem", "CacheTable.Arn"),
        RATE_LIMIT_GRANT,
        ("secretsmanager:GetSecretValue", SECRET_ARN),
    }
    env = environment(resources, "RetrieveFunction")
    assert env["DATABASE_SECRET_ARN"] == SECRET_ARN and env["EMBEDDING_PROVIDER"] == "bedrock"
    assert "DATABASE_USER" not in env and "OPENAI_API_KEY" not in env
    assert "GEMINI_API_KEY_SECRET_ARN" not in env


def test_only_the_http_functions_count_requests_and_only_on_the_rate_limit_items() -> None:
    resources = deployed({"DatabaseSecretArn": SECRET_ARN})
    for function in FUNCTIONS:
        statements = role_statements(resources, f"{function}Role")
        counting = [s for s in statements if RATE_LIMIT_GRANT in grants([s])]
        if function not in HTTP_FUNCTIONS:
            assert counting == [], function
            continue
        assert len(counting) == 1, function
        only_counters = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ratelimit#*"]}}
        assert counting[0]["Condition"] == only_counters
        env = environment(resources, function)
        assert (str(env["RATE_LIMIT_REQUESTS"]), str(env["RATE_LIMIT_WINDOW_S"])) == ("600", "60")


GEMINI_SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/gemini-XyZ123"


def test_the_gemini_key_secret_is_readable_by_the_gemini_functions_only() -> None:
    resources = deployed({"DatabaseSecretArn": SECRET_ARN, "GeminiApiKeySecretArn": GEMINI_SECRET_ARN})
    gemini_grant = ("secretsmanager:GetSecretValue", GEMINI_SECRET_ARN)
    for name in ("RetrieveFunction", "ResolveStoreFunction"):
        assert gemini_grant in grants(role_statements(resources, f"{name}Role"))
        assert environment(resources, name)["GEMINI_API_KEY_SECRET_ARN"] == GEMINI_SECRET_ARN
    for name in ("SimilaritySearchFunction", "RetrieveQueueFunction"):
        assert gemini_grant not in grants(role_statements(resources, f"{name}Role"))
        assert "GEMINI_API_KEY_SECRET_ARN" not in environment(resources, name)


def test_iam_auth_grants_rds_db_connect_for_that_user_only() -> None:
    resources = deployed(
        {"DatabaseIamAuth": "true", "DatabaseUser": "retrieval_app", "DatabaseResourceId": "prx-0abc123def"}
    )
    connect = ("rds-db:connect", "arn:aws:rds-db:us-east-1:123456789012:dbuser:prx-0abc123def/retrieval_app")
    for role in ("RetrieveFunctionRole", "SimilaritySearchFunctionRole"):
        # Provider openai without a key: nothing to read for it; no secret: no Secrets Manager.
        assert grants(role_statements(resources, role)) == CACHE_GRANTS | {RATE_LIMIT_GRANT, connect}
    assert connect in grants(role_statements(resources, "ResolveStoreFunctionRole"))
    env = environment(resources, "SimilaritySearchFunction")
    assert env["DATABASE_IAM_AUTH"] == "true" and env["DATABASE_USER"] == "retrieval_app"
    assert "DATABASE_SECRET_ARN" not in env


@pytest.mark.parametrize(
    ("issuer", "audience", "protected"),
    [
        ("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC123", "7h1s1sacl1ent1d", True),
        ("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC123", "", False),
        ("", "", False),
    ],
    ids=["issuer-and-audience", "issuer-only", "none"],
)
def test_jwt_authorizer_guards_the_retrieval_routes_only_when_issuer_and_audience_are_set(
    issuer: str, audience: str, protected: bool
) -> None:
    resources = deployed({"JwtIssuer": issuer, "JwtAudience": audience, "DatabaseSecretArn": SECRET_ARN})
    body = resources["HttpApi"]["Properties"]["Body"]
    paths = body["paths"]
    # Every route but health and the console's files, including those a function's event adds (a route
    # missing from the definition body would be served without the authorizer).
    public = {"/api/v1/health", "/console", "/console/{proxy+}"}
    routes = [(path, method) for path, item in paths.items() if path not in public for method in item]
    assert ("/mcp", "post") in routes and ("/api/v1/stores/resolve", "get") in routes
    for path, method in routes:
        operation = paths[path][method]
        assert ("security" in operation) is protected, (path, method)
        if protected:
            assert operation["security"] == [{"JwtAuthorizer": []}]
    # Health stays open for probes, which may ask with GET or HEAD; the console's pages hold no data, and
    # the API calls they make carry the user's token.
    for method in ("get", "head"):
        assert "security" not in paths["/api/v1/health"][method]
    assert "security" not in paths["/console"]["get"] and "security" not in paths["/console/{proxy+}"]["get"]
    if protected:
        authorizer = body["components"]["securitySchemes"]["JwtAuthorizer"]["x-amazon-apigateway-authorizer"]
        assert authorizer["type"] == "jwt"
        assert authorizer["jwtConfiguration"] == {"issuer": issuer, "audience": [audience]}
    else:
        assert "components" not in body


def test_api_key_secret_reaches_only_the_http_functions_with_read_access_to_that_secret() -> None:
    resources = deployed({"ApiKeySecretArn": API_KEY_SECRET_ARN, "DatabaseSecretArn": SECRET_ARN})
    for name in ("RetrieveFunction", "SimilaritySearchFunction", "ResolveStoreFunction"):
        assert environment(resources, name)["API_KEY_SECRET_ARN"] == API_KEY_SECRET_ARN
        assert ("secretsmanager:GetSecretValue", API_KEY_SECRET_ARN) in grants(
            role_statements(resources, f"{name}Role")
        )
    # The queue function has no HTTP route, so no reason to read the key list.
    assert ("secretsmanager:GetSecretValue", API_KEY_SECRET_ARN) not in grants(
        role_statements(resources, "RetrieveQueueFunctionRole")
    )
    without = deployed({"DatabaseSecretArn": SECRET_ARN})
    for name in ("RetrieveFunction", "SimilaritySearchFunction", "ResolveStoreFunction"):
        assert "API_KEY_SECRET_ARN" not in environment(without, name)
        assert ("secretsmanager:GetSecretValue", API_KEY_SECRET_ARN) not in grants(
            role_statements(without, f"{name}Role")
        )


OPEN_API_REFUSED = "Set ApiKeySecretArn, or JwtIssuer and JwtAudience (or both): the API must not be open."
ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC123"


@pytest.mark.parametrize(
    ("auth", "refused"),
    [
        ({}, True),
        ({"JwtIssuer": ISSUER}, True),
        ({"JwtAudience": "7h1s1sacl1ent1d"}, True),
        ({"ApiKeySecretArn": API_KEY_SECRET_ARN}, False),
        ({"JwtIssuer": ISSUER, "JwtAudience": "7h1s1sacl1ent1d"}, False),
        (
            {"JwtIssuer": ISSUER, "JwtAudience": "7h1s1sacl1ent1d", "ApiKeySecretArn": API_KEY_SECRET_ARN},
            False,
        ),
    ],
    ids=["none", "issuer-only", "audience-only", "api-key", "jwt", "both"],
)
def test_the_template_never_deploys_an_open_api_it_needs_api_keys_or_jwt(
    auth: dict[str, str], refused: bool
) -> None:
    broken = rules_refusing({"DatabaseSecretArn": SECRET_ARN, **auth})
    assert broken == ({OPEN_API_REFUSED} if refused else set())


def test_jwt_auth_its_stores_claim_and_the_queue_stores_reach_the_functions() -> None:
    with_jwt = deployed(
        {
            "JwtIssuer": ISSUER,
            "JwtAudience": "7h1s1sacl1ent1d",
            "JwtStoresClaim": "custom:stores",
            "QueueStores": "docs,faq",
            "DatabaseSecretArn": SECRET_ARN,
        }
    )
    for name in ("RetrieveFunction", "SimilaritySearchFunction", "ResolveStoreFunction"):
        env = environment(with_jwt, name)
        assert env["JWT_AUTH"] == "true" and env["JWT_STORES_CLAIM"] == "custom:stores"
    assert environment(with_jwt, "RetrieveQueueFunction")["QUEUE_STORES"] == "docs,faq"
    keys_only = deployed({"ApiKeySecretArn": API_KEY_SECRET_ARN, "DatabaseSecretArn": SECRET_ARN})
    env = environment(keys_only, "RetrieveFunction")
    assert env["JWT_AUTH"] == "false" and env["JWT_STORES_CLAIM"] == "retrieval_stores"
    assert environment(keys_only, "RetrieveQueueFunction")["QUEUE_STORES"] == "*"
    for name in ("RetrieveFunction", "SimilaritySearchFunction", "ResolveStoreFunction"):
        assert "QUEUE_STORES" not in environment(keys_only, name)


def test_snapstart_applies_because_the_api_invokes_the_published_alias() -> None:
    resources = deployed({"DatabaseSecretArn": SECRET_ARN})
    for name in ("RetrieveFunction", "SimilaritySearchFunction", "ResolveStoreFunction"):
        props = resources[name]["Properties"]
        assert props["SnapStart"] == {"ApplyOn": "PublishedVersions"}
        assert props["Runtime"] == "python3.12" and props["Architectures"] == ["x86_64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["VpcConfig"] == {"SubnetIds": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]}
        assert any(
            r["Type"] == "AWS::Lambda::Alias"
            and r["Properties"]["Name"] == "live"
            and r["Properties"]["FunctionName"] == {"Ref": name}
            for r in resources.values()
        )
    # SnapStart only covers published versions: every route must call the alias, never $LATEST.
    uris = [
        operation["x-amazon-apigateway-integration"]["uri"]
        for item in resources["HttpApi"]["Properties"]["Body"]["paths"].values()
        for operation in item.values()
    ]
    assert len(uris) == 23  # every route of the HTTP API
    assert all(
        re.search(
            r"\$\{(RetrieveFunction|SimilaritySearchFunction|ResolveStoreFunction|DocumentsFunction|McpFunction)Aliaslive\}",
            str(uri),
        )
        for uri in uris
    )


def test_health_answers_head_on_the_retrieve_function() -> None:
    resources = deployed({"DatabaseSecretArn": SECRET_ARN})
    health = resources["HttpApi"]["Properties"]["Body"]["paths"]["/api/v1/health"]
    assert set(health) == {"get", "head"}
    assert (
        health["head"]["x-amazon-apigateway-integration"] == health["get"]["x-amazon-apigateway-integration"]
    )
    assert "RetrieveFunctionAliaslive" in str(health["head"]["x-amazon-apigateway-integration"]["uri"])


@SHAPES
@pytest.mark.parametrize("retention", [None, "365"], ids=["default-retention", "365-days"])
def test_every_function_logs_to_its_own_log_group_with_the_chosen_retention(
    create_database: bool, retention: str | None
) -> None:
    parameters = shape(create_database) | ({"LogRetentionDays": retention} if retention else {})
    resources = deployed(parameters)
    assert set(of_type(resources, "AWS::Lambda::Function")) == set(FUNCTIONS)
    groups = []
    for function in FUNCTIONS:
        # The function names its group, so the group exists before Lambda could create one itself.
        reference = resources[function]["Properties"]["LoggingConfig"]["LogGroup"]
        group = resources[reference["Ref"]]
        assert group["Type"] == "AWS::Logs::LogGroup"
        assert group["Properties"]["RetentionInDays"] == (retention or "30")
        groups.append(reference["Ref"])
    assert len(set(groups)) == len(FUNCTIONS)
    assert set(groups) == set(of_type(resources, "AWS::Logs::LogGroup"))


EMBEDDING_KEY = "sk-test-SECRET-embedding-4f1c"
RERANKER_KEY = "rr-test-SECRET-reranker-9b2e"
RERANKER_URL = "https://reranker.internal.example/v1/rerank"


def _environments(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: environment(resources, name) for name in of_type(resources, "AWS::Lambda::Function")}


@SHAPES
@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_api_keys_given_as_values_land_in_secrets_never_in_an_environment(
    create_database: bool, provider: str
) -> None:
    resources = deployed(
        shape(create_database)
        | {
            "EmbeddingProvider": provider,
            "EmbeddingApiKey": EMBEDDING_KEY,
            "RerankerServiceUrl": RERANKER_URL,
            "RerankerApiKey": RERANKER_KEY,
        }
    )
    environments = _environments(resources)
    for name, env in environments.items():
        assert not {"OPENAI_API_KEY", "GEMINI_API_KEY", "RERANKER_API_KEY"} & set(env), name
        for value in env.values():
            assert EMBEDDING_KEY not in json.dumps(value) and RERANKER_KEY not in json.dumps(value), name
    # The values are in the two created secrets, and nowhere else in the deployed template.
    secrets = of_type(resources, "AWS::SecretsManager::Secret")
    assert {name: s["Properties"]["SecretString"] for name, s in secrets.items()} == {
        "EmbeddingApiKeySecret": EMBEDDING_KEY,
        "RerankerApiKeySecret": RERANKER_KEY,
    }
    rest = json.dumps({name: r for name, r in resources.items() if name not in secrets})
    assert EMBEDDING_KEY not in rest and RERANKER_KEY not in rest

    embedding_secret, reranker_secret = {"Ref": "EmbeddingApiKeySecret"}, {"Ref": "RerankerApiKeySecret"}
    for name, env in environments.items():
        statements = grants(role_statements(resources, f"{name}Role"))
        reads_embedding_key = ("secretsmanager:GetSecretValue", resource_key(embedding_secret)) in statements
        reads_reranker_key = ("secretsmanager:GetSecretValue", resource_key(reranker_secret)) in statements
        if name in EMBEDDING_FUNCTIONS:
            assert env["EMBEDDING_API_KEY_SECRET_ARN"] == embedding_secret and reads_embedding_key, name
        else:
            assert "EMBEDDING_API_KEY_SECRET_ARN" not in env and not reads_embedding_key, name
        if name in RERANKING_FUNCTIONS:
            assert env["RERANKER_API_KEY_SECRET_ARN"] == reranker_secret and reads_reranker_key, name
        else:
            assert "RERANKER_API_KEY_SECRET_ARN" not in env and not reads_reranker_key, name


EMBEDDING_KEY_PARAMETER = "arn:aws:ssm:us-east-1:123456789012:parameter/retrieval/openai-key"
RERANKER_KEY_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/reranker-Q1w2E3"


@SHAPES
def test_key_arns_are_passed_through_and_no_secret_is_created(create_database: bool) -> None:
    resources = deployed(
        shape(create_database)
        | {
            "EmbeddingApiKeySecretArn": EMBEDDING_KEY_PARAMETER,
            "RerankerServiceUrl": RERANKER_URL,
            "RerankerApiKeySecretArn": RERANKER_KEY_SECRET,
        }
    )
    assert not of_type(resources, "AWS::SecretsManager::Secret")
    for name in EMBEDDING_FUNCTIONS:
        assert environment(resources, name)["EMBEDDING_API_KEY_SECRET_ARN"] == EMBEDDING_KEY_PARAMETER
        # An SSM SecureString parameter: read with ssm:GetParameter.
        assert ("ssm:GetParameter", EMBEDDING_KEY_PARAMETER) in grants(
            role_statements(resources, f"{name}Role")
        )
    for name in RERANKING_FUNCTIONS:
        assert environment(resources, name)["RERANKER_API_KEY_SECRET_ARN"] == RERANKER_KEY_SECRET
        assert ("secretsmanager:GetSecretValue", RERANKER_KEY_SECRET) in grants(
            role_statements(resources, f"{name}Role")
        )
    for name in ("SimilaritySearchFunction", "ResolveStoreFunction", "MigrateFunction"):
        granted = {resource for _, resource in grants(role_statements(resources, f"{name}Role"))}
        assert not {EMBEDDING_KEY_PARAMETER, RERANKER_KEY_SECRET} & granted, name


def test_bedrock_signs_with_the_role_so_a_given_key_is_neither_stored_nor_passed() -> None:
    resources = deployed(shape(True) | {"EmbeddingProvider": "bedrock", "EmbeddingApiKey": EMBEDDING_KEY})
    assert not of_type(resources, "AWS::SecretsManager::Secret")
    assert EMBEDDING_KEY not in json.dumps(resources)
    assert all("EMBEDDING_API_KEY_SECRET_ARN" not in env for env in _environments(resources).values())


def test_a_key_is_given_as_an_arn_or_as_a_value_not_both() -> None:
    refused = rules_refusing(
        shape(True)
        | {
            "EmbeddingApiKeySecretArn": EMBEDDING_KEY_PARAMETER,
            "EmbeddingApiKey": EMBEDDING_KEY,
            "RerankerApiKeySecretArn": RERANKER_KEY_SECRET,
            "RerankerApiKey": RERANKER_KEY,
        }
    )
    assert refused == {
        "Give EmbeddingApiKeySecretArn or EmbeddingApiKey, not both.",
        "Give RerankerApiKeySecretArn or RerankerApiKey, not both.",
    }
    assert source()["Parameters"]["EmbeddingApiKey"]["NoEcho"] is True
    assert source()["Parameters"]["RerankerApiKey"]["NoEcho"] is True


def _alarms_on(resources: dict[str, Any], namespace: str, metric: str) -> list[dict[str, Any]]:
    return [
        alarm["Properties"]
        for alarm in of_type(resources, "AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("Namespace") == namespace
        and alarm["Properties"].get("MetricName") == metric
    ]


@SHAPES
def test_every_consumed_queue_dead_letters_into_a_queue_whose_depth_alarms(create_database: bool) -> None:
    resources = deployed(shape(create_database))
    consumed = {
        mapping["Properties"]["EventSourceArn"].removesuffix(".Arn")
        for mapping in of_type(resources, "AWS::Lambda::EventSourceMapping").values()
    }
    assert consumed == {"RequestQueue", "IngestQueue"}
    for queue in consumed:
        redrive = resources[queue]["Properties"]["RedrivePolicy"]
        dead_letter_queue = redrive["deadLetterTargetArn"].removesuffix(".Arn")
        assert resources[dead_letter_queue]["Type"] == "AWS::SQS::Queue" and redrive["maxReceiveCount"] == 3
        (alarm,) = [
            a
            for a in _alarms_on(resources, "AWS/SQS", "ApproximateNumberOfMessagesVisible")
            if a["Dimensions"] == [{"Name": "QueueName", "Value": f"{dead_letter_queue}.QueueName"}]
        ]
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold" and alarm["Threshold"] == 0
        assert alarm["Statistic"] == "Maximum" and alarm["TreatMissingData"] == "notBreaching"


@SHAPES
def test_unreadable_objects_alarm_watches_the_metric_the_ingest_function_emits(create_database: bool) -> None:
    resources = deployed(shape(create_database))
    env = environment(resources, "IngestFunction")
    (alarm,) = _alarms_on(resources, env["POWERTOOLS_METRICS_NAMESPACE"], "UnreadableObjects")
    # Powertools Metrics adds the default dimension "service", named POWERTOOLS_SERVICE_NAME.
    assert alarm["Dimensions"] == [{"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}]
    assert alarm["Statistic"] == "Sum" and alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


ALARM_EMAIL = "oncall@example.com"


@SHAPES
def test_with_an_alarm_email_every_alarm_notifies_an_encrypted_topic(create_database: bool) -> None:
    resources = deployed(shape(create_database) | {"AlarmEmail": ALARM_EMAIL})
    (topic_name,) = of_type(resources, "AWS::SNS::Topic")
    topic = resources[topic_name]["Properties"]
    (subscription,) = of_type(resources, "AWS::SNS::Subscription").values()
    assert subscription["Properties"] == {
        "TopicArn": {"Ref": topic_name},
        "Protocol": "email",
        "Endpoint": ALARM_EMAIL,
    }
    # CloudWatch may use the topic's key; the AWS-managed alias/aws/sns key would refuse it.
    key = resources[topic["KmsMasterKeyId"]["Ref"]]
    assert key["Type"] == "AWS::KMS::Key"
    (cloudwatch,) = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert set(cloudwatch["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    assert len(alarms) == (9 if create_database else 8)
    for name, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_name}], name
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic_name}], name


@SHAPES
def test_without_an_alarm_email_there_is_no_topic_and_alarms_only_change_state(create_database: bool) -> None:
    resources = deployed(shape(create_database))
    assert not of_type(resources, "AWS::SNS::Topic") and not of_type(resources, "AWS::KMS::Key")
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    assert alarms
    for name, alarm in alarms.items():
        assert "AlarmActions" not in alarm["Properties"] and "OKActions" not in alarm["Properties"], name


def test_the_api_alarms_watch_the_default_stage_error_rate_and_p99_latency() -> None:
    resources = deployed(shape(True) | {"LatencyAlarmMs": "3000"})
    stage = [{"Name": "ApiId", "Value": {"Ref": "HttpApi"}}, {"Name": "Stage", "Value": "$default"}]
    error_rate = resources["ApiServerErrorRateAlarm"]["Properties"]
    queries = {query["Id"]: query for query in error_rate["Metrics"]}
    assert [q["Id"] for q in error_rate["Metrics"] if q["ReturnData"]] == ["errorRate"]
    for query_id, metric in (("errors", "5xx"), ("requests", "Count")):
        stat = queries[query_id]["MetricStat"]
        assert stat["Metric"] == {"Namespace": "AWS/ApiGateway", "MetricName": metric, "Dimensions": stage}
        assert stat["Stat"] == "Sum" and stat["Period"] == 300
    # A percentage of the requests, and none while there are too few requests to tell.
    assert queries["errorRate"]["Expression"] == "IF(requests >= 20, 100 * errors / requests, 0)"
    assert error_rate["Threshold"] == 5 and error_rate["TreatMissingData"] == "notBreaching"
    (latency,) = _alarms_on(resources, "AWS/ApiGateway", "Latency")
    assert latency["Dimensions"] == stage
    assert latency["ExtendedStatistic"] == "p99" and latency["Threshold"] == "3000"

    throttles = resources["FunctionThrottlesAlarm"]["Properties"]["Metrics"]
    watched = {
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Ref"]
        for q in throttles
        if "MetricStat" in q and q["MetricStat"]["Metric"]["MetricName"] == "Throttles"
    }
    assert watched == set(FUNCTIONS)
    (total,) = [q for q in throttles if q["ReturnData"]]
    assert total["Expression"].startswith("SUM([") and total["Expression"].count(",") == len(FUNCTIONS) - 1


# The alarms on what fails open: a Metrics Insights query summing the metric over every dimension set
# (FROM the namespace, not SCHEMA(...), which would keep one exact set) of one service.
FAIL_OPEN_QUERY = re.compile(r"SELECT SUM\((\w+)\) FROM (\w+) WHERE (\w+) = '([^']*)'")
FAIL_OPEN_ALARMS = {
    "RateLimitErrorAlarm": (RATE_LIMIT_ERROR_METRIC, HTTP_FUNCTIONS),  # only HTTP requests are counted
    "CacheErrorAlarm": (CACHE_ERROR_METRIC, FUNCTIONS),
}


def fail_open_query(resources: dict[str, Any], alarm: str) -> tuple[str, str, dict[str, str]]:
    """The metric name, namespace and dimension values an alarm's Metrics Insights query sums."""
    (query,) = resources[alarm]["Properties"]["Metrics"]
    assert query["ReturnData"] is True and query["Period"] == 300
    found = FAIL_OPEN_QUERY.fullmatch(query["Expression"])
    assert found is not None, query["Expression"]
    metric, namespace, dimension, value = found.groups()
    return metric, namespace, {dimension: value}


@SHAPES
@pytest.mark.parametrize("alarm", sorted(FAIL_OPEN_ALARMS))
def test_the_fail_open_alarms_sum_the_metric_the_code_counts_as_the_functions_name_it(
    create_database: bool, alarm: str
) -> None:
    resources = deployed(shape(create_database))
    metric, namespace, dimensions = fail_open_query(resources, alarm)
    expected_metric, emitting = FAIL_OPEN_ALARMS[alarm]
    assert metric == expected_metric
    for function in emitting:
        env = environment(resources, function)
        # Powertools names the namespace and the default dimension `service` from these variables.
        assert namespace == env["POWERTOOLS_METRICS_NAMESPACE"], function
        assert dimensions == {"service": env["POWERTOOLS_SERVICE_NAME"]}, function
    props = resources[alarm]["Properties"]
    # Failing in two 5-minute periods in a row, not one blip.
    assert props["ComparisonOperator"] == "GreaterThanThreshold" and props["Threshold"] == 0
    assert props["EvaluationPeriods"] == 2 and props["DatapointsToAlarm"] == 2
    assert props["TreatMissingData"] == "notBreaching"


@SHAPES
def test_the_alarms_and_dashboard_read_this_stacks_service_metrics_only(create_database: bool) -> None:
    # Two stacks in one account and region emit into the same namespace: each reads its own `service`.
    resources = deployed(shape(create_database))
    stack = PSEUDO["AWS::StackName"]
    for function in FUNCTIONS:
        assert environment(resources, function)["POWERTOOLS_SERVICE_NAME"] == stack, function
    for alarm in FAIL_OPEN_ALARMS:
        assert fail_open_query(resources, alarm)[2] == {"service": stack}, alarm
    unreadable = resources["UnreadableObjectsAlarm"]["Properties"]
    assert unreadable["Namespace"] == "RetrievalService"
    assert unreadable["Dimensions"] == [{"Name": "service", "Value": stack}]
    body = json.loads(resources["Dashboard"]["Properties"]["DashboardBody"])
    lines = [line for widget in body["widgets"] for line in widget["properties"]["metrics"]]
    searches = [
        line[0]["expression"]
        for line in lines
        if isinstance(line[0], dict) and "SEARCH(" in line[0]["expression"]
    ]
    ours = [line for line in lines if line[0] == "RetrievalService"]
    assert searches and ours
    for expression in searches:
        assert "RetrievalService" in expression and f'service="{stack}"' in expression, expression
    for line in ours:
        assert line[2:4] == ["service", stack], line


@SHAPES
@pytest.mark.parametrize("days", [None, "365"], ids=["default-retention", "365-days"])
def test_the_maintenance_keeps_the_audit_trail_the_chosen_days(
    create_database: bool, days: str | None
) -> None:
    from retrieval_core.settings import Settings

    parameters = shape(create_database) | ({"AuditRetentionDays": days} if days else {})
    env = environment(deployed(parameters), "MigrateFunction")
    # The migrate function runs the maintenance that deletes old audit rows; Settings reads the variable.
    assert env["AUDIT_RETENTION_DAYS"] == (days or "90")
    assert Settings(
        _env_file=None, audit_retention_days=env["AUDIT_RETENTION_DAYS"]
    ).audit_retention_days == int(days or 90)


class UnreachableDynamoDB:
    """The cache backend and the rate counter of a DynamoDB table that cannot be reached."""

    def get(self, key: str) -> bytes | None:
        from retrieval_core.exceptions import CacheUnavailableError

        raise CacheUnavailableError("DynamoDB GetItem failed: could not connect")

    def take(self, key: str, cost: int, limit: int, expires_at: int) -> bool:
        raise RateCounterError("DynamoDB UpdateItem failed: could not connect")


def cache_fails_open() -> None:
    """A cache read with the table away: a miss, counted."""
    JsonCache(UnreachableDynamoDB(), "search").get("answer")  # type: ignore[arg-type]  # get is all it uses


def request_fails_open() -> None:
    """An HTTP request with the table away: the rate limit and the cache both fail open."""
    RateLimiter(UnreachableDynamoDB(), RateLimit(600, 60), shared=True).check("key:subject", None)
    cache_fails_open()


def emitted(
    invoke: Callable[[dict[str, Any], Any], Any], event: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> list[dict[str, Any]]:
    """The EMF documents a handler prints for `event`."""
    from types import SimpleNamespace

    capsys.readouterr()
    context = SimpleNamespace(
        function_name="retrieval-test",
        memory_limit_in_mb=1024,
        aws_request_id="req",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:retrieval-test",
    )
    invoke(event, context)
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]


def metric_names(document: dict[str, Any]) -> set[str]:
    """The metrics an EMF document carries."""
    return {m["Name"] for directive in document["_aws"]["CloudWatchMetrics"] for m in directive["Metrics"]}


def test_the_fail_open_alarms_see_every_dimension_set_the_handlers_emit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.lambdas.setup import build_sqs_handler

    resources = deployed(shape(False))
    env = environment(resources, "DocumentsFunction")
    for name in ("POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_SERVICE_NAME"):
        monkeypatch.setenv(name, env[name])
    router = APIRouter()
    router.add_api_route("/fail-open", request_fails_open, methods=["GET"])
    http_handler = build_handler(router, embeds=False)

    class FailingOpenBatch:
        def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
            cache_fails_open()
            return {"batchItemFailures": []}

    queue_handler = build_sqs_handler(lambda tools: FailingOpenBatch())
    # Set only now: at handler build time it would move the core's loggers off the root logger.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "retrieval-test")

    request = json.loads((EVENTS_DIR / "health.json").read_text())
    request["routeKey"] = request["requestContext"]["routeKey"] = "GET /fail-open"
    request["rawPath"] = request["requestContext"]["http"]["path"] = "/fail-open"
    batch = json.loads((EVENTS_DIR / "sqs-retrieve.json").read_text())
    dimension_sets = set()
    # Only HTTP requests are rate-limited; both kinds of handler use the cache.
    runs = ((http_handler, request, sorted(FAIL_OPEN_ALARMS)), (queue_handler, batch, ["CacheErrorAlarm"]))
    for invoke, event, alarms in runs:
        documents = emitted(invoke, event, capsys)
        for alarm in alarms:
            metric, namespace, dimensions = fail_open_query(resources, alarm)
            (document,) = [d for d in documents if metric in metric_names(d)]
            (directive,) = document["_aws"]["CloudWatchMetrics"]
            assert directive["Namespace"] == namespace
            (names,) = directive["Dimensions"]
            assert set(dimensions) <= set(names)
            assert {name: document[name] for name in dimensions} == dimensions
            dimension_sets.add(frozenset(names))
    # Two sets: one alarm per set would miss the other, hence queries rather than a metric each.
    assert dimension_sets == {frozenset({"service", "route"}), frozenset({"service"})}


@pytest.mark.parametrize("egress", ["NatGateway", "VpcEndpoints"])
def test_the_created_database_is_not_reachable_from_the_internet(egress: str) -> None:
    resources = deployed(shape(True) | {"VpcEgress": egress})
    private = [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}]
    assert resources["DatabaseInstance"]["Properties"]["PubliclyAccessible"] is False
    assert resources["DatabaseSubnetGroup"]["Properties"]["SubnetIds"] == private
    assert resources["DatabaseProxy"]["Properties"]["VpcSubnetIds"] == private
    assert resources["RetrieveFunction"]["Properties"]["VpcConfig"]["SubnetIds"] == private
    zones = set()
    for subnet in private:
        props = resources[subnet["Ref"]]["Properties"]
        assert props["MapPublicIpOnLaunch"] is False
        zones.add(json.dumps(props["AvailabilityZone"]))
        (association,) = [
            a["Properties"]
            for a in of_type(resources, "AWS::EC2::SubnetRouteTableAssociation").values()
            if a["Properties"]["SubnetId"] == subnet
        ]
        routes = [
            r["Properties"]
            for r in of_type(resources, "AWS::EC2::Route").values()
            if r["Properties"]["RouteTableId"] == association["RouteTableId"]
        ]
        # Out through the NAT gateway at most; never a route to (or from) the internet gateway.
        assert all("GatewayId" not in route for route in routes)
        expected = [{"Ref": "NatGateway"}] if egress == "NatGateway" else []
        assert [route.get("NatGatewayId") for route in routes] == expected
    assert len(zones) == 2
    if egress == "VpcEndpoints":
        assert not of_type(resources, "AWS::EC2::InternetGateway") and not of_type(
            resources, "AWS::EC2::NatGateway"
        )

    ingress = {
        name: group["Properties"].get("SecurityGroupIngress", [])
        for name, group in of_type(resources, "AWS::EC2::SecurityGroup").items()
    }
    assert not of_type(resources, "AWS::EC2::SecurityGroupIngress")
    for rules in ingress.values():
        for rule in rules:
            assert "CidrIp" not in rule and "CidrIpv6" not in rule, rule  # no 0.0.0.0/0, ::/0, nor any range

    def admits(group: str) -> list[tuple[str, int, int, Any]]:
        return [
            (r["IpProtocol"], r["FromPort"], r["ToPort"], r["SourceSecurityGroupId"]) for r in ingress[group]
        ]

    assert admits("FunctionSecurityGroup") == []
    assert admits("ProxySecurityGroup") == [("tcp", 5432, 5432, {"Ref": "FunctionSecurityGroup"})]
    assert admits("MigrateSecurityGroup") == []
    # The proxy, and the migration signing in as the master (the proxy admits IAM users only).
    assert admits("DatabaseSecurityGroup") == [
        ("tcp", 5432, 5432, {"Ref": "ProxySecurityGroup"}),
        ("tcp", 5432, 5432, {"Ref": "MigrateSecurityGroup"}),
    ]
    assert resources["DatabaseCluster"]["Properties"]["VpcSecurityGroupIds"] == [
        {"Ref": "DatabaseSecurityGroup"}
    ]
    assert resources["DatabaseProxy"]["Properties"]["VpcSecurityGroupIds"] == [{"Ref": "ProxySecurityGroup"}]
    for function in FUNCTIONS[:-1]:
        assert resources[function]["Properties"]["VpcConfig"]["SecurityGroupIds"] == [
            {"Ref": "FunctionSecurityGroup"}
        ]
    assert resources["MigrateFunction"]["Properties"]["VpcConfig"]["SecurityGroupIds"] == [
        {"Ref": "FunctionSecurityGroup"},
        {"Ref": "MigrateSecurityGroup"},
    ]
    if egress == "VpcEndpoints":
        assert admits("EndpointSecurityGroup") == [("tcp", 443, 443, {"Ref": "FunctionSecurityGroup"})]
        services = {
            e["Properties"]["ServiceName"].rsplit(".", 1)[1]: e["Properties"]
            for e in of_type(resources, "AWS::EC2::VPCEndpoint").values()
        }
        assert set(services) == {
            "dynamodb",
            "s3",
            "secretsmanager",
            "ssm",
            "sqs",
            "bedrock-runtime",
            "bedrock-agent-runtime",
        }
        for name, endpoint in services.items():
            if endpoint["VpcEndpointType"] == "Interface":
                assert endpoint["SubnetIds"] == private and endpoint["PrivateDnsEnabled"] is True, name
            else:
                assert name in {"dynamodb", "s3"} and endpoint["RouteTableIds"] == [
                    {"Ref": "PrivateRouteTable"}
                ]
    else:
        assert set(ingress) == {
            "FunctionSecurityGroup",
            "MigrateSecurityGroup",
            "ProxySecurityGroup",
            "DatabaseSecurityGroup",
        }


def test_the_created_cluster_is_encrypted_pinned_and_keeps_a_final_snapshot() -> None:
    resources = deployed(shape(True) | {"DatabaseMinCapacity": "1", "DatabaseMaxCapacity": "8"})
    cluster = resources["DatabaseCluster"]
    assert cluster["DeletionPolicy"] == "Snapshot" and cluster["UpdateReplacePolicy"] == "Snapshot"
    props = cluster["Properties"]
    assert props["Engine"] == "aurora-postgresql"
    # Pinned to a version whose pgvector is 0.8 or newer (AWS added 0.8.0 in the 16.6-era releases).
    assert props["EngineVersion"] == "16.8"
    assert props["StorageEncrypted"] is True and props["ManageMasterUserPassword"] is True
    assert "MasterUserPassword" not in props
    assert props["MasterUsername"] == "retrieval"
    assert props["ServerlessV2ScalingConfiguration"] == {"MinCapacity": "1", "MaxCapacity": "8"}
    # The default database needs no creating; another name is created with the cluster.
    assert "DatabaseName" not in props
    named = deployed(shape(True) | {"DatabaseName": "rag"})["DatabaseCluster"]["Properties"]
    assert named["DatabaseName"] == "rag"
    instance = resources["DatabaseInstance"]["Properties"]
    assert instance["DBClusterIdentifier"] == {"Ref": "DatabaseCluster"}
    assert instance["DBInstanceClass"] == "db.serverless" and instance["Engine"] == "aurora-postgresql"


# Which role each function signs in as (docs/security.md, "Database roles").
SERVE_FUNCTIONS = (
    "RetrieveFunction",
    "SimilaritySearchFunction",
    "ResolveStoreFunction",
    "RetrieveQueueFunction",
)
WRITE_FUNCTIONS = ("DocumentsFunction", "McpFunction", "IngestFunction")
MASTER_SECRET = "DatabaseCluster.MasterUserSecret.SecretArn"
CLUSTER_ID = "DatabaseCluster.DBClusterResourceId"


def test_the_proxy_uses_end_to_end_iam_auth_and_holds_no_secret() -> None:
    resources = deployed(shape(True))
    proxy = resources["DatabaseProxy"]["Properties"]
    assert proxy["EngineFamily"] == "POSTGRESQL" and proxy["RequireTLS"] is True
    assert proxy["DefaultAuthScheme"] == "IAM_AUTH" and "Auth" not in proxy
    assert resources["DatabaseCluster"]["Properties"]["EnableIAMDatabaseAuthentication"] is True
    assert proxy["RoleArn"] == "DatabaseProxyRole.Arn"
    # The proxy signs in to the cluster as the two roles, and as nobody else (never the master).
    assert grants(role_statements(resources, "DatabaseProxyRole")) == {
        ("rds-db:connect", f"arn:aws:rds-db:us-east-1:123456789012:dbuser:{CLUSTER_ID}/postgres_{role}")
        for role in ("serve", "write")
    }
    target_group = resources["DatabaseProxyTargetGroup"]
    assert target_group["Properties"]["DBProxyName"] == {"Ref": "DatabaseProxy"}
    assert target_group["Properties"]["DBClusterIdentifiers"] == [{"Ref": "DatabaseCluster"}]
    assert target_group["DependsOn"] == "DatabaseInstance"
    for function in FUNCTIONS[:-1]:
        granted = {resource for _, resource in grants(role_statements(resources, f"{function}Role"))}
        assert MASTER_SECRET not in granted, function


@pytest.mark.parametrize("name", [None, "rag"], ids=["default-database", "named-database"])
def test_with_the_created_database_each_function_signs_in_as_its_own_role(name: str | None) -> None:
    resources = deployed(shape(True) | ({"DatabaseName": name} if name else {}))
    name = name or "postgres"
    # The proxy's resource id (prx-...) ends its ARN: arn:aws:rds:REGION:ACCOUNT:db-proxy:prx-...
    proxy_id = "Select(6, Split(':', DatabaseProxy.DBProxyArn))"
    for functions, role in ((SERVE_FUNCTIONS, "serve"), (WRITE_FUNCTIONS, "write")):
        user = f"{name}_{role}"
        connect = ("rds-db:connect", f"arn:aws:rds-db:us-east-1:123456789012:dbuser:{proxy_id}/{user}")
        for function in functions:
            env = environment(resources, function)
            database = {key: value for key, value in env.items() if key.startswith("DATABASE_")}
            assert database == {
                "DATABASE_HOST": "DatabaseProxy.Endpoint",
                "DATABASE_PORT": "5432",
                "DATABASE_NAME": name,
                "DATABASE_IAM_AUTH": "true",
                "DATABASE_USER": user,
            }, function
            statements = grants(role_statements(resources, f"{function}Role"))
            database_access = {g for g in statements if g[0].startswith(("rds-db:", "secretsmanager:"))}
            assert database_access - {("secretsmanager:GetSecretValue", API_KEY_SECRET_ARN)} == {connect}
    # The migration: the owner (the master), straight to the cluster with the master's secret; it sets
    # up the roles and grants them rds_iam.
    env = environment(resources, "MigrateFunction")
    assert {key: value for key, value in env.items() if key.startswith("DATABASE_")} == {
        "DATABASE_HOST": "DatabaseCluster.Endpoint.Address",
        "DATABASE_PORT": "5432",
        "DATABASE_NAME": name,
        "DATABASE_SECRET_ARN": MASTER_SECRET,
        "DATABASE_IAM_AUTH": "false",
        "DATABASE_ROLES": "true",
        "DATABASE_ROLES_IAM": "true",
    }
    assert grants(role_statements(resources, "MigrateFunctionRole")) == {
        ("secretsmanager:GetSecretValue", MASTER_SECRET)
    }
    assert resources["DatabaseSchema"]["Properties"]["Roles"] == f"{name}_serve,{name}_write"


ROLE_SECRETS = {
    "serve": "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/serve-AbCdEf",
    "write": "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/write-AbCdEf",
}


@pytest.mark.parametrize("credentials", ["secret", "iam"])
def test_with_your_database_per_role_credentials_reach_their_functions_only(credentials: str) -> None:
    if credentials == "secret":
        given = {
            "DatabaseServeSecretArn": ROLE_SECRETS["serve"],
            "DatabaseWriteSecretArn": ROLE_SECRETS["write"],
        }
        parameters = shape(False) | given
    else:
        given = {"DatabaseServeUser": "rag_serve", "DatabaseWriteUser": "rag_write"}
        parameters = shape(False) | {
            "DatabaseSecretArn": "",
            "DatabaseIamAuth": "true",
            "DatabaseUser": "rag_owner",
            "DatabaseResourceId": "prx-0abc123def",
        }
        parameters |= given
    assert rules_refusing(parameters) == set()
    resources = deployed(parameters)

    def access(function: str) -> set[tuple[str, str]]:
        return {
            g
            for g in grants(role_statements(resources, f"{function}Role"))
            if g[0].startswith(("rds-db:", "secretsmanager:")) and g[1] != API_KEY_SECRET_ARN
        }

    def expected(role: str) -> tuple[set[tuple[str, str]], str, str]:
        if credentials == "secret":
            return (
                {("secretsmanager:GetSecretValue", ROLE_SECRETS[role])},
                "DATABASE_SECRET_ARN",
                ROLE_SECRETS[role],
            )
        arn = f"arn:aws:rds-db:us-east-1:123456789012:dbuser:prx-0abc123def/rag_{role}"
        return {("rds-db:connect", arn)}, "DATABASE_USER", f"rag_{role}"

    for functions, role in ((SERVE_FUNCTIONS, "serve"), (WRITE_FUNCTIONS, "write")):
        statements, variable, value = expected(role)
        for function in functions:
            assert access(function) == statements, function
            assert environment(resources, function)[variable] == value, function
    owner = (
        {("secretsmanager:GetSecretValue", SECRET_ARN)}
        if credentials == "secret"
        else {("rds-db:connect", "arn:aws:rds-db:us-east-1:123456789012:dbuser:prx-0abc123def/rag_owner")}
    )
    assert access("MigrateFunction") == owner
    assert environment(resources, "MigrateFunction")["DATABASE_ROLES"] == "true"
    assert environment(resources, "MigrateFunction")["DATABASE_ROLES_IAM"] == "false"


def test_per_role_credentials_come_in_pairs_and_match_the_owners_kind() -> None:
    serve_only = shape(False) | {"DatabaseServeSecretArn": ROLE_SECRETS["serve"]}
    assert rules_refusing(serve_only) == {
        "Give DatabaseServeSecretArn and DatabaseWriteSecretArn together, or neither."
    }
    created = shape(True) | {"DatabaseServeUser": "a", "DatabaseWriteUser": "b"}
    refused = "DatabaseServeUser and DatabaseWriteUser go with DatabaseIamAuth (your database)."
    assert refused in rules_refusing(created)
    with_iam = shape(False) | {
        "DatabaseSecretArn": "",
        "DatabaseIamAuth": "true",
        "DatabaseUser": "u",
        "DatabaseResourceId": "prx-0abc",
        "DatabaseServeSecretArn": ROLE_SECRETS["serve"],
        "DatabaseWriteSecretArn": ROLE_SECRETS["write"],
    }
    refused = "DatabaseServeSecretArn and DatabaseWriteSecretArn go with DatabaseSecretArn (your database)."
    assert refused in rules_refusing(with_iam)


NETWORK_AND_DATABASE_TYPES = {
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EC2::RouteTable",
    "AWS::EC2::Route",
    "AWS::EC2::SubnetRouteTableAssociation",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::VPCGatewayAttachment",
    "AWS::EC2::EIP",
    "AWS::EC2::NatGateway",
    "AWS::EC2::SecurityGroup",
    "AWS::EC2::VPCEndpoint",
    "AWS::RDS::DBSubnetGroup",
    "AWS::RDS::DBCluster",
    "AWS::RDS::DBInstance",
    "AWS::RDS::DBProxy",
    "AWS::RDS::DBProxyTargetGroup",
}


@pytest.mark.parametrize("credentials", ["secret", "iam"])
def test_with_your_database_the_functions_get_todays_environment_and_nothing_is_created(
    credentials: str,
) -> None:
    given = {
        "secret": {"DatabaseSecretArn": SECRET_ARN},
        "iam": {
            "DatabaseIamAuth": "true",
            "DatabaseUser": "retrieval_app",
            "DatabaseResourceId": "prx-0abc123def",
        },
    }[credentials]
    parameters = (
        shape(False)
        | {"DatabaseSecretArn": "", "DatabasePort": "6432", "DatabaseName": "rag"}
        | given
        | {"SubnetIds": "subnet-0a1b2c3d,subnet-1b2c3d4e", "SecurityGroupIds": "sg-0a1b2c3d,sg-1b2c3d4e"}
    )
    assert rules_refusing(parameters) == set()
    resources = deployed(parameters)
    assert {r["Type"] for r in resources.values()}.isdisjoint(NETWORK_AND_DATABASE_TYPES)
    expected = {
        "DATABASE_HOST": PARAMETERS["DatabaseHost"],
        "DATABASE_PORT": "6432",
        "DATABASE_NAME": "rag",
        **(
            {"DATABASE_SECRET_ARN": SECRET_ARN, "DATABASE_IAM_AUTH": "false"}
            if credentials == "secret"
            else {"DATABASE_IAM_AUTH": "true", "DATABASE_USER": "retrieval_app"}
        ),
    }
    # Without per-role credentials, every function signs in as the one user, and the migration sets up no
    # roles (docs/security.md, "Database roles": what that leaves).
    roles_off = {"DATABASE_ROLES": "false", "DATABASE_ROLES_IAM": "false"}
    for function in FUNCTIONS:
        env = environment(resources, function)
        database = {key: value for key, value in env.items() if key.startswith("DATABASE_")}
        assert database == expected | (roles_off if function == "MigrateFunction" else {}), function
        assert resources[function]["Properties"]["VpcConfig"] == {
            "SubnetIds": ["subnet-0a1b2c3d", "subnet-1b2c3d4e"],
            "SecurityGroupIds": ["sg-0a1b2c3d", "sg-1b2c3d4e"],
        }


@SHAPES
def test_the_schema_migrates_on_deploy_through_a_custom_resource_with_a_fixed_service_token(
    create_database: bool,
) -> None:
    resources = deployed(shape(create_database))
    schema = resources["DatabaseSchema"]
    assert schema["Type"] == "Custom::DatabaseSchema"
    props = schema["Properties"]
    # The unqualified function ARN: never a version or alias ARN, which would change between deploys.
    assert props["ServiceToken"] == "MigrateFunction.Arn"
    # A new migration without raising this would deploy without CloudFormation sending an Update.
    assert props["SchemaVersion"] == str(SCHEMA_VERSION)
    # What the migration waits for: the proxy reaching the instance, and the subnets reaching S3 (the
    # answer to CloudFormation goes to a presigned S3 URL).
    if create_database:
        assert props["Database"] == {"Ref": "DatabaseProxyTargetGroup"}
        assert props["Network"] == {"Ref": "S3Endpoint"}
        assert resources["DatabaseProxyTargetGroup"]["DependsOn"] == "DatabaseInstance"
        assert set(resources["S3Endpoint"]["DependsOn"]) == {
            "PrivateSubnetARouteTable",
            "PrivateSubnetBRouteTable",
        }
    else:
        assert props["Database"] == PARAMETERS["DatabaseHost"] and "Network" not in props
    assert "MigrateLogGroup" in (
        schema["DependsOn"] if isinstance(schema["DependsOn"], list) else [schema["DependsOn"]]
    )
    migrate = resources["MigrateFunction"]["Properties"]
    assert migrate["Handler"] == "app.handler" and migrate["Code"]["S3Key"] == "functions/migrate.zip"
    assert migrate["Timeout"] == 900 and migrate["MemorySize"] == 512
    # CloudFormation stops waiting after ServiceTimeout: just past the function's own limit.
    assert migrate["Timeout"] < props["ServiceTimeout"] <= migrate["Timeout"] + 120
    assert (
        migrate["VpcConfig"]["SubnetIds"]
        == resources["RetrieveFunction"]["Properties"]["VpcConfig"]["SubnetIds"]
    )
    assert migrate["Layers"] == resources["RetrieveFunction"]["Properties"]["Layers"]
    statements = grants(role_statements(resources, "MigrateFunctionRole"))
    # The owner: the created master's secret, or your DatabaseSecretArn.
    assert {action for action, _ in statements} == {"secretsmanager:GetSecretValue"}
    # The code that needs the schema is deployed after it is migrated.
    for function in FUNCTIONS[:-1]:
        assert resources[function]["DependsOn"] == "DatabaseSchema", function


REQUIRED_OUTPUTS = {
    "ApiUrl",
    "ConsoleUrl",
    "CacheTableName",
    "RequestQueueUrl",
    "ResultsQueueUrl",
    "RequestDeadLetterQueueUrl",
    "IngestQueueUrl",
    "IngestDeadLetterQueueUrl",
    "DocumentsBucketName",
    "DatabaseEndpoint",
    "DatabaseAccessPolicyArn",
    "DashboardUrl",
}


@SHAPES
def test_every_output_a_user_needs_exists(create_database: bool) -> None:
    outputs = deploy(shape(create_database)).outputs
    assert set(outputs) >= REQUIRED_OUTPUTS
    assert "AlarmTopicArn" not in outputs
    values = {name: output["Value"] for name, output in outputs.items()}
    if create_database:
        assert values["DatabaseEndpoint"] == "DatabaseProxy.Endpoint"
        assert values["DatabaseSecretArn"] == "DatabaseCluster.MasterUserSecret.SecretArn"
    else:
        assert values["DatabaseEndpoint"] == PARAMETERS["DatabaseHost"]
        assert values["DatabaseSecretArn"] == SECRET_ARN
    assert values["DashboardUrl"].startswith("https://us-east-1.console.aws.amazon.com/cloudwatch/home")
    with_email = deploy(shape(create_database) | {"AlarmEmail": ALARM_EMAIL}).outputs
    assert with_email["AlarmTopicArn"]["Value"] == {"Ref": "AlarmTopic"}
    iam_only = deploy(
        shape(False)
        | {
            "DatabaseSecretArn": "",
            "DatabaseIamAuth": "true",
            "DatabaseUser": "u",
            "DatabaseResourceId": "prx-1",
        }
    ).outputs
    assert "DatabaseSecretArn" not in iam_only


def _dashboard_metrics(widget: dict[str, Any]) -> set[str]:
    """The metric names a widget plots: its metric arrays' and those its SEARCH expressions name."""
    names = set()
    for line in widget["properties"]["metrics"]:
        if isinstance(line[0], dict):
            names |= set(re.findall(r'MetricName="(\w+)"', line[0]["expression"]))
        else:
            names.add(line[1])
    return names


@SHAPES
def test_the_dashboard_shows_the_api_functions_service_metrics_and_queues(create_database: bool) -> None:
    resources = deployed(shape(create_database))
    body = json.loads(resources["Dashboard"]["Properties"]["DashboardBody"])
    widgets = {widget["properties"]["title"]: widget for widget in body["widgets"]}
    metrics = {title: _dashboard_metrics(widget) for title, widget in widgets.items()}
    shown = set().union(*metrics.values())
    assert {"Count", "4xx", "5xx", "Latency", "Errors", "Throttles", "Duration"} <= shown
    # The service's own EMF metrics, EmbedTime and SearchTime included once the core emits them.
    assert {"ResultCount", "CacheHit", "CacheMiss", "ServerErrors", "EmbedTime", "SearchTime"} <= shown
    assert {"ObjectsIngested", "UnreadableObjects", "ApproximateNumberOfMessagesVisible"} <= shown
    assert {"RateLimitError", "CacheError"} <= shown  # what fails open, beside its alarms
    for title, metric in (
        ("Lambda errors", "Errors"),
        ("Lambda throttles", "Throttles"),
        ("Lambda duration p99 (ms)", "Duration"),
    ):
        lines = widgets[title]["properties"]["metrics"]
        assert {(line[0], line[1], line[2]) for line in lines} == {("AWS/Lambda", metric, "FunctionName")}
        assert {line[3] for line in lines} == {"${" + function + "}" for function in FUNCTIONS}, title
    queues = {line[3] for line in widgets["Dead-letter queue depth"]["properties"]["metrics"]}
    assert queues == {"${RequestDeadLetterQueue.QueueName}", "${IngestDeadLetterQueue.QueueName}"}
    database = {"DatabaseConnections", "ClientConnections", "ServerlessDatabaseCapacity"}
    assert (database <= shown) is create_database and (bool(database & shown)) is create_database


@SHAPES
def test_the_local_provider_puts_the_embedder_layer_on_the_functions_that_embed_only(
    create_database: bool,
) -> None:
    def carrying(resources: dict[str, Any]) -> set[str]:
        layers = {name for name in of_type(resources, "AWS::Lambda::LayerVersion") if "EmbedderLayer" in name}
        return {
            name
            for name, function in of_type(resources, "AWS::Lambda::Function").items()
            if {ref["Ref"] for ref in function["Properties"]["Layers"]} & layers
        }

    local = deployed(shape(create_database) | {"EmbeddingProvider": "local"})
    assert carrying(local) == set(EMBEDDING_FUNCTIONS)
    for name in of_type(local, "AWS::Lambda::Function"):
        variables = environment(local, name)
        if name in EMBEDDING_FUNCTIONS:
            assert variables["EMBEDDING_PROVIDER"] == "local"
            assert variables["LOCAL_EMBEDDER_RUNTIME"] == "onnx-w8"
            assert variables["LOCAL_MODEL_DIR"] == "/opt/models/all-MiniLM-L6-v2"
        else:
            assert not {"LOCAL_EMBEDDER_RUNTIME", "LOCAL_MODEL_DIR"} & set(variables), name
    # No key to keep, and no provider to call.
    assert "EmbeddingApiKeySecret" not in local
    remote = deployed(shape(create_database))
    assert not [name for name in remote if "EmbedderLayer" in name]
    for name in of_type(remote, "AWS::Lambda::Function"):
        assert not {"LOCAL_EMBEDDER_RUNTIME", "LOCAL_MODEL_DIR"} & set(environment(remote, name)), name


def test_the_local_provider_takes_only_its_own_model() -> None:
    local = shape(False) | {"EmbeddingProvider": "local"}
    assert rules_refusing(local) == set()
    assert rules_refusing(
        local | {"EmbeddingModel": "amazon.titan-embed-text-v2:0", "EmbeddingDimension": "1024"}
    ) == {
        "EmbeddingProvider local embeds with all-MiniLM-L6-v2; set EmbeddingModel to it.",
        "EmbeddingProvider local makes 384-dimensional vectors; set EmbeddingDimension to 384.",
    }


def test_rules_tie_the_network_parameters_to_the_database_shape() -> None:
    missing = shape(False) | {"DatabaseHost": "", "SubnetIds": "", "SecurityGroupIds": ""}
    assert rules_refusing(missing) == {
        "CreateDatabase false needs DatabaseHost.",
        "CreateDatabase false needs SubnetIds.",
        "CreateDatabase false needs SecurityGroupIds.",
    }
    assert rules_refusing(shape(False)) == set()
    # The created database needs none of them, nor database credentials.
    assert rules_refusing(shape(True)) == set()
    assert rules_refusing(shape(True) | {"DatabaseSecretArn": "", "DatabaseIamAuth": "false"}) == set()
    # Given subnets with a created database would put the functions outside its network.
    assert rules_refusing(shape(True) | {"SubnetIds": "subnet-0a1b2c3d"}) == {
        "CreateDatabase true creates the network; leave SubnetIds and SecurityGroupIds empty."
    }


@SHAPES
def test_cfn_lint_finds_nothing(create_database: bool) -> None:
    assert lint(shape(create_database)) == []


# The functions that parse files: the documents API and S3 sync (MCP's memory_store takes text).
PARSING_FUNCTIONS = ("DocumentsFunction", "IngestFunction")
DETECT_TEXT = ("textract:DetectDocumentText", "*")


@SHAPES
def test_ocr_engine_textract_grants_text_detection_to_the_parsing_functions_only(
    create_database: bool,
) -> None:
    off = deployed(shape(create_database))
    on = deployed(shape(create_database) | {"OcrEngine": "textract"})
    assert "TextractAccessPolicy" not in off and "TextractAccessPolicy" in on
    for function in FUNCTIONS:
        granted_on = {
            g for g in grants(role_statements(on, f"{function}Role")) if g[0].startswith("textract:")
        }
        granted_off = {
            g for g in grants(role_statements(off, f"{function}Role")) if g[0].startswith("textract:")
        }
        assert granted_off == set(), function
        assert granted_on == ({DETECT_TEXT} if function in PARSING_FUNCTIONS else set()), function
        if function in PARSING_FUNCTIONS:
            assert environment(off, function)["OCR_ENGINE"] == "none"
            assert environment(on, function)["OCR_ENGINE"] == "textract"
        else:
            assert "OCR_ENGINE" not in environment(on, function), function
    # S3 sync reads scans of more pages than a PUT, within its longer parse deadline.
    assert environment(on, "IngestFunction")["OCR_MAX_PAGES"] == "200"


def test_without_a_nat_gateway_textract_is_reached_through_an_endpoint_of_its_own() -> None:
    def endpoints(parameters: dict[str, str]) -> set[str]:
        resources = deployed(shape(True) | parameters)
        return {
            str(r["Properties"]["ServiceName"]).rsplit(".", 1)[-1]
            for r in of_type(resources, "AWS::EC2::VPCEndpoint").values()
        }

    assert "textract" in endpoints({"VpcEgress": "VpcEndpoints", "OcrEngine": "textract"})
    assert "textract" not in endpoints({"VpcEgress": "VpcEndpoints"})
    assert "textract" not in endpoints({"VpcEgress": "NatGateway", "OcrEngine": "textract"})
