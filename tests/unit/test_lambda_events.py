"""Pure checks of Lambda event shapes and request ids."""

from __future__ import annotations

import json

import pytest

from retrieval_core.api.request_id import usable_request_id
from retrieval_core.lambdas.events import http_event_problem, split_sqs_event
from tests.conftest import EVENTS_DIR


@pytest.mark.parametrize(
    "path", [p for p in sorted(EVENTS_DIR.glob("*.json")) if "routeKey" in json.loads(p.read_text())], ids=str
)
def test_every_shipped_http_event_is_well_formed(path: object) -> None:
    assert http_event_problem(json.loads(path.read_text())) is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", sorted(EVENTS_DIR.glob("sqs-*.json")), ids=lambda p: p.name)
def test_every_shipped_sqs_event_is_usable_whole(path: object) -> None:
    event = json.loads(path.read_text())  # type: ignore[attr-defined]
    batch = split_sqs_event(event)
    assert batch.records == event["Records"] and batch.failed_ids == [] and batch.problems == []


@pytest.mark.parametrize(
    ("value", "usable"),
    [
        ("3f1c2a9e-5b7d-4c8e-9a0b-1c2d3e4f5a6b", True),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", True),
        ("Ux01bJvqIAMEbQ=", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("", False),
        ("two words", False),
        ("line\nbreak", False),
        ("naïve", False),
        (None, False),
        (42, False),
    ],
)
def test_a_request_id_is_usable_only_when_short_and_plain(value: object, usable: bool) -> None:
    assert usable_request_id(value) == (value if usable else None)
