"""Template.yaml: the HTTP API answers CORS only for the origins CorsAllowOrigins lists."""

from __future__ import annotations

from tests.template import deployed, shape


def cors_of(parameters: dict[str, str]) -> object:
    body = deployed(shape(False) | parameters)["HttpApi"]["Properties"]["Body"]
    return body.get("x-amazon-apigateway-cors")


def test_cors_is_off_unless_origins_are_given() -> None:
    assert cors_of({}) is None


def test_the_listed_origins_may_call_with_the_apis_methods_and_headers() -> None:
    cors = cors_of({"CorsAllowOrigins": "https://app.example.com,https://admin.example.com"})
    assert isinstance(cors, dict)
    origins = cors["allowOrigins"]
    # CloudFormation passes a CommaDelimitedList as a list; tests.template keeps the parameter's text.
    assert (origins.split(",") if isinstance(origins, str) else origins) == [
        "https://app.example.com",
        "https://admin.example.com",
    ]
    assert cors["allowMethods"] == ["GET", "HEAD", "POST", "PUT", "DELETE"]
    assert {"x-api-key", "x-request-id", "content-type", "authorization"} == set(cors["allowHeaders"])
    assert cors["exposeHeaders"] == ["x-request-id"]
