"""Semantic recall: an agent finds an earlier conversation by meaning, not by its words.

Offline by default: a scripted model plays the LLM and a synonym embedding stands in for a real
one. With OPENAI_API_KEY set, LangChain's side uses OpenAIEmbeddings and ChatOpenAI instead.

    python examples/semantic_recall.py [path/to/memory.db]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_sessions import SessionMemoryMiddleware, SynonymEmbeddings, VectorStoreRecall
from sessions_core import SessionManager

QUESTION = "What did we decide about the car?"


class ScriptedModel(FakeMessagesListChatModel):
    """Plays the LLM offline: answers with the scripted messages in order."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def model_and_embeddings() -> tuple[Any, Any]:
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI, OpenAIEmbeddings

        return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini")), OpenAIEmbeddings()
    return ScriptedModel(
        responses=[
            AIMessage("Noted: a three-year lease on the automobile, signed in March."),
            AIMessage("", tool_calls=[{"name": "session_search", "args": {"query": QUESTION}, "id": "call_1"}]),
            AIMessage("In March you agreed on a three-year automobile lease."),
        ]
    ), SynonymEmbeddings()


def langchain(db_path: Path) -> None:
    model, embeddings = model_and_embeddings()
    recall = VectorStoreRecall(InMemoryVectorStore(embeddings))  # or Chroma, PGVector, Qdrant, ...
    manager = SessionManager(db_path, namespace="langchain").with_semantic_recall(recall)
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(manager)])

    agent.invoke(
        {"messages": [HumanMessage("We signed the automobile lease for three years.")]},
        {"configurable": {"thread_id": "march"}},
    )
    manager.drain_recall()  # the background sender does it anyway; now, so the next run sees it

    print(f"word search for {QUESTION!r}: {manager.search(QUESTION)}")
    result = agent.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "june"}})
    for message in result["messages"]:
        if message.type == "tool":
            print(f"  session_search found: {message.content!r}")
        elif message.type == "ai" and message.text:
            print(f"  ai: {message.text}")
    manager.close()


def llamaindex(db_path: Path) -> None:
    from llama_index.core.vector_stores import SimpleVectorStore

    from llamaindex_sessions import SynonymEmbedding
    from llamaindex_sessions import VectorStoreRecall as LlamaIndexRecall

    recall = LlamaIndexRecall(SimpleVectorStore(), SynonymEmbedding())  # any vector store + embed model
    manager = SessionManager(db_path, namespace="llamaindex").with_semantic_recall(recall, min_score=0.05)
    trip = manager.create("trip")
    manager.append(
        trip.id,
        {
            "id": "t1",
            "role": "user",
            "parts": [{"type": "text", "text": "We rented a vehicle for the holiday in Portugal."}],
        },
    )
    manager.append(
        trip.id, {"id": "t2", "role": "user", "parts": [{"type": "text", "text": "The dog stays with my sister."}]}
    )
    manager.drain_recall()
    for mode in ("text", "semantic", "hybrid"):
        hits = manager.search("car hire on our vacation", mode=mode)
        print(f"  {mode:<8} search: {[hit.content for hit in hits]}")
    manager.close()


def main(db_path: Path, *, kept: bool) -> None:
    print("LangChain: a create_agent agent with recall on its sessions")
    langchain(db_path)
    print("LlamaIndex: a vector store with an embed model, on a manager")
    llamaindex(db_path)
    if kept:
        print(f"the outbox, from the shell: sessions --store {db_path} recall backlog")
    else:
        print(
            "the database was temporary and is gone; to keep one and look at its outbox:"
            " python examples/semantic_recall.py memory.db && sessions --store memory.db recall backlog"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]), kept=True)
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder) / "memory.db", kept=False)
