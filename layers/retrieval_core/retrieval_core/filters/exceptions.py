"""Errors of metadata filters: a malformed expression or tree, a key outside the allowed ones."""

from __future__ import annotations

from retrieval_core.exceptions import InvalidRequestError


class FilterSyntaxError(InvalidRequestError):
    """A metadata filter expression is malformed or over a limit; `details` names the position."""

    code = "invalid_metadata_filter"

    def __init__(self, position: int, expected: str, found: str) -> None:
        super().__init__(
            f"metadataFilter: expected {expected} at position {position}, found {found}",
            {"field": "metadataFilter", "position": position, "expected": expected, "found": found},
        )


class FilterTreeError(InvalidRequestError):
    """A JSON filter tree is malformed or over a limit; `details.field` is the path to the bad part."""

    code = "invalid_metadata_filter"

    def __init__(self, path: str, expected: str, found: str) -> None:
        super().__init__(
            f"{path}: expected {expected}, found {found}",
            {"field": path, "expected": expected, "found": found},
        )


class FilterKeyNotAllowedError(InvalidRequestError):
    """A metadata filter (or, over MCP, metadata to store) uses a key outside the allowed ones.

    `field` names the request field: metadataFilter over HTTP, filter or metadata for MCP tools.
    """

    code = "metadata_key_not_allowed"

    def __init__(self, key: str, allowed: frozenset[str], field: str = "metadataFilter") -> None:
        super().__init__(
            f"{field}: key '{key}' is not allowed; allowed keys: {', '.join(sorted(allowed))}",
            {"field": field, "key": key, "allowedKeys": sorted(allowed)},
        )
