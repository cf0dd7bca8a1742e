"""LangMem's memory tools on our store and checkpointer, in a ``create_agent`` run with a scripted
model: ``checkpointer=SessionSaver.from_manager(manager)``, ``store=SessionStore.from_manager(manager)``,
``SessionMemoryMiddleware(manager)`` and ``create_manage_memory_tool`` / ``create_search_memory_tool``
on ``("memories", "{user_id}")``. A memory written in thread "morning" is what the search tool
gives the model in thread "later"; after a restart (a new manager, saver, store and agent on the
same database) "morning" resumes from its checkpoint, each message is stored once in its session,
and the memory's versions show the tool's update. One turn's parallel calls store each memory
once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langmem import create_manage_memory_tool, create_search_memory_tool

from langchain_sessions import SessionMemoryMiddleware, SessionSaver, SessionStore
from sessions_core import SessionManager

from ..postgres import postgres_url, require_postgres, temporary_schema
from .helpers import ScriptedChatModel, call

NAMESPACE = ("memories", "ada")

Opener = Callable[[], SessionManager]


@pytest.fixture(params=["sqlite", "postgres"])
def open_manager(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a new manager on the same database each time it is called (a restart); closes them all."""
    opened: list[Any] = []
    if request.param == "sqlite":
        path = str(tmp_path / "memory.db")

        def open_sqlite() -> SessionManager:
            manager = SessionManager(path)
            opened.append(manager)
            return manager

        yield open_sqlite
    else:
        require_postgres()
        from sessions_core.stores.postgres import PostgresStore

        with temporary_schema() as schema:

            def open_postgres() -> SessionManager:
                store = PostgresStore(postgres_url(), schema=schema, max_size=4)
                opened.append(store)
                return SessionManager(store)

            yield open_postgres
            for each in opened:
                each.close()
            return
    for each in opened:
        each.close()


def _agent(manager: SessionManager, model: ScriptedChatModel) -> Any:
    return create_agent(
        model,
        tools=[
            create_manage_memory_tool(namespace=("memories", "{user_id}")),
            create_search_memory_tool(namespace=("memories", "{user_id}")),
        ],
        system_prompt="Be brief.",
        checkpointer=SessionSaver.from_manager(manager),
        store=SessionStore.from_manager(manager),
        middleware=[SessionMemoryMiddleware(manager)],
    )


def _run(agent: Any, text: str, thread_id: str, mode: str) -> dict[str, Any]:
    state = {"messages": [HumanMessage(text)]}
    config = {"configurable": {"user_id": "ada", "thread_id": thread_id}}
    if mode == "async":
        return asyncio.run(agent.ainvoke(state, config))
    return agent.invoke(state, config)


def _tool_results(result: dict[str, Any]) -> list[str]:
    return [m.text for m in result["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_langmem_memory_crosses_threads_and_a_restart(open_manager: Opener, mode: str) -> None:
    first = open_manager()
    model = ScriptedChatModel(
        responses=[
            call("manage_memory", {"content": "Ada drinks green tea every morning."}, "m1"),
            AIMessage("Noted."),
            call("search_memory", {"query": "tea"}, "s1"),
            AIMessage("Green tea."),
        ]
    )
    agent = _agent(first, model)
    morning = _run(agent, "I drink green tea every morning.", "morning", mode)
    [created] = _tool_results(morning)
    assert created.startswith("created memory ")
    key = created.removeprefix("created memory ")

    later = _run(agent, "What do I drink?", "later", mode)
    assert [(m.type, m.text) for m in model.calls[2][1:]] == [("human", "What do I drink?")]
    [found] = [json.loads(m.text) for m in model.calls[3] if isinstance(m, ToolMessage)]
    assert [(hit["namespace"], hit["key"], hit["value"]) for hit in found] == [
        (list(NAMESPACE), key, {"content": "Ada drinks green tea every morning."})
    ]
    assert [m.text for m in later["messages"]][-1] == "Green tea."
    first.close()

    # The restart: a new manager, saver, store and agent on the same database.
    second = open_manager()
    model = ScriptedChatModel(
        responses=[
            call("manage_memory", {"action": "update", "id": key, "content": "Ada drinks oolong now."}, "m2"),
            AIMessage("Updated."),
        ]
    )
    resumed = _run(_agent(second, model), "I switched to oolong.", "morning", mode)
    assert [(m.type, m.text) for m in model.calls[0][1:]] == [
        ("human", "I drink green tea every morning."),
        ("ai", ""),
        ("tool", created),
        ("ai", "Noted."),
        ("human", "I switched to oolong."),
    ]
    assert _tool_results(resumed) == [created, f"updated memory {key}"]

    # Each message is stored once in its thread's session, the checkpoint holds the same ones.
    stored = second.get_history("morning")
    assert [m.id for m in stored] == [m.id for m in resumed["messages"]]
    assert second.get_message_count("morning") == len({m.id for m in stored}) == 8
    assert second.get_message_count("later") == 4
    assert sorted(info.id for info in second.list_sessions()) == ["later", "morning"]
    latest = SessionSaver.from_manager(second).get_tuple({"configurable": {"thread_id": "morning"}})
    assert latest is not None
    assert [m.id for m in latest.checkpoint["channel_values"]["messages"]] == [m.id for m in stored]

    # The memory's versions show the tool's update; the earlier one can be restored.
    store = SessionStore.from_manager(second)
    versions = store.item_versions(NAMESPACE, key)
    assert [v.value for v in versions] == [
        {"content": "Ada drinks oolong now."},
        {"content": "Ada drinks green tea every morning."},
    ]
    assert [hit.key for hit in store.search(("memories",), query="oolong")] == [key]
    store.restore_item(NAMESPACE, key, versions[-1].version)
    item = store.get(NAMESPACE, key)
    assert item is not None and item.value == {"content": "Ada drinks green tea every morning."}
    assert len(store.item_versions(NAMESPACE, key)) == 3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_parallel_memory_calls_store_each_memory_once(open_manager: Opener, mode: str) -> None:
    """The tools node runs one turn's calls concurrently: each put is one item of one version."""
    manager = open_manager()
    calls = [{"name": "manage_memory", "args": {"content": f"Fact number {n}."}, "id": f"m{n}"} for n in range(8)]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), AIMessage("Noted.")])
    result = _run(_agent(manager, model), "Remember these eight facts.", "facts", mode)
    keys = sorted(text.removeprefix("created memory ") for text in _tool_results(result))
    store = SessionStore.from_manager(manager)
    found = store.search(NAMESPACE, limit=100)
    assert sorted(item.key for item in found) == keys and len(keys) == 8
    assert sorted(item.value["content"] for item in found) == [f"Fact number {n}." for n in range(8)]
    assert all(len(store.item_versions(NAMESPACE, key)) == 1 for key in keys)
    assert manager.get_message_count("facts") == len(result["messages"]) == 11
