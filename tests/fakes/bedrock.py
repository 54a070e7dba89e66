"""A fake Amazon Bedrock Runtime serving Titan Text Embeddings v2 through InvokeModel."""

from __future__ import annotations

import re
import time

from . import fake_vector
from .http import FakeHTTPServer, RecordedRequest, Reply

TITAN_V2 = "amazon.titan-embed-text-v2:0"
INVOKE_PATH = r"/model/(?P<model_id>[^/]+)/invoke"
ERROR_CODES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    429: "ThrottlingException",
    500: "InternalServerException",
    502: "BadGatewayException",
    503: "ServiceUnavailableException",
}


def aws_error_reply(status: int, message: str) -> Reply:
    """An AWS rest-json error: botocore reads the error code from the x-amzn-ErrorType header."""
    code = ERROR_CODES.get(status, "InternalServerException")
    return Reply(status, {"message": message}, {"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/"})


class FakeBedrockRuntime(FakeHTTPServer):
    """Serves `POST /model/{modelId}/invoke` (rest-json) for Titan v2 with its documented body.

    `force_dimension` answers with another size than requested; `delay_s` slows every answer so a
    test can observe concurrency through `max_in_flight`.
    """

    def __init__(self, *, force_dimension: int | None = None, delay_s: float = 0.0) -> None:
        super().__init__()
        self.force_dimension = force_dimension
        self.delay_s = delay_s
        self.add_route("POST", INVOKE_PATH, self._invoke)

    def invoke_calls(self) -> list[RecordedRequest]:
        """Every InvokeModel request received, in order."""
        return self.requests_to("POST", INVOKE_PATH)

    def error_reply(self, status: int, message: str) -> Reply:
        return aws_error_reply(status, message)

    def _invoke(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        if self.delay_s:
            time.sleep(self.delay_s)
        if match["model_id"] != TITAN_V2:
            return self.error_reply(400, "The provided model identifier is invalid.")
        body = request.json()
        dimension = body.get("dimensions", 1024)
        if dimension not in (256, 512, 1024):
            return self.error_reply(400, f"Malformed input request: dimensions {dimension} is not valid")
        vector = fake_vector(
            body["inputText"], self.force_dimension or dimension, normalize=body.get("normalize", True)
        )
        return Reply(
            200,
            {
                "embedding": vector,
                "inputTextTokenCount": len(body["inputText"].split()),
                "embeddingsByType": {"float": vector},
            },
        )
