"""The LangChain and LlamaIndex retrievers, called as their users call them, against a live service."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

QUESTION = "How far ahead must flights be booked?"


def test_langchain_retriever_in_a_chain(url: str, admin_key: str, handbook: str) -> None:
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from retrieval_client.langchain import RetrievalServiceRetriever

    retriever = RetrievalServiceRetriever(base_url=url, api_key=SecretStr(admin_key), store=handbook, top_k=2)
    documents = retriever.invoke(QUESTION)
    assert len(documents) == 2 and all(isinstance(d, Document) for d in documents)
    best = documents[0]
    assert best.metadata["documentId"] == "travel" and best.metadata["team"] == "travel"
    assert best.id == best.metadata["chunkId"] == "travel#0"
    assert best.metadata["score"] >= documents[1].metadata["score"]
    assert admin_key not in repr(retriever)

    def prompt(inputs: dict[str, object]) -> str:
        return f"Context:\n{inputs['context']}\n\nQuestion: {inputs['question']}"

    def joined(documents: list[Document]) -> str:
        return "\n".join(d.page_content for d in documents)

    chain = {
        "context": retriever | RunnableLambda(joined),
        "question": RunnablePassthrough(),
    } | RunnableLambda(prompt)
    assert "14 days ahead" in chain.invoke(QUESTION)

    filtered = RetrievalServiceRetriever(
        base_url=url,
        api_key=SecretStr(admin_key),
        store=handbook,
        search_options={"metadataFilter": {"team": "finance"}, "useHybrid": True},
    )
    [only] = filtered.invoke(QUESTION)
    assert only.metadata["documentId"] == "expenses" and "fusedScore" in only.metadata


@pytest.mark.anyio
async def test_langchain_retriever_async(url: str, admin_key: str, handbook: str) -> None:
    from retrieval_client.langchain import RetrievalServiceRetriever

    retriever = RetrievalServiceRetriever(base_url=url, api_key=SecretStr(admin_key), store=handbook, top_k=1)
    [document] = await retriever.ainvoke(QUESTION)
    assert document.metadata["documentId"] == "travel"
    batch = await retriever.abatch([QUESTION, "Where do visitors sign in?"])
    assert [docs[0].metadata["documentId"] for docs in batch] == ["travel", "visitors"]


def test_llama_index_retriever_in_a_query_engine(url: str, admin_key: str, handbook: str) -> None:
    from llama_index.core import Settings
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.response_synthesizers import ResponseMode
    from llama_index.core.schema import NodeWithScore

    from retrieval_client.llama_index import RetrievalServiceRetriever

    retriever = RetrievalServiceRetriever(url, admin_key, store=handbook, top_k=2)
    nodes = retriever.retrieve(QUESTION)
    assert len(nodes) == 2 and all(isinstance(n, NodeWithScore) for n in nodes)
    assert nodes[0].node.node_id == "travel#0" and nodes[0].node.metadata["team"] == "travel"
    assert nodes[0].score is not None and nodes[1].score is not None and nodes[0].score >= nodes[1].score

    # The "no_text" synthesizer of LlamaIndex takes the global LLM whatever it is given: a mock, no network.
    Settings.llm = MockLLM()
    engine = RetrieverQueryEngine.from_args(retriever, response_mode=ResponseMode.NO_TEXT)
    response = engine.query(QUESTION)
    assert [n.node.metadata["documentId"] for n in response.source_nodes] == [
        "travel",
        nodes[1].node.metadata["documentId"],
    ]

    filtered = RetrievalServiceRetriever(
        url, admin_key, store=handbook, search_options={"metadataFilter": {"team": "facilities"}}
    )
    assert [n.node.metadata["documentId"] for n in filtered.retrieve(QUESTION)] == ["visitors"]


@pytest.mark.anyio
async def test_llama_index_retriever_async(url: str, admin_key: str, handbook: str) -> None:
    from retrieval_client.llama_index import RetrievalServiceRetriever

    retriever = RetrievalServiceRetriever(url, admin_key, store=handbook, top_k=1)
    [node] = await retriever.aretrieve(QUESTION)
    assert node.node.metadata["documentId"] == "travel"
