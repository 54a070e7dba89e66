"""X-request-id in Lambda: the caller's usable id, else API Gateway's requestId, is echoed
on the response and is the Powertools correlation id of the invocation's log lines."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import EVENTS_DIR
from tests.functional.test_handlers import (  # noqa: F401 (handlers, no_handbook_store: fixtures)
    FakeLambdaContext,
    handlers,
    load_event,
    no_handbook_store,
)


@pytest.fixture()
def powertools_output(handlers: Any) -> Iterator[io.StringIO]:  # noqa: F811 (built by the handlers)
    """What the handlers' Powertools logger writes (its handler keeps the stdout of its creation)."""
    logger = logging.getLogger("retrieval-service")
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logger.handlers[0].formatter)
    logger.addHandler(handler)
    yield buffer
    logger.removeHandler(handler)


def log_lines(output: str) -> list[dict[str, Any]]:
    lines = []
    for line in output.splitlines():
        if line.startswith("{"):
            parsed = json.loads(line)
            if "correlation_id" in parsed:
                lines.append(parsed)
    return lines


@pytest.mark.parametrize(
    ("sent", "expected"),
    [("caller-trace-42", "caller-trace-42"), (None, "Ux01bJvqIAMEbQ="), ("not usable!", "Ux01bJvqIAMEbQ=")],
    ids=["caller's", "api-gateway's", "unusable-replaced"],
)
def test_the_request_id_is_echoed_and_correlates_every_log_line(
    handlers: dict[str, Callable[[Any, Any], Any]],  # noqa: F811
    powertools_output: io.StringIO,
    sent: str | None,
    expected: str,
) -> None:
    event = load_event(EVENTS_DIR / "retrieve.json")
    if sent is not None:
        event["headers"]["x-request-id"] = sent
    response = handlers["retrieve"](event, FakeLambdaContext(function_name="retrieve"))
    assert response["statusCode"] == 200, response["body"]
    assert response["headers"]["x-request-id"] == expected
    lines = log_lines(powertools_output.getvalue())
    assert any(line["message"] == "request served" for line in lines), lines
    assert {line["correlation_id"] for line in lines} == {expected}
