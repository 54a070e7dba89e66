"""A fake OpenAI-compatible chat completions server (OpenAI, vLLM, Ollama's /v1)."""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

from .http import FakeHTTPServer, RecordedRequest, Reply, Streamed

CHAT_PATH = r"(?:/v1)?/chat/completions"
DEFAULT_MODEL = "gpt-4o-mini"


def words(text: str) -> list[str]:
    """`text` in pieces of one word and the whitespace after it; the pieces join back to `text`."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


class FakeOpenAIChat(FakeHTTPServer):
    """Serves `POST /v1/chat/completions` (and `/chat/completions`) in OpenAI's documented shapes.

    The answer is the next of `answers` (a script), else `default_answer`. A token is a word here:
    `prompt_tokens` counts the words of every message, `completion_tokens` those of the answer, and an
    answer longer than the request's `max_completion_tokens` or `max_tokens` is cut there with
    finish_reason "length". With `"stream": true` it answers server-sent events: a role chunk, one chunk
    per word, a chunk with the finish_reason, then, when `stream_options.include_usage` asks and
    `send_usage` is on, a usage chunk with empty `choices`, then `data: [DONE]`.

    Failures: a model not in `models` gets OpenAI's 404 `model_not_found`; with `api_key` set, another
    bearer token gets a 401 that echoes it, as OpenAI's message partly does; a model in
    `fixed_temperature_models` refuses a temperature other than 1 (400, `param: temperature`), as OpenAI's
    reasoning models do; 429 error replies carry `Retry-After: retry_after_s` when it is set. `delay_s`
    delays every answer, `chunk_delay_s` each stream chunk after the first word (both released early by
    `stop()`). After that many words, `error_after` sends an error event (as OpenAI does when it fails
    mid-answer) and `stall_stream_after` waits until `stop()`; `keepalive_s` sends an SSE comment every
    0.1 s for that long before the first word, as a proxy keeping an idle stream open does.
    """

    def __init__(self, *, api_key: str | None = None, models: tuple[str, ...] = (DEFAULT_MODEL,)) -> None:
        super().__init__()
        self.api_key = api_key
        self.models = set(models)
        self.default_answer = "Paris is the capital of France [1]."
        self.answers: deque[str] = deque()
        self.fixed_temperature_models: set[str] = set()
        self.retry_after_s: int | None = None
        self.send_usage = True
        self.delay_s = 0.0
        self.chunk_delay_s = 0.0
        self.error_after: int | None = None
        self.stall_stream_after: int | None = None
        self.keepalive_s = 0.0
        self._release = threading.Event()
        self.add_route("POST", CHAT_PATH, self._chat)

    @property
    def base_url(self) -> str:
        """The value for GENERATION_BASE_URL."""
        return f"{self.url}/v1"

    def chat_bodies(self) -> list[dict[str, Any]]:
        """The JSON body of every chat completions request received, in order."""
        return [r.json() for r in self.requests_to("POST", CHAT_PATH)]

    def error_reply(self, status: int, message: str) -> Reply:
        headers = {"Retry-After": str(self.retry_after_s)} if status == 429 and self.retry_after_s else {}
        return Reply(
            status,
            {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}},
            headers,
        )

    def stop(self) -> None:
        self._release.set()
        super().stop()

    def _refusal(self, request: RecordedRequest, body: Any) -> Reply | None:
        if self.api_key is not None:
            given = request.headers.get("authorization", "").removeprefix("Bearer ")
            if given != self.api_key:
                return self.error_reply(401, f"Incorrect API key provided: {given}.")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return self.error_reply(400, "'messages' is a required property")
        if body.get("model") not in self.models:
            reply = self.error_reply(
                404, f"The model `{body.get('model')}` does not exist or you do not have access to it."
            )
            reply.body["error"]["code"] = "model_not_found"
            return reply
        if body["model"] in self.fixed_temperature_models and body.get("temperature", 1) != 1:
            reply = self.error_reply(
                400,
                f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                "Only the default (1) value is supported.",
            )
            reply.body["error"].update(param="temperature", code="unsupported_value")
            return reply
        return None

    def _chat(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if self.delay_s:
            self._release.wait(self.delay_s)
        body: Any = request.json()
        refusal = self._refusal(request, body)
        if refusal is not None:
            return refusal
        pieces = words(self.answers.popleft() if self.answers else self.default_answer)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish_reason = "stop"
        if limit is not None and len(pieces) > limit:
            pieces, finish_reason = pieces[:limit], "length"
        usage = {
            "prompt_tokens": sum(len(words(str(m.get("content", "")))) for m in body["messages"]),
            "completion_tokens": len(pieces),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        head = {"id": "chatcmpl-fake", "created": 1764201600, "model": body["model"]}
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and self.send_usage
            events = self._events(head, pieces, finish_reason, usage if include_usage else None)
            return Reply(200, Streamed(events), {"Content-Type": "text/event-stream"})
        message = {"role": "assistant", "content": "".join(pieces), "refusal": None}
        choice = {"index": 0, "message": message, "finish_reason": finish_reason}
        answer = {**head, "object": "chat.completion", "choices": [choice]}
        if self.send_usage:
            answer["usage"] = usage
        return Reply(200, answer)

    def _events(
        self, head: dict[str, Any], pieces: list[str], finish_reason: str, usage: dict[str, int] | None
    ) -> Iterator[bytes]:
        def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            chunk = {**head, "object": "chat.completion.chunk", "choices": choices, **extra}
            if usage is not None and "usage" not in extra:
                chunk["usage"] = None
            return f"data: {json.dumps(chunk)}\n\n".encode()

        yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        waited = 0.0
        while waited < self.keepalive_s and not self._release.is_set():
            yield b": keep-alive\n\n"
            self._release.wait(0.1)
            waited += 0.1
        for number, piece in enumerate(pieces):
            if number == self.error_after:
                error = {
                    "message": "The server had an error while processing your request.",
                    "type": "server_error",
                }
                yield f"data: {json.dumps({'error': error})}\n\n".encode()
                return
            if number == self.stall_stream_after:
                self._release.wait(60)
            if number and self.chunk_delay_s:
                self._release.wait(self.chunk_delay_s)
            yield event([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
        yield event([{"index": 0, "delta": {}, "finish_reason": finish_reason}])
        if usage is not None:
            yield event([], usage=usage)
        yield b"data: [DONE]\n\n"
