"""A fake cross-encoder reranker service speaking TEI's and the Cohere/Jina-style request shapes.

TEI: `POST /rerank` {"query", "texts", "raw_scores"} -> [{"index", "score"}], best first.
Cohere/Jina: `POST /v1/rerank` (and `/v2/rerank`) {"model"?, "query", "documents", "top_n"?}
-> {"id", "results": [{"index", "relevance_score"}], "meta"}, best first.
Scores are `overlap_score` (tests.fakes.rerank_scoring), so tests can work them out by hand.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any

from .http import FakeHTTPServer, RecordedRequest, Reply
from .rerank_scoring import ranked

TEI_PATH = r"/rerank"
COHERE_PATH = r"/v[12]/rerank"


class FakeReranker(FakeHTTPServer):
    """Both shapes on one server. `max_batch_size` mimics TEI's --max-client-batch-size (422 above it);
    `hang_s` delays every answer (released early by `stop()`), for timeout tests; with `api_key` set,
    other bearer tokens get a 401.
    """

    def __init__(self, *, api_key: str | None = None, max_batch_size: int = 32, hang_s: float = 0.0) -> None:
        super().__init__()
        self.api_key = api_key
        self.max_batch_size = max_batch_size
        self.hang_s = hang_s
        self._release = threading.Event()
        self.add_route("POST", TEI_PATH, self._tei)
        self.add_route("POST", COHERE_PATH, self._cohere)

    def stop(self) -> None:
        self._release.set()
        super().stop()

    def error_reply(self, status: int, message: str) -> Reply:
        # TEI's error body; Cohere answers {"message": ...}, which clients treat the same way.
        return Reply(status, {"error": message, "error_type": "Validation" if status < 500 else "Backend"})

    def _prelude(self, request: RecordedRequest) -> Reply | None:
        if self.hang_s:
            self._release.wait(self.hang_s)
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return self.error_reply(401, "invalid api token")
        return None

    def _tei(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        refused = self._prelude(request)
        if refused is not None:
            return refused
        body: Any = request.json()
        if not isinstance(body.get("query"), str) or not isinstance(body.get("texts"), list):
            return self.error_reply(
                422, "Failed to deserialize the JSON body: missing field `query` or `texts`"
            )
        texts: list[str] = body["texts"]
        if len(texts) > self.max_batch_size:
            return self.error_reply(
                422, f"batch size {len(texts)} > maximum allowed batch size {self.max_batch_size}"
            )
        results = []
        for index, score in ranked(body["query"], texts):
            # raw_scores: the logit before TEI's sigmoid, unbounded.
            value = math.log(score / (1 - score)) if body.get("raw_scores") and 0 < score < 1 else score
            results.append({"index": index, "score": value})
        return Reply(200, results)

    def _cohere(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        refused = self._prelude(request)
        if refused is not None:
            return refused
        body: Any = request.json()
        if not isinstance(body.get("query"), str) or not isinstance(body.get("documents"), list):
            return Reply(400, {"message": "invalid request: query and documents are required"})
        results = [
            {"index": index, "relevance_score": score}
            for index, score in ranked(body["query"], body["documents"])
        ]
        if body.get("top_n") is not None:
            results = results[: int(body["top_n"])]
        return Reply(
            200,
            {"id": "rerank-fake", "results": results, "meta": {"billed_units": {"search_units": 1}}},
        )
