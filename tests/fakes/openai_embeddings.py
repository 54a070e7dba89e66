"""A fake OpenAI-compatible embeddings server (OpenAI, Ollama's /v1, TEI's OpenAI route)."""

from __future__ import annotations

import re

from . import fake_vector
from .http import FakeHTTPServer, RecordedRequest, Reply

EMBEDDINGS_PATH = r"(?:/v1)?/embeddings"


class FakeOpenAIEmbeddings(FakeHTTPServer):
    """Serves `POST /v1/embeddings` (and `/embeddings`) with deterministic unit vectors.

    `dimension` is what the fake answers with (OpenAI-style requests carry no dimension); set it to
    another value to simulate a model of the wrong size. With `api_key` set, other bearer tokens get
    a 401 that echoes the rejected key, as OpenAI's own message partly does. `data[]` is answered
    in reverse order so that clients must sort by `index`.
    """

    def __init__(self, *, dimension: int = 8, api_key: str | None = None) -> None:
        super().__init__()
        self.dimension = dimension
        self.api_key = api_key
        self.add_route("POST", EMBEDDINGS_PATH, self._embeddings)

    @property
    def base_url(self) -> str:
        """The value for OPENAI_BASE_URL."""
        return f"{self.url}/v1"

    def embedding_batches(self) -> list[list[str]]:
        """The `input` lists of every embeddings request received, in order."""
        return [list(r.json()["input"]) for r in self.requests_to("POST", EMBEDDINGS_PATH)]

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(status, {"error": {"message": message, "type": "invalid_request_error", "code": None}})

    def _embeddings(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if self.api_key is not None:
            given = request.headers.get("authorization", "").removeprefix("Bearer ")
            if given != self.api_key:
                return self.error_reply(401, f"Incorrect API key provided: {given}.")
        body = request.json()
        inputs = body["input"]
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(text, self.dimension)}
            for i, text in enumerate(texts)
        ]
        data.reverse()
        return Reply(
            200,
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            },
        )
