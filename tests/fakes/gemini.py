"""A fake Gemini API (generativelanguage.googleapis.com) for the real google-genai client.

Point the client at it with `http_options=types.HttpOptions(base_url=fake.url)` (GEMINI_BASE_URL).
google-genai joins `{base_url}/{api_version}/{path}`; its default api_version is `v1`, and `v1beta`
is served too. To extend the fake, add routes in `__init__` with `self.add_route(method, regex, handler)`
for each API version in `API_VERSIONS`.

Served, in the documented REST shapes:
- `POST /models/{model}:batchEmbedContents`
- `GET /fileSearchStores?pageSize=&pageToken=`: `{fileSearchStores: [...], nextPageToken}`, paginated
- `POST /models/{model}:generateContent` with the `fileSearch` tool: a candidate whose `groundingMetadata`
  is whatever the test put in `groundings[store name]` (none: no groundingMetadata), and a 404
  NOT_FOUND for a store not in `stores`.
"""

from __future__ import annotations

import re
import threading
from typing import Any

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

    def __init__(
        self,
        *,
        api_key: str = "test-gemini-key",
        force_dimension: int | None = None,
        max_page_size: int = 20,
    ) -> None:
        super().__init__()
        self.api_key = api_key
        self.force_dimension = force_dimension
        # File Search stores, in listing order: {"name": "fileSearchStores/...", "displayName": ...}.
        self.stores: list[dict[str, Any]] = []
        # groundingMetadata (REST JSON) generateContent answers with, per store name.
        self.groundings: dict[str, dict[str, Any]] = {}
        self.max_page_size = max_page_size
        self.generate_delay_s = 0.0  # delay every generateContent answer (released early by `stop()`)
        self._release = threading.Event()
        for version in API_VERSIONS:
            self.add_route(
                "POST", rf"/{version}/models/(?P<model>[^/:]+):batchEmbedContents", self._batch_embed_contents
            )
            self.add_route("GET", rf"/{version}/fileSearchStores", self._list_file_search_stores)
            self.add_route(
                "POST", rf"/{version}/models/(?P<model>[^/:]+):generateContent", self._generate_content
            )

    def add_store(self, store_id: str, display_name: str | None = None) -> str:
        """Create `fileSearchStores/{store_id}`; returns its full name."""
        store: dict[str, Any] = {"name": f"fileSearchStores/{store_id}", "createTime": "2025-11-01T00:00:00Z"}
        if display_name is not None:
            store["displayName"] = display_name
        self.stores.append(store)
        return str(store["name"])

    def list_calls(self) -> list[RecordedRequest]:
        """Every fileSearchStores list request received, in order."""
        return self.requests_to("GET", r"/v1(?:beta)?/fileSearchStores")

    def generate_calls(self) -> list[RecordedRequest]:
        """Every generateContent request received, in order."""
        return self.requests_to("POST", r"/v1(?:beta)?/models/[^/:]+:generateContent")

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

    def _list_file_search_stores(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if not self._authorized(request):
            return self.invalid_key_reply()
        size = int(request.query.get("pageSize", ["10"])[0])
        size = min(max(size, 1), self.max_page_size)
        token = request.query.get("pageToken", [""])[0]
        start = int(token) if token else 0
        page = self.stores[start : start + size]
        body: dict[str, Any] = {"fileSearchStores": page} if page else {}
        if start + size < len(self.stores):
            body["nextPageToken"] = str(start + size)
        return Reply(200, body)

    def stop(self) -> None:
        self._release.set()
        super().stop()

    def _generate_content(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if self.generate_delay_s:
            self._release.wait(self.generate_delay_s)
        if not self._authorized(request):
            return self.invalid_key_reply()
        body = request.json()
        # The API parses proto JSON, which accepts the camelCase and the proto field names (google-genai
        # sends the tool's fields in snake_case).
        file_search = [
            tool.get("fileSearch") or tool.get("file_search") or {} for tool in body.get("tools", [])
        ]
        names = [
            name
            for tool in file_search
            for name in tool.get("fileSearchStoreNames") or tool.get("file_search_store_names") or []
        ]
        if not names:
            return self.error_reply(400, "this fake answers fileSearch requests only")
        known = {store["name"] for store in self.stores}
        for name in names:
            if name not in known:
                return self.error_reply(404, f"File search store {name} not found.")
        query = "".join(part.get("text", "") for part in body["contents"][0]["parts"])
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": f"Answer to: {query}"}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
        grounding = self.groundings.get(names[0])
        if grounding is not None:
            candidate["groundingMetadata"] = grounding
        return Reply(
            200,
            {
                "candidates": [candidate],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                "modelVersion": match["model"],
            },
        )
