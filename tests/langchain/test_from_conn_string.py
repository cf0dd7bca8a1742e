"""``SessionSaver.from_conn_string`` and ``SessionStore.from_conn_string``: code written for
LangGraph's ``SqliteSaver`` / ``PostgresSaver`` and their stores runs with the class name changed,
``with`` or ``async with``; leaving the block closes the database, and a thread and its memories
are there when it is opened again."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from langchain_sessions import SessionSaver, SessionStore
from sessions_core import SessionManager, StoreError

from ..postgres import postgres_url, require_postgres
from .helpers import ScriptedChatModel


@pytest.fixture(params=["sqlite", "postgres url", "postgres key=value"])
def conn_string(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        yield str(tmp_path / "memory.db"), ""
        return
    require_postgres()
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    url = postgres_url()
    namespace = f"conn-{uuid.uuid4().hex[:10]}"
    yield (url if request.param == "postgres url" else make_conninfo(**conninfo_to_dict(url))), namespace
    with SessionManager(url, namespace=namespace) as manager:
        manager.erase_namespace(namespace)


def _model(reply: str) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[AIMessage(reply)])


def test_with_blocks_store_a_thread_and_a_memory_that_the_next_blocks_find(conn_string: Any) -> None:
    conn, namespace = conn_string
    config = {"configurable": {"thread_id": "t1"}}
    with (
        SessionSaver.from_conn_string(conn, namespace=namespace) as saver,
        SessionStore.from_conn_string(conn, namespace=namespace) as store,
    ):
        agent = create_agent(_model("Hello."), checkpointer=saver, store=store)
        agent.invoke({"messages": [HumanMessage("Hi.")]}, config)  # type: ignore[arg-type]
        store.put(("memories", "u1"), "tea", {"content": "likes green tea"})
    with pytest.raises(StoreError, match="closed"):
        saver.get_tuple(config)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="closed"):
        store.get(("memories", "u1"), "tea")

    with (
        SessionSaver.from_conn_string(conn, namespace=namespace) as saver,
        SessionStore.from_conn_string(conn, namespace=namespace) as store,
    ):
        model = _model("Welcome back.")
        create_agent(model, checkpointer=saver, store=store).invoke(
            {"messages": [HumanMessage("Again.")]},
            config,  # type: ignore[arg-type]
        )
        assert [m.text for m in model.calls[0]] == ["Hi.", "Hello.", "Again."]  # the thread resumed
        found = store.search(("memories",), query="tea")
        assert [item.key for item in found] == ["tea"]


def test_async_with_blocks_work_as_langgraphs_async_classes_do(conn_string: Any) -> None:
    conn, namespace = conn_string
    config = {"configurable": {"thread_id": "t2"}}

    async def run() -> list[str]:
        async with (
            SessionSaver.from_conn_string(conn, namespace=namespace) as saver,
            SessionStore.from_conn_string(conn, namespace=namespace) as store,
        ):
            agent = create_agent(_model("Hello."), checkpointer=saver, store=store)
            await agent.ainvoke({"messages": [HumanMessage("Hi.")]}, config)  # type: ignore[arg-type]
            await store.aput(("memories", "u2"), "walks", {"content": "walks the dog at noon"})
        async with (
            SessionSaver.from_conn_string(conn, namespace=namespace) as saver,
            SessionStore.from_conn_string(conn, namespace=namespace) as store,
        ):
            latest = await saver.aget_tuple(config)  # type: ignore[arg-type]
            assert latest is not None
            assert [item.key for item in await store.asearch(("memories",), query="dog")] == ["walks"]
            return [m.text for m in latest.checkpoint["channel_values"]["messages"]]

    assert asyncio.run(run()) == ["Hi.", "Hello."]


def test_only_a_string_is_a_conn_string() -> None:
    with pytest.raises(TypeError, match="SessionSaver"):
        SessionSaver.from_conn_string(Path("memory.db"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SessionStore"):
        SessionStore.from_conn_string(SessionManager(":memory:"))  # type: ignore[arg-type]
