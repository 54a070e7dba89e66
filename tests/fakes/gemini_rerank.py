"""FakeGemini plus `generateContent`, answering a JSON-constrained reranking prompt.

The prompt's user turn must be the JSON `{"query", "passages": [{"index", "text"}]}` that
`retrieval_core.rerank.llm.build_prompt` writes; the fake scores each passage with `overlap_score`
and answers `{"scores": [{"index", "score"}]}` as the model's text. Set `answer_text` to make the
"model" answer something else (garbage, missing indices, ...).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from .gemini import API_VERSIONS, FakeGemini
from .http import RecordedRequest, Reply
from .rerank_scoring import overlap_score

GENERATE_PATH = r"/v1(?:beta)?/models/[^/:]+:generateContent"


class FakeGeminiRerank(FakeGemini):
    """Serves `POST /{v1,v1beta}/models/{model}:generateContent` besides the embedding routes."""

    def __init__(self, *, api_key: str = "test-gemini-key", hang_s: float = 0.0) -> None:
        super().__init__(api_key=api_key)
        self.answer_text: str | None = None
        self.hang_s = hang_s  # delay every generateContent answer (released early by `stop()`)
        self._release = threading.Event()
        for version in API_VERSIONS:
            self.add_route("POST", rf"/{version}/models/(?P<model>[^/:]+):generateContent", self._generate)

    def stop(self) -> None:
        self._release.set()
        super().stop()

    def generate_calls(self) -> list[RecordedRequest]:
        """Every generateContent request received, in order."""
        return self.requests_to("POST", GENERATE_PATH)

    def _generate(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if self.hang_s:
            self._release.wait(self.hang_s)
        if not self._authorized(request):
            return self.invalid_key_reply()
        body: Any = request.json()
        config = body.get("generationConfig", {})
        if config.get("responseMimeType") != "application/json" or "responseJsonSchema" not in config:
            return self.error_reply(400, "the fake only answers JSON-constrained requests")
        if self.answer_text is not None:
            text = self.answer_text
        else:
            prompt = json.loads(body["contents"][-1]["parts"][0]["text"])
            scores = [
                {"index": p["index"], "score": overlap_score(prompt["query"], p["text"])}
                for p in prompt["passages"]
            ]
            text = json.dumps({"scores": scores})
        return Reply(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 100,
                    "candidatesTokenCount": 20,
                    "totalTokenCount": 120,
                },
                "modelVersion": match["model"],
            },
        )
