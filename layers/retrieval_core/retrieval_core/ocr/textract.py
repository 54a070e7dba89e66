"""Amazon Textract's synchronous DetectDocumentText, one call per scanned page.

Each page goes as a one-page PDF in the request (`Document.Bytes`): the synchronous call reads one page
of at most 10 MB, and answers in the time of the write, so it serves the HTTP API, the CLI and the S3
ingest alike. The asynchronous StartDocumentTextDetection reads many pages, but only from an S3 object,
and answers later (polling or an SNS topic), longer than a write may wait. The text is the LINE blocks,
in Textract's order, one per line. Only `textract:DetectDocumentText` is called.

The client comes from `clients.aws` on the first page read (boto3 imported then): 5 s to connect, 30 s
to read, AWS's standard retries (throttling included), 3 attempts. Its endpoint is AWS's, or
AWS_ENDPOINT_URL_TEXTRACT / AWS_ENDPOINT_URL as botocore reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrieval_core.clients.aws import AwsClientOptions, aws_failure, lazy_aws_client
from retrieval_core.parsers.exceptions import OcrFailedError, OcrRefusedError
from retrieval_core.parsers.scanned_pages import ScannedPage

# Textract's limit on a synchronous call's document.
MAX_DOCUMENT_BYTES = 10 * 1024 * 1024
# What Textract answers about the document itself: sending it again cannot help.
REFUSED_DOCUMENT_CODES = frozenset(
    {"BadDocumentException", "DocumentTooLargeException", "UnsupportedDocumentException"}
)
CLIENT_OPTIONS = AwsClientOptions(connect_timeout_s=5, read_timeout_s=30, retry_mode="standard", attempts=3)


class TextractOcr:
    """Reads scanned pages with DetectDocumentText."""

    name = "textract"

    def __init__(self, max_pages: int, client: Callable[[], Any] | None = None) -> None:
        self.max_pages = max_pages
        self._client = client or lazy_aws_client("textract", CLIENT_OPTIONS)

    def read_page(self, page: ScannedPage, timeout_s: float) -> str:
        """The LINE blocks' text of the page (a call in flight ends within the client's read timeout,
        whatever `timeout_s`; the parse deadline is checked before each page)."""
        from botocore.exceptions import BotoCoreError, ClientError

        document = page.as_pdf()
        if len(document) > MAX_DOCUMENT_BYTES:
            reason = (
                f"{len(document):,} bytes as a one-page PDF, over the {MAX_DOCUMENT_BYTES:,} Textract reads"
            )
            raise OcrRefusedError(self.name, page.number, reason)
        try:
            response = self._client().detect_document_text(Document={"Bytes": document})
        except (BotoCoreError, ClientError) as exc:
            failure = aws_failure(exc)
            if failure.kind == "answered" and failure.code in REFUSED_DOCUMENT_CODES:
                raise OcrRefusedError(self.name, page.number, f"{failure.code}: {failure.message}") from None
            if failure.credentials_refused:
                reason = f"{failure.reason}: check the IAM permission textract:DetectDocumentText"
            else:
                reason = failure.reason + (f": {failure.message}" if failure.message else "")
            raise OcrFailedError(self.name, page.number, reason) from None
        lines = [b.get("Text", "") for b in response.get("Blocks", []) if b.get("BlockType") == "LINE"]
        return "\n".join(line for line in lines if line)
