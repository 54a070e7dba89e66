"""The client's tests run against a live `retrieval serve` (tests/client_server.py starts it): its address
and API keys come from RETRIEVAL_URL, RETRIEVAL_API_KEY, RETRIEVAL_READ_KEY and RETRIEVAL_LIMITED_KEY."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import pytest

from retrieval_client import RetrievalClient, StoreNotFoundError


def env(name: str) -> str:
    """A variable tests/client_server.py sets; its absence fails the test (never skips it)."""
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the client tests through `python -m tests.client_server`")
    return value


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def url() -> str:
    return env("RETRIEVAL_URL")


@pytest.fixture(scope="session")
def admin_key() -> str:
    return env("RETRIEVAL_API_KEY")


@pytest.fixture(scope="session")
def read_key() -> str:
    return env("RETRIEVAL_READ_KEY")


@pytest.fixture()
def client(url: str, admin_key: str) -> Iterator[RetrievalClient]:
    with RetrievalClient(url, admin_key) as client:
        yield client


@pytest.fixture()
def store(client: RetrievalClient) -> Iterator[str]:
    """A new empty store of the test's own, deleted afterwards."""
    name = f"client-{uuid.uuid4().hex[:12]}"
    client.put_store(name, displayName=f"Client test {name}")
    yield name
    with contextlib.suppress(StoreNotFoundError):  # the test deleted it
        client.delete_store(name)


@pytest.fixture()
def handbook(client: RetrievalClient, store: str) -> Iterator[str]:
    """The test's store with three short policies: travel, visitors, expenses (metadata `team`)."""
    client.put_document(
        store,
        "travel",
        text="Book flights through the travel desk at least 14 days ahead.",
        metadata={"team": "travel"},
    )
    client.put_document(
        store,
        "visitors",
        text="Visitors sign in at the front desk and wear a badge.",
        metadata={"team": "facilities"},
    )
    client.put_document(
        store,
        "expenses",
        text="Flights booked late are refunded only with approval.",
        metadata={"team": "finance"},
    )
    yield store
