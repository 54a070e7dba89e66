"""A LangChain retriever over the service: `pip install 'retrieval-service-client[langchain]'`.

from retrieval_client.langchain import RetrievalServiceRetriever
retriever = RetrievalServiceRetriever(base_url="http://127.0.0.1:8000", store="handbook", top_k=4)
docs = retriever.invoke("How do I book travel?")
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr, SecretStr

from retrieval_client._results import ranking_score, result_metadata, retrieve_body
from retrieval_client.async_client import AsyncRetrievalClient
from retrieval_client.client import RetrievalClient
from retrieval_client.models import RetrieveResponse


class RetrievalServiceRetriever(BaseRetriever):
    """Documents from POST /rag/retrieve: one per chunk, best first, with the chunk's metadata, its id
    (`chunkId`, also the Document's id) and its scores (`score`, `fusedScore`, `rerankScore`).

    `search_options` takes any other field of the retrieve request as the API names it
    (`{"metadataFilter": {"team": "hr"}, "useHybrid": True, "rerank": {...}}`). `grade` defaults to 0:
    the `top_k` best chunks, whatever their similarity, as LangChain's retrievers give.
    """

    base_url: str | None = None
    api_key: SecretStr | None = None
    store: str | None = None
    top_k: int = Field(default=4, ge=1, le=100)
    grade: float = Field(default=0.0, ge=0.0, le=1.0)
    search_options: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = 60.0
    deadline_s: float = 120.0

    _client: RetrievalClient | None = PrivateAttr(default=None)
    _async_client: AsyncRetrievalClient | None = PrivateAttr(default=None)

    def _key(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key is not None else None

    def _body(self, query: str) -> dict[str, Any]:
        return retrieve_body(query, self.grade, self.top_k, self.store, self.search_options)

    def _documents(self, answer: RetrieveResponse) -> list[Document]:
        documents = []
        for result in answer["results"][: self.top_k]:
            metadata = result_metadata(result)
            metadata["score"] = ranking_score(result)
            documents.append(Document(id=result["id"], page_content=result["content"], metadata=metadata))
        return documents

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self._client is None:
            self._client = RetrievalClient(
                self.base_url, self._key(), timeout_s=self.timeout_s, deadline_s=self.deadline_s
            )
        return self._documents(self._client.retrieve(**self._body(query)))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self._async_client is None:
            self._async_client = AsyncRetrievalClient(
                self.base_url, self._key(), timeout_s=self.timeout_s, deadline_s=self.deadline_s
            )
        return self._documents(await self._async_client.retrieve(**self._body(query)))
