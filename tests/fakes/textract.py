"""A fake Amazon Textract serving DetectDocumentText over its JSON protocol (awsJson1_1), for real boto3.

moto 5.2 implements DetectDocumentText, but answers every document with the same empty block list and
never looks at it; this fake checks what Textract checks of a synchronous call (a JPEG, PNG, TIFF or a
one-page PDF, at most 10 MB, else UnsupportedDocumentException or DocumentTooLargeException) and answers
a PAGE block, then a LINE block per line and a WORD block per word, as Textract does.

The lines are scripted per call (`pages`, in order); once they run out, each page answers one line
naming the call's number ("scanned line N"). Errors use the JSON protocol's shape: `__type` and message.
"""

from __future__ import annotations

import base64
import io
import re
import uuid
from collections import deque
from typing import Any

from .http import FakeHTTPServer, RecordedRequest, Reply

TARGET = "Textract.DetectDocumentText"
MAX_BYTES = 10 * 1024 * 1024
ERROR_TYPES = {
    400: "InvalidParameterException",
    403: "AccessDeniedException",
    429: "ThrottlingException",
    500: "InternalServerError",
}


def textract_error(status: int, kind: str, message: str) -> Reply:
    return Reply(status, {"__type": kind, "Message": message}, {"x-amzn-ErrorType": kind})


class FakeTextract(FakeHTTPServer):
    """Serves `POST /` with `X-Amz-Target: Textract.DetectDocumentText`."""

    def __init__(self) -> None:
        super().__init__()
        self.pages: deque[list[str]] = deque()
        self.add_route("POST", "/", self._detect)

    def error_reply(self, status: int, message: str) -> Reply:
        return textract_error(status, ERROR_TYPES.get(status, "InternalServerError"), message)

    def documents(self) -> list[bytes]:
        """The document bytes of every DetectDocumentText call, in order."""
        return [base64.b64decode(r.json()["Document"]["Bytes"]) for r in self.requests if _is_detect(r)]

    def _detect(self, request: RecordedRequest, _: re.Match[str]) -> Reply:
        if not _is_detect(request):
            return textract_error(400, "UnknownOperationException", "only DetectDocumentText is served")
        document = request.json().get("Document", {})
        if "S3Object" in document or "Bytes" not in document:
            return textract_error(400, "InvalidParameterException", "this fake reads Document.Bytes only")
        data = base64.b64decode(document["Bytes"])
        if len(data) > MAX_BYTES:
            return textract_error(400, "DocumentTooLargeException", "S3 object size is more than the limit")
        if not _one_page_pdf_or_image(data):
            return textract_error(
                400, "UnsupportedDocumentException", "Request has unsupported document format"
            )
        number = sum(1 for r in self.requests if _is_detect(r))
        lines = self.pages.popleft() if self.pages else [f"scanned line {number}"]
        return Reply(200, {"DocumentMetadata": {"Pages": 1}, "Blocks": _blocks(lines)})


def _is_detect(request: RecordedRequest) -> bool:
    return request.headers.get("x-amz-target") == TARGET


def _one_page_pdf_or_image(data: bytes) -> bool:
    if data.startswith((b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"II*\x00", b"MM\x00*")):
        return True
    if not data.startswith(b"%PDF-"):
        return False
    from pypdf import PdfReader

    try:
        return len(PdfReader(io.BytesIO(data)).pages) == 1
    except Exception:
        return False


def _blocks(lines: list[str]) -> list[dict[str, Any]]:
    def block(kind: str, text: str | None = None) -> dict[str, Any]:
        found: dict[str, Any] = {"BlockType": kind, "Id": str(uuid.uuid4()), "Confidence": 99.1}
        if text is not None:
            found["Text"] = text
        return found

    page = block("PAGE")
    blocks = [page]
    children: list[str] = []
    for line in lines:
        words = [block("WORD", word) for word in line.split()]
        line_block = block("LINE", line) | {
            "Relationships": [{"Type": "CHILD", "Ids": [w["Id"] for w in words]}]
        }
        children.append(line_block["Id"])
        blocks += [line_block, *words]
    page["Relationships"] = [{"Type": "CHILD", "Ids": children}]
    return blocks
