"""Issue 18, LangChain half: the middleware, history and tools as a drop-in for what they replace."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_sessions import SessionMemoryMiddleware, to_langchain_messages

from .helpers import ScriptedChatModel

CONFIG = {"configurable": {"thread_id": "thread-1"}}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def invalid_call(call_id: str) -> dict:
    return {"type": "invalid_tool_call", "name": "add", "args": '{"a": 1, "b": ', "id": call_id, "error": None}


def assert_every_tool_call_answered(messages: list[BaseMessage]) -> None:
    """Each AI message's tool calls (valid or invalid) are answered by the tool messages that
    follow it, before the next non-tool message."""
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        wanted = {c["id"] for c in message.tool_calls} | {c["id"] for c in message.invalid_tool_calls}
        answered = set()
        for later in messages[index + 1 :]:
            if not isinstance(later, ToolMessage):
                break
            answered.add(later.tool_call_id)
        assert wanted <= answered, (message, wanted - answered)


# -- defect 1: a repaired invalid tool call is stored on the active path ----------------------


@pytest.mark.parametrize("checkpointer", [None, "memory"])
def test_an_invalid_tool_call_is_answered_on_the_stored_path(session, checkpointer):
    mixed = AIMessage(
        "", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "ok"}], invalid_tool_calls=[invalid_call("bad")]
    )
    only_invalid = AIMessage("", invalid_tool_calls=[invalid_call("bad-2")])
    model = ScriptedChatModel(responses=[mixed, AIMessage("3"), only_invalid, AIMessage("Done.")])
    agent = create_agent(
        model,
        tools=[add],
        middleware=[SessionMemoryMiddleware(session)],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    agent.invoke({"messages": [HumanMessage("Add 1 and 2.")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage("Add again.")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage("Never mind.")]}, CONFIG)

    stored = to_langchain_messages(session.get_history())
    assert [m.type for m in stored] == ["human", "ai", "tool", "tool", "ai", "human", "ai", "tool", "human", "ai"]
    assert_every_tool_call_answered(stored)
    assert stored[2].status == "error" and "could not be executed" in stored[2].text
    # The model's last input answers every call too (stored history, or state, or both).
    assert_every_tool_call_answered(model.calls[-1])
