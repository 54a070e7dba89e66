"""Server-sent events of POST /rag/answer: `delta`, `citation`, `done`, or `error`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, cast

import httpx

from retrieval_client._http import api_error

AnswerEventName = Literal["delta", "citation", "done"]


@dataclass(frozen=True)
class AnswerEvent:
    """One event of a streamed answer.

    `delta`: `data["text"]` is the next piece of the answer. `citation`: one AnswerCitation. `done`: the
    whole AnswerResponse, the last event. (An `error` event is raised as the error it names.)
    """

    event: AnswerEventName
    data: dict[str, Any]


class EventReader:
    """Reads a text/event-stream body line by line: `feed` gives (name, JSON data) when an event ends."""

    def __init__(self) -> None:
        self._name = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str, dict[str, Any]] | None:
        """Take one line (without its newline); the event it ends, if it ends one."""
        if not line:
            return self.end()
        if line.startswith("event:"):
            self._name = line[6:].strip()
        elif line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
        return None

    def end(self) -> tuple[str, dict[str, Any]] | None:
        """The event under way when the body ends (or at a blank line), if any."""
        event = (self._name, json.loads("\n".join(self._data))) if self._data else None
        self._name, self._data = "message", []
        return event


def answer_event(event: tuple[str, dict[str, Any]], response: httpx.Response) -> AnswerEvent:
    """The AnswerEvent of a parsed event; an `error` event raises the error it carries."""
    name, data = event
    if name == "error":
        # The stream's own status (200): the error came after it began.
        raise api_error(httpx.Response(response.status_code, json=data, headers=response.headers))
    if name not in ("delta", "citation", "done"):
        raise ValueError(f"unexpected event {name!r} in an answer stream")
    return AnswerEvent(cast(AnswerEventName, name), data)


def events_of_answer(answer: dict[str, Any]) -> list[AnswerEvent]:
    """The events a stream would have given for a whole answer: its text, its citations, then done."""
    return [
        AnswerEvent("delta", {"text": answer["text"]}),
        *(AnswerEvent("citation", citation) for citation in answer["citations"]),
        AnswerEvent("done", answer),
    ]
