"""Erasing messages of a thread that ``SessionSaver`` checkpoints: ``SessionSaver.erase_messages``
takes them out of every checkpoint and pending write before erasing them from the session, so
that none of their text stays in the SQLite file or its ``-wal``, the resumed thread does not
hand them back to the middleware, and the conversation goes on without them. Without the saver,
erasing messages of such a session is refused and erases nothing (the API and the CLI)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from langchain_sessions import SessionMemoryMiddleware, SessionSaver
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
