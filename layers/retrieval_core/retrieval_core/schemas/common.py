"""What every HTTP body shares: the camelCase request and response bases, checked text, store names and
document ids, the cache TTL option, the error body, and the 422 a validation error becomes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from retrieval_core.exceptions import InvalidRequestError


def no_nul(value: str) -> str:
    """`value` if PostgreSQL can store it: no NUL character, no unpaired surrogate."""
    # PostgreSQL text cannot hold U+0000, and UTF-8 cannot encode an unpaired surrogate ("\ud800" is
    # valid JSON): refuse both here so they are a 422, not a 500.
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no unpaired surrogates)") from None
    return value


Text = Annotated[str, AfterValidator(no_nul)]
StoreName = Annotated[
    str,
    Field(min_length=1, max_length=512, description="Store name, display name or full resource name."),
    AfterValidator(no_nul),
]

MAX_DOCUMENT_ID_BYTES = 1024


def document_id(value: str) -> str:
    """`value` if it is a storable document id: 1 to 1,024 bytes of UTF-8, no NUL."""
    # Document ids follow S3's key limit: 1 to 1,024 bytes of UTF-8 (not characters).
    if len(no_nul(value).encode("utf-8")) > MAX_DOCUMENT_ID_BYTES:
        raise ValueError(f"must be at most {MAX_DOCUMENT_ID_BYTES} bytes of UTF-8")
    return value


# Gemini File Search store resource names start with this.
GEMINI_STORE_PREFIX = "fileSearchStores/"


# What a document write did, in the API and on the write side: created, the document did not exist;
# updated, its chunks or metadata changed; unchanged, same content, chunking and metadata (nothing
# re-embedded, nothing written).
WriteStatus = Literal["created", "updated", "unchanged"]


# Every API model builds its validator and serializer when first used, not when its class is made (nor
# when a route names it: FastAPI's TypeAdapters follow the model's setting). A handler's cold start then
# pays only for the models of the route it serves, on that route's first request, instead of for all
# of them at init: about 4% of DocumentsFunction's and RetrieveFunction's init (docs/benchmarks-bundle.md).
DEFERRED = True


class RequestModel(BaseModel):
    """Base for requests: camelCase on the wire, unknown fields refused so typos are not ignored.

    Strict: a value of the wrong JSON type is refused, never converted ("0.5" or true for a number,
    "yes" for a boolean, 5 for a string). A JSON integer is still a number (`grade: 1`).
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True, defer_build=DEFERRED
    )


class ResponseModel(BaseModel):
    """Base for responses: camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, defer_build=DEFERRED
    )


CacheTtl = Annotated[
    int | None,
    Field(
        default=None,
        ge=0,
        le=86_400_000,
        alias="cacheTTLms",
        description="How long to cache this answer, in ms. 0: do not cache. Default 5 min.",
    ),
]


def absent_when_none(value: Any) -> bool:
    """Whether a field is left out of the JSON: it is None."""
    # Optional parts of an answer (returnFormatted's fields, an attached store's source) are left out of
    # the JSON when unset: other answers keep their shape.
    return value is None


def not_applicable(
    loc: tuple[str, ...], message: str, value: Any, kind: str = "not_applicable"
) -> InitErrorDetails:
    """The 422 item of an option that the rest of the request makes pointless, at `loc`."""
    return InitErrorDetails(type=PydanticCustomError(kind, message), loc=loc, input=value)


class ErrorBody(BaseModel):
    """The error object."""

    model_config = ConfigDict(defer_build=DEFERRED)

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    """Every error the API returns."""

    model_config = ConfigDict(defer_build=DEFERRED)

    error: ErrorBody


def validation_error(exc: ValidationError) -> InvalidRequestError:
    """The same error the HTTP API answers with 422: `message` starts with the field."""
    errors = [
        {"field": ".".join(str(p) for p in e["loc"]) or "body", "message": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False)
    ]
    first = errors[0]
    return InvalidRequestError(f"{first['field']}: {first['message']}", {"errors": errors})
