"""``blockbuster`` (the fixture LangChain's own suites use) on every async path of the adapter:
the agent's ``ainvoke``/``astream`` with the middleware, the chat history's async methods and
``RunnableWithMessageHistory``, the toolkit's tools. Everything is built inside the event loop,
so a constructor that touched the store would be caught too (issue 18, defect 5)."""

from __future__ import annotations

import asyncio

import pytest
from blockbuster import blockbuster_ctx
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_sessions import SessionChatMessageHistory, SessionMemoryMiddleware, SessionToolkit
from sessions_core import Session, SessionManager

from ..postgres import postgres_url, require_postgres, temporary_schema
from .helpers import ScriptedChatModel, call

CONFIG = {"configurable": {"thread_id": "thread-1"}}
SCANNED = ["sessions_core", "langchain_sessions"]


@pytest.fixture
def blockbuster():
    with blockbuster_ctx(SCANNED) as bb:
        yield bb


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "chat.db")


def remember_and_answer():
    return [
        call("set_context", {"label": "memory", "content": "Likes tea."}, "c1"),
        AIMessage("Noted."),
    ]


def test_the_blockbuster_fixture_catches_a_blocking_read(path, blockbuster):
    async def blocking():
        Session(path).for_session("t").get_history()

    with pytest.raises(Exception, match="Blocking call"):
        asyncio.run(blocking())


@pytest.fixture
def postgres_schema():
    require_postgres()
    with temporary_schema() as schema:
        yield schema


@pytest.mark.parametrize("source", ["session", "manager", "path"])
def test_agent_ainvoke_and_astream_never_block_the_loop(path, blockbuster, source):
    async def run():
        if source == "session":
            target = Session(path).for_session("thread-1").with_context("memory", max_tokens=200)
        elif source == "manager":
            target = SessionManager(path).with_context("memory", max_tokens=200)
        else:
            target = path
        model = ScriptedChatModel(responses=[*remember_and_answer(), AIMessage("Hi again.")])
        agent = create_agent(model, middleware=[SessionMemoryMiddleware(target)])
        await agent.ainvoke({"messages": [HumanMessage("I like tea.")]}, CONFIG)
        chunks = [chunk async for chunk in agent.astream({"messages": [HumanMessage("Hello.")]}, CONFIG)]
        assert chunks
        return model

    model = asyncio.run(run())
    assert model.calls[-1][-1].text == "Hello."
    stored = SessionManager(path).get_history("thread-1") if source != "session" else None
    if stored is not None:
        assert [m.role for m in stored][-2:] == ["user", "assistant"]


def test_agent_over_postgres_never_blocks_the_loop(postgres_schema, blockbuster):
    from sessions_core.stores.postgres import PostgresStore  # importing reads files: not in the loop

    async def run():
        manager = SessionManager(PostgresStore(postgres_url(), schema=postgres_schema))
        manager.with_context("memory", max_tokens=200)
        model = ScriptedChatModel(responses=[*remember_and_answer()])
        agent = create_agent(model, middleware=[SessionMemoryMiddleware(manager)])
        await agent.ainvoke({"messages": [HumanMessage("I like tea.")]}, CONFIG)
        history = SessionChatMessageHistory.from_manager(manager, "thread-1")
        messages = await history.aget_messages()
        await manager.aclose()
        return messages

    assert [m.type for m in asyncio.run(run())] == ["human", "ai", "tool", "ai"]


def test_chat_history_async_methods_never_block_the_loop(path, blockbuster):
    async def run():
        manager = SessionManager(path)
        history = SessionChatMessageHistory.from_manager(manager, "u1")
        await history.aadd_messages([HumanMessage("Hi"), AIMessage("Hello")])
        messages = await history.aget_messages()
        await history.aclear()
        other = SessionChatMessageHistory(session_id="u2", connection=path)
        await other.aadd_messages([HumanMessage("Second")])
        return [m.text for m in messages], [m.text for m in await other.aget_messages()]

    assert asyncio.run(run()) == (["Hi", "Hello"], ["Second"])


def test_runnable_with_message_history_never_blocks_the_loop(path, blockbuster):
    async def run():
        manager = SessionManager(path)
        echo = RunnableLambda(lambda messages: AIMessage(f"{len(messages)} messages"))
        chain = RunnableWithMessageHistory(echo, lambda sid: SessionChatMessageHistory.from_manager(manager, sid))
        config = {"configurable": {"session_id": "u1"}}
        await chain.ainvoke([HumanMessage("One")], config)
        return await chain.ainvoke([HumanMessage("Two")], config)

    assert asyncio.run(run()).text == "3 messages"


def test_toolkit_tools_never_block_the_loop(path, blockbuster):
    async def run():
        manager = SessionManager(path).with_context("memory", max_tokens=200)
        tools = {tool.name: tool for tool in SessionToolkit(manager).get_tools()}
        config = {"configurable": {"session_id": "u1"}}
        written = await tools["set_context"].ainvoke({"label": "memory", "content": "Likes tea."}, config)
        found = await tools["session_search"].ainvoke({"query": "tea"}, config)
        return written, found

    written, found = asyncio.run(run())
    assert written.startswith("Written to memory.")
    assert isinstance(found, str)
