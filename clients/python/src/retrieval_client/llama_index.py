"""A LlamaIndex retriever over the service: `pip install 'retrieval-service-client[llama-index]'`.

from retrieval_client.llama_index import RetrievalServiceRetriever
retriever = RetrievalServiceRetriever(base_url="http://127.0.0.1:8000", store="handbook", top_k=4)
nodes = retriever.retrieve("How do I book travel?")
"""

from __future__ import annotations

from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from retrieval_client._results import ranking_score, result_metadata, retrieve_body
from retrieval_client.async_client import AsyncRetrievalClient
from retrieval_client.client import RetrievalClient
from retrieval_client.models import RetrieveResponse


class RetrievalServiceRetriever(BaseRetriever):
    """NodeWithScore from POST /rag/retrieve: one TextNode per chunk (its id the chunk id), best first,
    scored by what ordered them (rerank, fused or similarity score), with the chunk's metadata and every
    score in `metadata`.

    `search_options` takes any other field of the retrieve request as the API names it
    (`{"metadataFilter": {"team": "hr"}, "useHybrid": True}`). `grade` defaults to 0: the `top_k` best
    chunks, whatever their similarity.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        store: str | None = None,
        top_k: int = 4,
        grade: float = 0.0,
        search_options: dict[str, Any] | None = None,
        timeout_s: float = 60.0,
        deadline_s: float = 120.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.store = store
        self.top_k = top_k
        self.grade = grade
        self.search_options = dict(search_options or {})
        self._client = RetrievalClient(base_url, api_key, timeout_s=timeout_s, deadline_s=deadline_s)
        self._async_client = AsyncRetrievalClient(
            base_url, api_key, timeout_s=timeout_s, deadline_s=deadline_s
        )

    def _body(self, query_bundle: QueryBundle) -> dict[str, Any]:
        return retrieve_body(query_bundle.query_str, self.grade, self.top_k, self.store, self.search_options)

    def _nodes(self, answer: RetrieveResponse) -> list[NodeWithScore]:
        return [
            NodeWithScore(
                node=TextNode(id_=result["id"], text=result["content"], metadata=result_metadata(result)),
                score=ranking_score(result),
            )
            for result in answer["results"][: self.top_k]
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self._client.retrieve(**self._body(query_bundle)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(await self._async_client.retrieve(**self._body(query_bundle)))
