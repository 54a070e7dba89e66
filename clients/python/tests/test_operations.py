"""Every operation of the HTTP API has its method in both clients, named as its operationId says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from retrieval_client import AsyncRetrievalClient, RetrievalClient

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"


def method_name(operation_id: str) -> str:
    """`listDocuments` -> `list_documents`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


OPERATIONS = sorted(
    operation["operationId"]
    for operations in json.loads(OPENAPI.read_text(encoding="utf-8"))["paths"].values()
    for operation in operations.values()
)


def test_the_document_has_the_operations_the_service_is_known_for() -> None:
    assert {"retrieve", "answer", "putDocument", "listStores"} <= set(OPERATIONS)


@pytest.mark.parametrize("client_class", [RetrievalClient, AsyncRetrievalClient])
@pytest.mark.parametrize("operation_id", OPERATIONS)
def test_each_operation_has_a_method(client_class: type, operation_id: str) -> None:
    name = method_name(operation_id)
    assert callable(getattr(client_class, name, None)), (
        f"{client_class.__name__} has no {name}() for {operation_id}"
    )
