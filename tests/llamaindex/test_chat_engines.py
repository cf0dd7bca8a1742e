"""SimpleChatEngine, ContextChatEngine and CondensePlusContextChatEngine end to end:
sync, async and streaming (whose history write runs on a background thread)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from llama_index.core.base.llms.types import MessageRole
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine, SimpleChatEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, TextNode

from llamaindex_sessions import SessionMemory
from sessions_core import Session

from .scripted import ScriptedLLM


class FixedRetriever(BaseRetriever):
    def _retrieve(self, query_bundle):
        return [NodeWithScore(node=TextNode(text="Lisbon is the capital of Portugal."), score=1.0)]


def make_engine(kind, llm, memory):
    if kind == "simple":
        return SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")
    if kind == "context":
        return ContextChatEngine.from_defaults(
            retriever=FixedRetriever(), llm=llm, memory=memory, system_prompt="Be brief."
        )
    return CondensePlusContextChatEngine.from_defaults(
        retriever=FixedRetriever(), llm=llm, memory=memory, system_prompt="Be brief.", skip_condense=False
    )


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.mark.parametrize("kind", ["simple", "context", "condense"])
def test_engine_end_to_end(kind, db):
    session = Session(db).for_session(kind).with_context("memory", description="Learned facts")
    session.replace_context_block("memory", "User likes trams.")
    llm = ScriptedLLM(fallback=lambda messages, tools: f"answer {sum(m.role == MessageRole.USER for m in messages)}")
    memory = SessionMemory(session=session)
    engine = make_engine(kind, llm, memory)
    memory.bind(engine)
    assert memory.llm is llm

    assert engine.chat("Where should I go?").response.startswith("answer")
    streamed = engine.stream_chat("And by tram?")
    assert "".join(streamed.response_gen).startswith("answer")
    wait_for(lambda: len(memory.get_all()) == 4)  # the assistant reply is written by a thread

    async def go():
        await engine.achat("Thanks!")
        stream = await engine.astream_chat("Bye")
        chunks = [token async for token in stream.async_response_gen()]
        assert chunks

    asyncio.run(go())
    wait_for(lambda: len(memory.get_all()) == 8)

    history = engine.chat_history
    assert [m.role.value for m in history] == ["user", "assistant"] * 4
    assert [m.content for m in history if m.role == MessageRole.USER] == [
        "Where should I go?",
        "And by tram?",
        "Thanks!",
        "Bye",
    ]
    # The model saw the context blocks and the history.
    last = llm.calls[-1].messages
    assert any("User likes trams." in (m.content or "") for m in last if m.role == MessageRole.SYSTEM)
    assert any(m.content == "Where should I go?" for m in last)
    assert session.get_path_length() == 8

    engine.reset()  # a soft reset: a new branch
    assert engine.chat_history == []
    assert session.search("tram")


@pytest.mark.parametrize("kind", ["simple", "context"])
def test_chat_history_argument_is_not_duplicated(kind, session):
    llm = ScriptedLLM(fallback="ok")
    memory = SessionMemory(session=session)
    engine = make_engine(kind, llm, memory)
    engine.chat("one")
    engine.chat("two", chat_history=engine.chat_history)
    assert [m.content for m in engine.chat_history] == ["one", "ok", "two", "ok"]


def test_many_threads_streaming_into_one_memory(db):
    session = Session(db).for_session("threads").with_context("memory")
    llm = ScriptedLLM(fallback="ok")
    memory = SessionMemory(session=session, compaction=False)
    errors = []

    def worker(n):
        try:
            engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
            for i in range(5):
                response = engine.stream_chat(f"thread {n} message {i}")
                assert "".join(response.response_gen)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_for(lambda: len(memory.get_all()) == 60)
    assert errors == []
    contents = [m.content for m in memory.get_all()]
    assert sorted(c for c in contents if c != "ok") == sorted(
        f"thread {n} message {i}" for n in range(6) for i in range(5)
    )
    assert contents.count("ok") == 30
