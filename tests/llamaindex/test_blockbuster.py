"""No blocking call on the event loop: the async paths of ``SessionMemory``, ``SessionChatStore``
and the tool spec's tools run under ``blockbuster`` (the ``blockbuster_ctx`` the frameworks'
own suites use), over a SQLite file, whose every ``sqlite3`` call it catches (issue 18)."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock

from llamaindex_sessions import SessionChatStore, SessionMemory, SessionToolSpec
from sessions_core import Session, SessionManager, StoreSearchContext

from .scripted import ScriptedLLM

blockbuster = pytest.importorskip("blockbuster")


@pytest.fixture
def busted():
    """Run a coroutine with every blocking call on the event loop raising ``BlockingError``."""

    def run(coroutine_function):
        async def guarded():
            with blockbuster.blockbuster_ctx():
                return await coroutine_function()

        return asyncio.run(guarded())

    return run


def test_blockbuster_catches_sqlite_on_the_loop(db, busted):
    session = Session(db).for_session("s")

    async def blocking():
        return session.get_history()

    with pytest.raises(blockbuster.BlockingError):
        busted(blocking)


def user(text):
    return ChatMessage(role="user", content=text)


def turn(i):
    call = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id=f"c{i}", tool_name="f", tool_kwargs={})])
    result = ChatMessage(role="tool", content=f"result {i}", additional_kwargs={"tool_call_id": f"c{i}"})
    return [user(f"question {i} " + "word " * 30), call, result, ChatMessage(role="assistant", content=f"answer {i}")]


def test_session_memory_async_paths(db, busted):
    session = Session(db).for_session("u1").with_context("memory", max_tokens=200)
    memory = SessionMemory(session=session, token_limit=300, llm=ScriptedLLM(fallback="a summary"))

    async def go():
        await memory.aput(user("hello"))
        await memory.aput_messages([ChatMessage(role="assistant", content="hi")])
        for i in range(4):
            await memory.aput_messages(turn(i))  # passes the threshold: compacts with the LLM
        window = await memory.aget(input="x", initial_token_count=10)
        everything = await memory.aget_all()
        await memory.aset([user("again")])
        await memory.acompact()
        tools = await memory.atools()
        written = await tools[0].acall(label="memory", content="User is Ada.")
        await memory.areset()
        return window, everything, written, await memory.aget_all()

    window, everything, written, after_reset = busted(go)
    assert window and len(everything) == 18
    assert written.content.startswith("Written to memory.")
    assert after_reset == []


def test_session_chat_store_async_paths(db, busted):
    store = SessionChatStore(SessionManager(db))

    async def go():
        await store.aset_messages("k", [user("one")])
        await store.async_add_message("k", ChatMessage(role="assistant", content="two"))
        await store.aadd_message("k", user("three"))
        await store.aadd_message("k", user("zero"), idx=0)
        got = await store.aget_messages("k")
        keys = await store.aget_keys()
        last = await store.adelete_last_message("k")
        first = await store.adelete_message("k", 0)
        cleared = await store.adelete_messages("k")
        return got, keys, last, first, cleared

    got, keys, last, first, cleared = busted(go)
    assert [m.content for m in got] == ["zero", "one", "two", "three"]
    assert (keys, last.content, first.content, [m.content for m in cleared]) == (["k"], "three", "zero", ["one", "two"])


def test_tool_spec_async_paths(db, busted):
    manager = SessionManager(db).with_context("memory").with_context("notes", provider=StoreSearchContext())
    manager.create("chat")
    session_id = manager.list_sessions()[0].id
    spec = SessionToolSpec(manager, session_id=session_id)
    tools = {tool.metadata.name: tool for tool in spec.to_tool_list()}

    async def go():
        written = await tools["set_context"].acall(label="memory", content="User is Ada.")
        indexed = await tools["set_context"].acall(label="notes", content="Trams are yellow.", metadata={"title": "t"})
        found = await tools["search_context"].acall(label="notes", query="trams")
        searched = await tools["session_search"].acall(query="trams")
        listed = await spec.ato_tool_list()
        direct = await spec.aset_context(label="memory", content="User is Bo.")
        metadata = await spec.aget_metadata_from_fn_name("set_context")
        return written, indexed, found, searched, listed, direct, metadata

    written, indexed, found, searched, listed, direct, metadata = busted(go)
    assert written.content.startswith("Written to memory.") and "yellow" in found.content
    assert [t.metadata.name for t in listed] == list(tools)
    assert direct.startswith("Written") and metadata.name == "set_context"


def test_a_function_agent_run_with_memory_and_tools(db):
    from llama_index.core.agent.workflow import FunctionAgent

    from .scripted import tool_call

    session = Session(db).for_session("agent").with_context("memory", max_tokens=200)
    llm = ScriptedLLM([tool_call("set_context", {"label": "memory", "content": "User is Ada."}), "Noted."])
    agent = FunctionAgent(tools=SessionToolSpec(session).to_tool_list(), llm=llm)
    memory = SessionMemory(session=session).bind(agent)

    async def go():
        # Scanning our packages only: the workflow engine's own housekeeping is not ours to judge.
        with blockbuster.blockbuster_ctx(["llamaindex_sessions", "sessions_core"]):
            with pytest.raises(blockbuster.BlockingError):
                memory.get()  # the scan does see our code
            return await agent.run(user_msg="I am Ada.", memory=memory)

    assert str(asyncio.run(go())) == "Noted."
    assert session.get_context_block("memory").content == "User is Ada."
    assert [m.role for m in session.get_history()] == ["user", "assistant", "tool", "assistant"]


def test_building_and_rebuilding_in_async_code(db, busted):
    """What async code builds (a memory, a chat store, a tool spec) and what a workflow
    ``Context`` rebuilds in-process (``from_dict``) does no I/O on the loop."""
    session = Session(db).for_session("u1").with_context("memory")
    manager = SessionManager(db)

    async def go():
        memory = SessionMemory(session=session)
        again = SessionMemory.from_dict(memory.to_dict())
        store = SessionChatStore(manager)
        store_again = SessionChatStore.from_dict(store.to_dict())
        SessionToolSpec(session)
        return again.session is session and store_again.manager is manager

    assert busted(go)


def test_building_the_tools_in_async_code(db, busted):
    """``to_tool_list`` reads the store on the calling thread (blockbuster catches it on the
    loop); ``ato_tool_list`` and LlamaIndex's own name for it, ``to_tool_list_async``, build the
    same tools off the loop (the core's async twin), with the same arguments."""
    from llama_index.core.tools import ToolMetadata

    session = Session(db).for_session("u1").with_context("memory").with_context("notes", provider=StoreSearchContext())
    memory = SessionMemory(session=session)
    spec = SessionToolSpec(memory)
    renamed = ToolMetadata(name="set_context", description="Write it down.")
    wanted = [("set_context", "aset_context"), ("search_context", "asearch_context")]

    async def on_the_loop():
        return spec.to_tool_list()

    with pytest.raises(blockbuster.BlockingError):
        busted(on_the_loop)

    async def go():
        every = await spec.ato_tool_list()
        chosen = await spec.ato_tool_list(wanted, func_to_metadata_mapping={"set_context": renamed})
        upstream_name = await spec.to_tool_list_async(spec_functions=wanted)
        from_memory = await memory.atools()
        written = await chosen[0].acall(label="memory", content="User is Ada.")
        return every, chosen, upstream_name, from_memory, written

    every, chosen, upstream_name, from_memory, written = busted(go)
    names = [t.metadata.name for t in spec.to_tool_list()]
    assert [t.metadata.name for t in every] == [t.metadata.name for t in from_memory] == names
    both = ["set_context", "search_context"]
    assert [t.metadata.name for t in chosen] == [t.metadata.name for t in upstream_name] == both
    assert chosen[0].metadata.description == "Write it down."
    assert written.content.startswith("Written to memory.")


class _LoopBoundNotes:
    """An async provider whose client belongs to the loop that made it (as an asyncpg pool)."""

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def get(self) -> str:
        self.loops.append(asyncio.get_running_loop())
        return "notes"

    async def set(self, content: str) -> None:
        self.loops.append(asyncio.get_running_loop())


@pytest.mark.parametrize("builder", ["ato_tool_list", "to_tool_list_async"])
def test_async_tool_building_runs_async_providers_on_the_callers_loop(builder):
    """Both async builders go through the core's async twin: the store is read in a worker
    thread and an async provider met on the way is awaited back on the caller's loop (LlamaIndex's
    own ``to_tool_list_async``, a bare ``asyncio.to_thread``, would run it on a private loop)."""
    notes = _LoopBoundNotes()
    spec = SessionToolSpec(Session().for_session("s").with_context("notes", provider=notes))

    async def go():
        tools = await getattr(spec, builder)()
        return asyncio.get_running_loop(), [t.metadata.name for t in tools]

    loop, names = asyncio.run(go())
    assert names == ["set_context"]
    assert notes.loops and set(notes.loops) == {loop}
