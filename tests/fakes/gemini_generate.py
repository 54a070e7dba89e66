"""FakeGemini plus answer generation: `generateContent` without tools and `streamGenerateContent?alt=sse`.

Requests with the fileSearch tool still get FakeGemini's File Search answer. The "model" answers with
`answer` (its text in chunks, its usage, its finish reason); `models` lists the models it serves (any
other is a 404 NOT_FOUND, as the Gemini API answers). Scripted failures (`fail_next`, `fail_always`,
`script`) answer in the Gemini API's error shape, on the streaming endpoint too; `throttled_reply` adds
the RetryInfo a real 429 carries. `generate_delay_s` delays the start of every answer, an answer's
`stall_after` stops a stream after that many chunks; both are released early by `stop()`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .gemini import API_VERSIONS, FakeGemini
from .http import RecordedRequest, Reply, Streamed

GENERATE_PATH = r"/v1(?:beta)?/models/[^/:]+:generateContent"
STREAM_PATH = r"/v1(?:beta)?/models/[^/:]+:streamGenerateContent"
DEFAULT_MODELS = frozenset({"gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.5-pro"})


@dataclass
class FakeAnswer:
    """What the fake model answers. The chunks are the stream's deltas, their concatenation the text."""

    chunks: list[str] = field(default_factory=lambda: ["Paris is the capital ", "of France [1]."])
    finish_reason: str | None = "STOP"
    prompt_tokens: int = 120
    output_tokens: int = 9
    # promptFeedback.blockReason: the prompt itself was blocked, so there is no candidate at all.
    block_reason: str | None = None
    # Streams: seconds between two chunks; after `stall_after` chunks the stream pauses for `stall_s`;
    # after `error_after` chunks it sends an error event with `error_status` instead of the rest.
    chunk_delay_s: float = 0.0
    stall_after: int | None = None
    stall_s: float = 30.0
    error_after: int | None = None
    error_status: int = 503

    @property
    def text(self) -> str:
        """The whole answer text."""
        return "".join(self.chunks)


class FakeGeminiGenerate(FakeGemini):
    """Serves generateContent (without tools) and streamGenerateContent for `models`, besides FakeGemini's
    routes."""

    def __init__(self, *, api_key: str = "test-gemini-key", models: frozenset[str] = DEFAULT_MODELS) -> None:
        super().__init__(api_key=api_key)
        self.models = models
        self.answer = FakeAnswer()
        for version in API_VERSIONS:
            self.add_route("POST", rf"/{version}/models/(?P<model>[^/:]+):generateContent", self._generate)
            self.add_route(
                "POST", rf"/{version}/models/(?P<model>[^/:]+):streamGenerateContent", self._stream_generate
            )

    def generate_calls(self) -> list[RecordedRequest]:
        """Every generateContent request received, in order."""
        return self.requests_to("POST", GENERATE_PATH)

    def stream_calls(self) -> list[RecordedRequest]:
        """Every streamGenerateContent request received, in order."""
        return self.requests_to("POST", STREAM_PATH)

    def throttled_reply(self, retry_delay: str | None = None) -> Reply:
        """A 429 RESOURCE_EXHAUSTED, with RetryInfo's retryDelay (e.g. "7s") when given."""
        reply = self.error_reply(429, "Resource has been exhausted (e.g. check quota).")
        if retry_delay is not None:
            reply.body["error"]["details"] = [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
            ]
        return reply

    def _generate(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if request.json().get("tools"):
            return self._generate_content(request, match)
        refused = self._refusal(request, match["model"], "generateContent")
        if refused is not None:
            return refused
        answer = self.answer
        return Reply(200, self._response(answer, answer.text, match["model"], last=True))

    def _stream_generate(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if request.query.get("alt") != ["sse"]:
            return self.error_reply(400, "this fake streams server-sent events only (alt=sse)")
        refused = self._refusal(request, match["model"], "streamGenerateContent")
        if refused is not None:
            return refused
        return Reply(
            200, Streamed(self._events(self.answer, match["model"])), {"Content-Type": "text/event-stream"}
        )

    def _refusal(self, request: RecordedRequest, model: str, method: str) -> Reply | None:
        """The error the Gemini API answers before generating anything, if any."""
        if self.generate_delay_s:
            self._release.wait(self.generate_delay_s)
        if not self._authorized(request):
            return self.invalid_key_reply()
        if model not in self.models:
            return self.error_reply(
                404, f"models/{model} is not found for API version v1beta, or is not supported for {method}."
            )
        body: Any = request.json()
        if not body.get("contents"):
            return self.error_reply(400, "* GenerateContentRequest.contents: contents is not specified")
        return None

    def _events(self, answer: FakeAnswer, model: str) -> Iterator[bytes]:
        chunks = answer.chunks or [""]
        for number, chunk in enumerate(chunks, start=1):
            if number > 1 and answer.chunk_delay_s:
                self._release.wait(answer.chunk_delay_s)
            last = number == len(chunks)
            yield _event(self._response(answer, chunk, model, last=last, sent=number))
            if number == answer.error_after:
                status = answer.error_status
                yield _event(self.error_reply(status, "the stream broke off").body)
                return
            if number == answer.stall_after:
                self._release.wait(answer.stall_s)

    def _response(
        self, answer: FakeAnswer, text: str, model: str, *, last: bool, sent: int | None = None
    ) -> dict[str, Any]:
        """One GenerateContentResponse: the whole answer, or chunk number `sent` of a stream."""
        # A stream counts the output tokens so far; its last chunk carries the answer's totals.
        output = answer.output_tokens if last else (sent or 0) * answer.output_tokens // len(answer.chunks)
        response: dict[str, Any] = {
            "usageMetadata": {
                "promptTokenCount": answer.prompt_tokens,
                "candidatesTokenCount": output,
                "totalTokenCount": answer.prompt_tokens + output,
            },
            "modelVersion": model,
            "responseId": "fake-response",
        }
        if answer.block_reason is not None:
            response["promptFeedback"] = {"blockReason": answer.block_reason}
            return response
        # A withheld answer (finish reason SAFETY, ...) has no content.
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}} if text else {}
        if last and answer.finish_reason is not None:
            candidate["finishReason"] = answer.finish_reason
        candidate["index"] = 0
        response["candidates"] = [candidate]
        return response


def _event(payload: Any) -> bytes:
    """One server-sent event carrying `payload` as JSON, as the Gemini API frames them."""
    return b"data: " + json.dumps(payload).encode() + b"\r\n\r\n"
