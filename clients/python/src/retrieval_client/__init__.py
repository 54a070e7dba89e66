"""Python client of the retrieval service: RetrievalClient (sync) and AsyncRetrievalClient (asyncio, trio).

    from retrieval_client import RetrievalClient
    client = RetrievalClient("http://127.0.0.1:8000", api_key="rk_...")
    hits = client.retrieve(query="How do I book travel?", grade=0.2, store="handbook")

Errors raise RetrievalApiError subclasses named by the service's codes (retrieval_client.error_codes).
LangChain and LlamaIndex retrievers: retrieval_client.langchain, retrieval_client.llama_index (extras).
"""

from __future__ import annotations

from retrieval_client._sse import AnswerEvent
from retrieval_client.async_client import AsyncRetrievalClient
from retrieval_client.client import RetrievalClient
from retrieval_client.error_codes import *  # noqa: F403
from retrieval_client.error_codes import __all__ as _error_classes
from retrieval_client.errors import (
    RetrievalApiError,
    RetrievalConnectionError,
    RetrievalError,
    RetrievalTimeoutError,
)
from retrieval_client.folder_sync import SyncReport

__version__ = "0.1.0"
__all__ = [
    "AnswerEvent",
    "AsyncRetrievalClient",
    "RetrievalApiError",
    "RetrievalClient",
    "RetrievalConnectionError",
    "RetrievalError",
    "RetrievalTimeoutError",
    "SyncReport",
    *_error_classes,
]
