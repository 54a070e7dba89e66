"""A fake Bedrock Agent Runtime serving the `Rerank` operation (rest-json `POST /rerank`) for real boto3.

Scores are `overlap_score` (tests.fakes.rerank_scoring), best first, cut to numberOfResults. With
`page_size` set, results come in pages linked by `nextToken`, as the API may answer.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from .bedrock import aws_error_reply
from .http import FakeHTTPServer, RecordedRequest, Reply
from .rerank_scoring import ranked

RERANK_PATH = r"/rerank"
MODEL_ARN = re.compile(r"arn:aws[a-z-]*:bedrock:[a-z0-9-]+::foundation-model/[a-z0-9.:-]+")


class FakeBedrockAgentRuntime(FakeHTTPServer):
    """Validates the documented request shape and answers {"results": [{"index", "relevanceScore"}]}."""

    def __init__(self, *, page_size: int | None = None, hang_s: float = 0.0) -> None:
        super().__init__()
        self.page_size = page_size
        self.hang_s = hang_s  # delay every answer (released early by `stop()`)
        self._release = threading.Event()
        self.add_route("POST", RERANK_PATH, self._rerank)

    def stop(self) -> None:
        self._release.set()
        super().stop()

    def rerank_calls(self) -> list[RecordedRequest]:
        """Every Rerank request received, in order."""
        return self.requests_to("POST", RERANK_PATH)

    def error_reply(self, status: int, message: str) -> Reply:
        return aws_error_reply(status, message)

    def _rerank(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if self.hang_s:
            self._release.wait(self.hang_s)
        body: Any = request.json()
        try:
            (query,) = body["queries"]
            assert query["type"] == "TEXT"
            query_text: str = query["textQuery"]["text"]
            texts: list[str] = []
            for source in body["sources"]:
                assert source["type"] == "INLINE"
                document = source["inlineDocumentSource"]
                assert document["type"] == "TEXT"
                texts.append(document["textDocument"]["text"])
            config = body["rerankingConfiguration"]
            assert config["type"] == "BEDROCK_RERANKING_MODEL"
            bedrock_config = config["bedrockRerankingConfiguration"]
            model_arn = bedrock_config["modelConfiguration"]["modelArn"]
        except (KeyError, TypeError, ValueError, AssertionError):
            return self.error_reply(
                400, "1 validation error detected: the request does not match RerankRequest"
            )
        if not MODEL_ARN.fullmatch(model_arn):
            return self.error_reply(400, f"The provided model ARN {model_arn} is invalid")
        if not 1 <= len(texts) <= 1000 or not all(texts) or not query_text:
            return self.error_reply(400, "sources must hold 1 to 1000 non-empty texts")
        results = [{"index": index, "relevanceScore": score} for index, score in ranked(query_text, texts)][
            : bedrock_config.get("numberOfResults", len(texts))
        ]
        start = int(body.get("nextToken") or 0)
        if self.page_size is None:
            return Reply(200, {"results": results})
        page: dict[str, Any] = {"results": results[start : start + self.page_size]}
        if start + self.page_size < len(results):
            page["nextToken"] = str(start + self.page_size)
        return Reply(200, page)
