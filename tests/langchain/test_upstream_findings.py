"""What running LangChain's own ``tests/unit_tests/agents`` with the middleware added showed.

The only tests that fail with the middleware and pass without it are async tests that call the
agent's sync ``invoke`` inside their running event loop: upstream's autouse ``blockbuster``
fixture raises on the store's first SQLite call there (a sync ``invoke`` does its I/O on the
calling thread, which is the loop's). Without blockbuster those tests pass. These tests pin
what a user calling ``invoke`` from inside a running loop gets: no error, no deadlock, every
message stored once, compaction (with a sync or an async summariser), interrupt and resume.
"""

from __future__ import annotations

import asyncio

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langchain_sessions import SessionMemoryMiddleware
from sessions_core import Session

from .helpers import ScriptedChatModel, call

CONFIG = {"configurable": {"thread_id": "thread-1"}}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def in_running_loop(fn):
    """``fn()`` called synchronously from a coroutine, as an async test calling ``invoke`` does."""

    async def main():
        asyncio.get_running_loop()
        return fn()

    return asyncio.run(asyncio.wait_for(main(), timeout=30))


def stored(session):
    history = session.get_history()
    ids = [m.id for m in history]
    assert len(ids) == len(set(ids)), ids
    return history


def test_sync_invoke_inside_a_running_loop_stores_once_and_runs_memory_tools(session):
    model = ScriptedChatModel(
        responses=[
            call("set_context", {"label": "memory", "content": "The user likes tea."}, "call_1"),
            AIMessage("Noted."),
            AIMessage("Tea, then."),
        ]
    )
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)], checkpointer=InMemorySaver())

    def run():
        agent.invoke({"messages": [HumanMessage("I like tea.")]}, CONFIG)
        return agent.invoke({"messages": [HumanMessage("What do I like?")]}, CONFIG)

    result = in_running_loop(run)
    assert result["messages"][-1].text == "Tea, then."
    assert [m.role for m in stored(session)] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert "The user likes tea." in model.calls[-1][0].text


async def summarise_async(prompt: str) -> str:
    await asyncio.sleep(0)
    return "ASYNC-SUMMARY: the user talked about tea."


def test_sync_invoke_inside_a_running_loop_compacts_with_a_sync_or_an_async_summariser():
    for summarizer in (None, summarise_async):
        session = Session(":memory:").for_session("thread-1")
        model = ScriptedChatModel(responses=[AIMessage(f"answer {i}: " + "tea " * 40) for i in range(5)])
        middleware = SessionMemoryMiddleware(
            session,
            compact_at=400,
            keep_recent_tokens=120,
            protect_head=2,
            summary_max_retries=0,
            summarizer=summarizer,
        )
        agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())

        def run(agent=agent):
            for i in range(5):
                out = agent.invoke({"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, CONFIG)
            return out

        assert in_running_loop(run)["messages"][-1].text.startswith("answer 4")
        compactions = session.get_compactions()
        assert compactions
        expected = model.summary if summarizer is None else "ASYNC-SUMMARY: the user talked about tea."
        assert compactions[-1].summary == expected
        assert any(m.text == expected for m in model.calls[-1])
        assert session.get_path_length() == 10
        stored(session)
        session.close()


def test_sync_invoke_inside_a_running_loop_interrupts_and_resumes(session):
    model = ScriptedChatModel(responses=[call("add", {"a": 1, "b": 2}, "call_1"), AIMessage("3.")])
    agent = create_agent(
        model,
        [add],
        middleware=[HumanInTheLoopMiddleware({"add": True}), SessionMemoryMiddleware(session)],
        checkpointer=InMemorySaver(),
    )

    def run():
        first = agent.invoke({"messages": [HumanMessage("1 + 2?")]}, CONFIG)
        assert "__interrupt__" in first
        return agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)

    result = in_running_loop(run)
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert [m.role for m in stored(session)] == ["user", "assistant", "tool", "assistant"]
