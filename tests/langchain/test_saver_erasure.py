"""Erasing messages of a thread that ``SessionSaver`` checkpoints: ``SessionSaver.erase_messages``
takes them out of every checkpoint and pending write before erasing them from the session, so
that none of their text stays in the SQLite file or its ``-wal``, the resumed thread does not
hand them back to the middleware, and the conversation goes on without them; an erased AI
message's tool calls go from where the graph copied them too (the ``Send`` to the tools node, an
approval request). Without the saver,
erasing messages of such a session is refused and erases nothing (the API and the CLI)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.types import Interrupt, Send

from langchain_sessions import SessionMemoryMiddleware, SessionSaver
from langchain_sessions.checkpoint import _ERASED, _Erasure, _without_messages
from sessions_core import ConflictError, SessionManager

from ..test_cli import assert_error, run
from .helpers import ScriptedChatModel


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def _turn(agent: Any, text: str, mode: str = "sync") -> dict[str, Any]:
    state, config = {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t1"}}
    return asyncio.run(agent.ainvoke(state, config)) if mode == "async" else agent.invoke(state, config)


def _chat(manager: SessionManager, marker: str, model: ScriptedChatModel) -> tuple[Any, SessionSaver, list[Any]]:
    saver = SessionSaver.from_manager(manager)
    agent = create_agent(model, checkpointer=saver, middleware=[SessionMemoryMiddleware(manager)])
    _turn(agent, "Hello there, I am planning a trip.")
    result = _turn(agent, f"My password is {marker}, keep it safe.")
    return agent, saver, result["messages"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_erased_message_leaves_the_checkpoints_and_the_files_and_stays_gone(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "memory.db"
    marker = f"secret-{uuid.uuid4().hex}"
    manager = SessionManager(str(path))
    model = ScriptedChatModel(responses=[AIMessage("Nice."), AIMessage("Noted."), AIMessage("Lisbon, then.")])
    agent, saver, messages = _chat(manager, marker, model)
    secret = next(m for m in messages if marker in m.text)
    assert marker.encode() in _file_bytes(path)

    if mode == "async":
        result = asyncio.run(saver.aerase_messages("t1", [secret.id]))
    else:
        result = saver.erase_messages("t1", [secret.id])
    assert result.counts.messages == 1 and result.session_ids == ("t1",)
    assert marker.encode() not in _file_bytes(path)
    state = saver.get_tuple({"configurable": {"thread_id": "t1"}})
    assert state is not None
    assert secret.id not in [m.id for m in state.checkpoint["channel_values"]["messages"]]

    resumed = _turn(agent, "Where should I go?", mode)
    assert [m.text for m in resumed["messages"]][-1] == "Lisbon, then."
    seen = [m.text for m in model.calls[-1]]
    assert "Hello there, I am planning a trip." in seen  # the thread goes on from its state
    assert all(marker not in text for text in seen)  # without the erased message
    assert secret.id not in [m.id for m in manager.get_history("t1")]  # not handed back to the session
    assert marker.encode() not in _file_bytes(path)
    manager.close()


def test_erasing_a_checkpointed_message_without_the_saver_is_refused_and_erases_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    marker = f"secret-{uuid.uuid4().hex}"
    manager = SessionManager(str(path))
    _agent, _saver, messages = _chat(manager, marker, ScriptedChatModel(responses=[AIMessage("a"), AIMessage("b")]))
    secret = next(m for m in messages if marker in m.text)
    with pytest.raises(ConflictError, match=r"SessionSaver\.erase_messages"):
        manager.erase_messages("t1", [secret.id])
    assert secret.id in [m.id for m in manager.get_history("t1")]
    manager.close()
    assert_error(run("--store", str(path), "erase", "t1", "--message", secret.id), 1, "SessionSaver.erase_messages")
    assert marker.encode() in _file_bytes(path)


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return "sunny all week"


@pytest.mark.parametrize("approval", [False, True], ids=["tool-ran", "awaiting-approval"])
def test_an_erased_tool_call_leaves_the_tasks_and_approval_requests_the_graph_copied_it_to(
    tmp_path: Path, approval: bool
) -> None:
    path = tmp_path / "memory.db"
    marker = f"secret-{uuid.uuid4().hex}"
    manager = SessionManager(str(path))
    saver = SessionSaver.from_manager(manager)
    call = AIMessage("", tool_calls=[{"name": "lookup", "args": {"city": marker}, "id": "call-1"}])
    model = ScriptedChatModel(responses=[call, AIMessage("Sunny."), AIMessage("Anything else?")])
    middleware: list[Any] = [SessionMemoryMiddleware(manager)]
    if approval:
        middleware.append(HumanInTheLoopMiddleware(interrupt_on={"lookup": True}))
    agent = create_agent(model, tools=[lookup], checkpointer=saver, middleware=middleware)
    result = _turn(agent, "What is the weather where I live?")
    assert bool(result.get("__interrupt__")) is approval
    caller = next(m for m in result["messages"] if getattr(m, "tool_calls", None))
    assert marker.encode() in _file_bytes(path)

    saver.erase_messages("t1", [caller.id])
    assert marker.encode() not in _file_bytes(path)
    assert [m.text for m in _turn(agent, "Thanks.")["messages"]][-1] in {"Sunny.", "Anything else?"}
    assert marker.encode() not in _file_bytes(path)
    manager.close()


def test_a_task_or_an_interrupt_keeps_what_the_erasure_does_not_name() -> None:
    erasure = _Erasure(
        frozenset({"ai-1"}), calls=frozenset({"call-1"}), call_twins=frozenset({("lookup", '{"city": "x"}')})
    )
    erased = {"name": "lookup", "args": {"city": "x"}, "id": "call-1", "type": "tool_call"}
    kept = {"name": "lookup", "args": {"city": "y"}, "id": "call-2", "type": "tool_call"}
    assert _without_messages(Send("tools", [erased]), erasure) is _ERASED
    assert _without_messages(Send("tools", [erased, kept]), erasure).arg == [kept]
    both = Send("tools", [kept])
    assert _without_messages(both, erasure) is both
    wrapped = {"__type": "tool_call_with_context", "tool_call": erased, "state": {"messages": []}}
    assert _without_messages([wrapped, kept], erasure) == [kept]
    request = Interrupt(value={"action_requests": [{"name": "lookup", "args": {"city": "x"}, "description": "x?"}]})
    assert _without_messages(request, erasure).value == {"action_requests": []}
    other = {"name": "lookup", "args": {"city": "y"}, "description": "y?"}
    assert _without_messages([other, {"id": ["not", "a", "string"]}], erasure) == [
        other,
        {"id": ["not", "a", "string"]},
    ]
