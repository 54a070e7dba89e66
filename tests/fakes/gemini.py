"""A fake Gemini API (generativelanguage.googleapis.com) for the real google-genai client.

Point the client at it with `http_options=types.HttpOptions(base_url=fake.url)` (GEMINI_BASE_URL).
google-genai joins `{base_url}/{api_version}/{path}`; its default api_version is `v1`, and `v1beta`
is served too. To extend the fake (fileSearchStores, generateContent, ...), add routes in `__init__`
with `self.add_route(method, regex, handler)` for each API version in `API_VERSIONS`.
"""

from __future__ import annotations

import re

from . import fake_vector
from .http import FakeHTTPServer, RecordedRequest, Reply

API_VERSIONS = ("v1", "v1beta")
DEFAULT_DIMENSION = 3072
MAX_BATCH_REQUESTS = 100
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class FakeGemini(FakeHTTPServer):
    """Serves `POST /{v1,v1beta}/models/{model}:batchEmbedContents`.

    Vectors depend on the text and the request's taskType, and are not unit length (the real API
    normalises only its full 3072 dimensions). `force_dimension` makes the fake answer with
    another size than the request's outputDimensionality.
    """

    def __init__(self, *, api_key: str = "test-gemini-key", force_dimension: int | None = None) -> None:
        super().__init__()
        self.api_key = api_key
        self.force_dimension = force_dimension
        for version in API_VERSIONS:
            self.add_route(
                "POST", rf"/{version}/models/(?P<model>[^/:]+):batchEmbedContents", self._batch_embed_contents
            )

    def embed_calls(self) -> list[RecordedRequest]:
        """Every batchEmbedContents request received, in order."""
        return self.requests_to("POST", r"/v1(?:beta)?/models/[^/:]+:batchEmbedContents")

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(
            status,
            {"error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}},
        )

    def invalid_key_reply(self) -> Reply:
        """What the Gemini API answers for a wrong key: 400, not 401."""
        reply = self.error_reply(400, "API key not valid. Please pass a valid API key.")
        reply.body["error"]["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        ]
        return reply

    def _authorized(self, request: RecordedRequest) -> bool:
        given = request.headers.get("x-goog-api-key") or request.query.get("key", [""])[0]
        return given == self.api_key

    def _batch_embed_contents(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if not self._authorized(request):
            return self.invalid_key_reply()
        requests = request.json()["requests"]
        if len(requests) > MAX_BATCH_REQUESTS:
            return self.error_reply(400, f"at most {MAX_BATCH_REQUESTS} requests can be in one batch")
        embeddings = []
        for item in requests:
            if item.get("model") != f"models/{match['model']}":
                return self.error_reply(400, f"request model {item.get('model')!r} differs from the URL's")
            text = "".join(part.get("text", "") for part in item["content"]["parts"])
            dimension = self.force_dimension or item.get("outputDimensionality") or DEFAULT_DIMENSION
            vector = fake_vector(text, dimension, salt=item.get("taskType", ""), normalize=False)
            embeddings.append({"values": vector})
        return Reply(200, {"embeddings": embeddings})
