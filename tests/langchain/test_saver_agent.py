"""``create_agent`` with ``checkpointer=SessionSaver.from_manager(manager)`` and
``SessionMemoryMiddleware(manager)``: a thread resumes after a restart (a new manager on the same
file), the model sees each message once, the session stores each message once, the thread is a
session that search finds, and deleting the thread with ``delete_sessions=True`` erases it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from langchain_sessions import SessionMemoryMiddleware, SessionSaver
from sessions_core import SessionManager

from .helpers import ScriptedChatModel, call


def _run(agent: Any, text: str, thread_id: str, mode: str) -> dict[str, Any]:
    state = {"messages": [HumanMessage(text)]}
    config = {"configurable": {"thread_id": thread_id}}
    if mode == "async":
        return asyncio.run(agent.ainvoke(state, config))
    return agent.invoke(state, config)


def _agent(manager: SessionManager, model: ScriptedChatModel, **saver: Any) -> Any:
    return create_agent(
        model,
        system_prompt="Be brief.",
        checkpointer=SessionSaver.from_manager(manager, **saver),
        middleware=[SessionMemoryMiddleware(manager)],
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_thread_resumes_after_a_restart_with_each_message_once(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "memory.db"
    with SessionManager(str(db)).with_context("memory", description="Facts") as first:
        model = ScriptedChatModel(
            responses=[
                call("set_context", {"label": "memory", "content": "Likes green tea."}, "c1"),
                AIMessage("Noted."),
            ]
        )
        _run(_agent(first, model), "I like green tea.", "t1", mode)
        assert [m.text for m in model.calls[0][1:]] == ["I like green tea."]

    # The restart: a new manager (and store) on the same file.
    with SessionManager(str(db)).with_context("memory", description="Facts") as second:
        model = ScriptedChatModel(responses=[AIMessage("Green tea.")])
        agent = _agent(second, model)
        result = _run(agent, "What do I like?", "t1", mode)
        seen = [(m.type, m.text) for m in model.calls[0][1:]]
        assert seen == [
            ("human", "I like green tea."),
            ("ai", ""),
            ("tool", "Written to memory. Usage: 4 tokens"),
            ("ai", "Noted."),
            ("human", "What do I like?"),
        ]
        assert "Likes green tea." in model.calls[0][0].text
        assert [m.text for m in result["messages"]][-1] == "Green tea."

        # The session holds each message once; the checkpoint holds the same state.
        stored = second.get_history("t1")
        assert [message.id for message in stored] == [m.id for m in result["messages"]]
        assert len({message.id for message in stored}) == len(stored) == 6
        saver = SessionSaver.from_manager(second)
        latest = saver.get_tuple({"configurable": {"thread_id": "t1"}})
        assert latest is not None and [m.id for m in latest.checkpoint["channel_values"]["messages"]] == [
            m.id for m in result["messages"]
        ]
        assert len(list(saver.list({"configurable": {"thread_id": "t1"}}))) >= 6

        # The thread is a session of the manager: listed and found by search.
        assert [info.id for info in second.list_sessions()] == ["t1"]
        assert [hit.session_id for hit in second.search("green tea")][:1] == ["t1"]

        # Deleting the thread: the checkpoints only, or the whole session when asked.
        saver.delete_thread("t1")
        assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is None
        assert second.get_message_count("t1") == 6
        SessionSaver.from_manager(second, delete_sessions=True).delete_thread("t1")
        assert second.get("t1") is None and second.get_message_count("t1") == 0 and second.search("green tea") == []


def test_threads_are_separate_sessions_and_a_new_thread_starts_empty(tmp_path: Path) -> None:
    with SessionManager(str(tmp_path / "memory.db")) as manager:
        model = ScriptedChatModel(responses=[AIMessage("Hello Ada."), AIMessage("Hello Bob."), AIMessage("Yes, Ada.")])
        agent = _agent(manager, model)
        agent.invoke({"messages": [HumanMessage("I am Ada.")]}, {"configurable": {"thread_id": "ada"}})
        agent.invoke({"messages": [HumanMessage("I am Bob.")]}, {"configurable": {"thread_id": "bob"}})
        agent.invoke({"messages": [HumanMessage("Do you know me?")]}, {"configurable": {"thread_id": "ada"}})
        assert [m.text for m in model.calls[1][1:]] == ["I am Bob."]
        assert [m.text for m in model.calls[2][1:]] == ["I am Ada.", "Hello Ada.", "Do you know me?"]
        assert sorted(info.id for info in manager.list_sessions()) == ["ada", "bob"]
        assert manager.get_message_count("ada") == 4 and manager.get_message_count("bob") == 2
