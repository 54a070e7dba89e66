"""A fake Amazon Bedrock Runtime serving Converse and ConverseStream, for the real boto3 client.

`POST /model/{modelId}/converse` answers rest-json; `POST /model/{modelId}/converse-stream` answers
`application/vnd.amazon.eventstream`: AWS event-stream frames, encoded here and decoded by botocore, sent
as HTTP chunks one frame at a time, as Bedrock sends them. Tests script the answer (plain text with its
`[n]` markers, or natively cited passages), the usage, the stop reason, errors before the answer
(`fail_next`), an exception inside the stream, and delays before the answer or after the first text.
"""

from __future__ import annotations

import json
import re
import struct
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

from .bedrock import aws_error_reply
from .http import FakeHTTPServer, RecordedRequest, Reply

NOVA_LITE = "amazon.nova-lite-v1:0"
CONVERSE_PATH = r"/model/(?P<model_id>[^/]+)/converse"
STREAM_PATH = r"/model/(?P<model_id>[^/]+)/converse-stream"
EVENT_STREAM_TYPE = "application/vnd.amazon.eventstream"
_STRING_HEADER = 7  # the event-stream header value type of a UTF-8 string


@dataclass(frozen=True)
class Cited:
    """A passage the model cites natively (a citationsContent block): `documents` are 0-based indexes."""

    text: str
    documents: tuple[int, ...]


def event_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total and headers length, CRC32), headers, payload, CRC32."""
    encoded = b"".join(
        struct.pack(">B", len(name)) + name + struct.pack(">BH", _STRING_HEADER, len(value)) + value
        for name, value in ((n.encode(), v.encode()) for n, v in headers.items())
    )
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(event_type: str, payload: dict[str, Any]) -> bytes:
    """A ConverseStream event (`contentBlockDelta`, `messageStop`, ...)."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return event_frame(headers, json.dumps(payload).encode())


def exception_event(exception_type: str, message: str) -> bytes:
    """An exception sent inside the stream, e.g. `throttlingException`."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return event_frame(headers, json.dumps({"message": message}).encode())


class EventStreamBody(bytes):
    """The frames of one stream; written as HTTP chunks, each after its wait (None: no wait)."""

    steps: list[tuple[Callable[[], object] | None, bytes]]

    @classmethod
    def of(cls, steps: list[tuple[Callable[[], object] | None, bytes]]) -> EventStreamBody:
        body = cls(b"".join(frame for _, frame in steps))
        body.steps = steps
        return body


class FakeBedrockConverse(FakeHTTPServer):
    """Converse and ConverseStream for the models in `models`, answering `answer` as scripted.

    `delay_s` holds every answer back (released early by `stop()`). In a stream, after the first text
    delta the fake waits for `resume` (when set) and for `stall_after_first_delta_s`, then sends
    `exception_after_first_delta` (an exception event type) when set, else the rest.
    """

    def __init__(
        self,
        *,
        answer: Sequence[str | Cited] = ("Paris is the capital of France [1].",),
        models: Sequence[str] = (NOVA_LITE,),
    ) -> None:
        super().__init__()
        self.answer = list(answer)
        self.models = set(models)
        self.input_tokens = 120
        self.output_tokens = 9
        self.stop_reason = "end_turn"
        self.delay_s = 0.0
        self.stall_after_first_delta_s = 0.0
        self.exception_after_first_delta: str | None = None
        self.resume: threading.Event | None = None
        self._release = threading.Event()
        self.add_route("POST", CONVERSE_PATH, self._converse)
        self.add_route("POST", STREAM_PATH, self._converse_stream)

    def start(self) -> Self:
        super().start()
        assert self._server is not None
        self._server.RequestHandlerClass = _chunking_handler(self._server.RequestHandlerClass)
        return self

    def stop(self) -> None:
        self._release.set()
        super().stop()

    def converse_calls(self) -> list[RecordedRequest]:
        """Every Converse request received, in order."""
        return self.requests_to("POST", CONVERSE_PATH)

    def stream_calls(self) -> list[RecordedRequest]:
        """Every ConverseStream request received, in order."""
        return self.requests_to("POST", STREAM_PATH)

    def error_reply(self, status: int, message: str) -> Reply:
        return aws_error_reply(status, message)

    # Answers.

    def _refusal(self, request: RecordedRequest, model: str) -> Reply | None:
        """The ValidationException Bedrock answers a request off the documented shape or model with."""
        if model not in self.models:
            return self.error_reply(400, "The provided model identifier is invalid.")
        body: Any = request.json()
        try:
            (system,) = body["system"]
            (message,) = body["messages"]
            (content,) = message["content"]
            config = body["inferenceConfig"]
            valid = (
                isinstance(system["text"], str)
                and message["role"] == "user"
                and isinstance(content["text"], str)
                and isinstance(config["maxTokens"], int)
                and config["maxTokens"] >= 1
                and config["temperature"] == 0
            )
        except (KeyError, TypeError, ValueError):
            valid = False
        if not valid:
            return self.error_reply(400, "1 validation error detected: the request does not match Converse")
        return None

    def _converse(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        self._release.wait(self.delay_s)
        refusal = self._refusal(request, match["model_id"])
        if refusal is not None:
            return refusal
        content = [
            {"text": part}
            if isinstance(part, str)
            else {"citationsContent": {"content": [{"text": part.text}], "citations": _citations(part)}}
            for part in self.answer
        ]
        return Reply(
            200,
            {
                "output": {"message": {"role": "assistant", "content": content}},
                "stopReason": self.stop_reason,
                "usage": self._usage(),
                "metrics": {"latencyMs": 12},
            },
        )

    def _converse_stream(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        self._release.wait(self.delay_s)
        refusal = self._refusal(request, match["model_id"])
        if refusal is not None:
            return refusal
        frames = [event("messageStart", {"role": "assistant"})]
        first_delta: int | None = None  # where the first text delta is in `frames`
        for index, part in enumerate(self.answer):
            text = part if isinstance(part, str) else part.text
            for word in re.findall(r"\s*\S+\s*", text) or [text]:
                first_delta = len(frames) if first_delta is None else first_delta
                frames.append(
                    event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": word}})
                )
            if isinstance(part, Cited):
                frames.extend(
                    event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"citation": citation}})
                    for citation in _citations(part)
                )
            frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
        frames.append(event("messageStop", {"stopReason": self.stop_reason}))
        frames.append(event("metadata", {"usage": self._usage(), "metrics": {"latencyMs": 12}}))
        if first_delta is None:
            return _stream_reply([(None, frame) for frame in frames])
        head, tail = frames[: first_delta + 1], frames[first_delta + 1 :]
        if self.exception_after_first_delta:
            tail = [exception_event(self.exception_after_first_delta, "scripted stream failure")]
        steps: list[tuple[Callable[[], object] | None, bytes]] = [(None, frame) for frame in head]
        steps.append((self._after_first_delta, tail[0]))  # never empty: messageStop follows the text
        steps += [(None, frame) for frame in tail[1:]]
        return _stream_reply(steps)

    def _after_first_delta(self) -> None:
        if self.resume is not None:
            self.resume.wait(10)
        if self.stall_after_first_delta_s:
            self._release.wait(self.stall_after_first_delta_s)

    def _usage(self) -> dict[str, int]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
        }


def _citations(part: Cited) -> list[dict[str, Any]]:
    return [
        {
            "title": f"document {index}",
            "sourceContent": [{"text": part.text}],
            "location": {"documentChar": {"documentIndex": index, "start": 0, "end": len(part.text)}},
        }
        for index in part.documents
    ]


def _stream_reply(steps: list[tuple[Callable[[], object] | None, bytes]]) -> Reply:
    return Reply(200, EventStreamBody.of(steps), {"Content-Type": EVENT_STREAM_TYPE})


def _chunking_handler(base: Any) -> Any:
    """`base` (the fake's request handler), sending an EventStreamBody with chunked transfer encoding,
    one chunk per frame once its wait is over, instead of all at once after a Content-Length."""

    class _Writer:
        def __init__(self, raw: Any) -> None:
            self._raw = raw

        def write(self, data: bytes) -> int:
            if not isinstance(data, EventStreamBody):
                return int(self._raw.write(data))
            try:
                for wait, frame in data.steps:
                    if wait is not None:
                        wait()
                    if frame:
                        self._raw.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self._raw.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading: nothing more to send
            return len(data)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._raw, name)

    class _ChunkingHandler(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            super().setup()
            self.wfile = _Writer(self.wfile)

        def send_response(self, code: int, message: str | None = None) -> None:
            self._event_stream = False
            super().send_response(code, message)

        def send_header(self, keyword: str, value: str) -> None:
            if keyword.lower() == "content-type":
                self._event_stream = value == EVENT_STREAM_TYPE
            if keyword.lower() == "content-length" and self._event_stream:
                keyword, value = "Transfer-Encoding", "chunked"
            super().send_header(keyword, value)

    return _ChunkingHandler
