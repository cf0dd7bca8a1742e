"""LangMem's background memory manager on our store, unchanged: ``create_memory_store_manager``
(with trustcall's extraction, scripted) given ``store=SessionStore(...)`` finds the memories it
wrote by keyword search over the conversation, updates them in place (a new version each),
deletes them, and runs in LangMem's ``ReflectionExecutor``; sync and async, SQLite and
PostgreSQL; by meaning too, with LangGraph's embedding ``index`` config. The manager calls the
store from its own worker threads."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langmem import ReflectionExecutor, create_memory_store_manager

from langchain_sessions import SessionStore
from sessions_core import SessionManager

from ..postgres import postgres_url, require_postgres, temporary_schema
from .helpers import ScriptedChatModel, call

NAMESPACE = ("memories", "ada")
CONFIG: RunnableConfig = {"configurable": {"langgraph_user_id": "ada"}}


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        manager = SessionManager(str(tmp_path / "memory.db"))
        yield SessionStore.from_manager(manager)
        manager.close()
        return
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        backend = PostgresStore(postgres_url(), schema=schema, max_size=4)
        yield SessionStore.from_manager(SessionManager(backend))
        backend.close()


class BindingModel(ScriptedChatModel):
    """The scripted model, bound as a provider's model binds its tools (trustcall reads the
    binding's ``bound`` model to bind its removal tool)."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        super().bind_tools(tools, tool_choice=tool_choice)
        return self.bind()


def _langmem_id(key: str) -> str:
    """The id LangMem's manager shows the model for the item (``MemoryStoreManager._stable_id``)."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, str((*NAMESPACE, key))).hex


def _conversation(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]}


def _invoke(manager: Any, text: str, mode: str) -> list[dict[str, Any]]:
    if mode == "async":
        return asyncio.run(manager.ainvoke(_conversation(text), config=CONFIG))
    return manager.invoke(_conversation(text), config=CONFIG)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_memory_manager_inserts_updates_and_deletes_on_our_store(store: SessionStore, mode: str) -> None:
    model = BindingModel(responses=[call("Memory", {"content": "Ada drinks green tea every morning."}, "c1")])
    manager = create_memory_store_manager(model, namespace=("memories", "{langgraph_user_id}"), store=store)
    [inserted] = _invoke(manager, "I drink green tea every morning.", mode)
    key = inserted["key"]
    item = store.get(NAMESPACE, key)
    assert item is not None
    assert item.value == {"kind": "Memory", "content": {"content": "Ada drinks green tea every morning."}}

    # The next conversation's search gives the memory back (under LangMem's id for it): the
    # model is shown it, and patches it.
    doc_id = _langmem_id(key)
    patch = {"op": "replace", "path": "/content", "value": "Ada drinks oolong tea now."}
    model = BindingModel(
        responses=[call("PatchDoc", {"json_doc_id": doc_id, "planned_edits": "tea changed", "patches": [patch]}, "c2")]
    )
    manager = create_memory_store_manager(model, namespace=("memories", "{langgraph_user_id}"), store=store)
    updated = {"kind": "Memory", "content": {"content": "Ada drinks oolong tea now."}}
    assert _invoke(manager, "I switched from green tea to oolong tea.", mode) == [
        {"namespace": NAMESPACE, "key": key, "value": updated}
    ]
    shown = " ".join(str(m.content) for m in model.calls[0])
    assert doc_id in shown and "Ada drinks green tea every morning." in shown
    assert [v.value["content"]["content"] for v in store.item_versions(NAMESPACE, key) if v.value] == [
        "Ada drinks oolong tea now.",
        "Ada drinks green tea every morning.",
    ]
    assert [hit.key for hit in store.search(("memories",), query="oolong")] == [key]

    # With deletes enabled, the model removes it: the item is gone, its deletion is a version.
    model = BindingModel(responses=[call("RemoveDoc", {"json_doc_id": doc_id}, "c3")])
    manager = create_memory_store_manager(
        model, namespace=("memories", "{langgraph_user_id}"), store=store, enable_deletes=True
    )
    _invoke(manager, "Forget what I drink: oolong tea is private.", mode)
    assert store.get(NAMESPACE, key) is None
    assert [v.value is None for v in store.item_versions(NAMESPACE, key)] == [True, False, False]


def test_the_reflection_executor_runs_the_manager_in_the_background(store: SessionStore) -> None:
    model = BindingModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    {"name": "Memory", "args": {"content": f"Ada's fact number {n}."}, "id": f"c{n}"} for n in range(3)
                ],
            )
        ]
    )
    manager = create_memory_store_manager(model, namespace=("memories", "{langgraph_user_id}"), store=store)
    executor = ReflectionExecutor(manager, store=store)
    try:
        future = executor.submit(_conversation("Three facts about me."), config=CONFIG, after_seconds=0)
        puts = future.result(timeout=30)
    finally:
        executor.shutdown(wait=True)
    assert len(puts) == 3
    found = store.search(NAMESPACE, limit=10)
    assert sorted(item.value["content"]["content"] for item in found) == [f"Ada's fact number {n}." for n in range(3)]
    assert sorted(item.key for item in found) == sorted(put["key"] for put in puts)
    assert all(len(store.item_versions(NAMESPACE, item.key)) == 1 for item in found)


def test_with_an_embedding_index_the_manager_finds_its_memory_by_meaning(tmp_path: Any) -> None:
    """The store's hybrid search (LangGraph's ``index`` config): the memory is found, and updated."""
    from langchain_sessions import SynonymEmbeddings

    with SessionStore(str(tmp_path / "memory.db"), index={"embed": SynonymEmbeddings(), "dims": 256}) as store:
        model = BindingModel(responses=[call("Memory", {"content": "Ada drives a car."}, "c1")])
        manager = create_memory_store_manager(model, namespace=("memories", "{langgraph_user_id}"), store=store)
        [saved] = _invoke(manager, "I drive a car.", "sync")
        patch = {"op": "replace", "path": "/content", "value": "Ada drives an automobile."}
        model = BindingModel(
            responses=[
                call(
                    "PatchDoc",
                    {"json_doc_id": _langmem_id(saved["key"]), "planned_edits": "", "patches": [patch]},
                    "c2",
                )
            ]
        )
        manager = create_memory_store_manager(model, namespace=("memories", "{langgraph_user_id}"), store=store)
        [updated] = _invoke(manager, "My car is an automobile.", "sync")
        assert updated["key"] == saved["key"]
        assert [v.value["content"]["content"] for v in store.item_versions(NAMESPACE, saved["key"]) if v.value] == [
            "Ada drives an automobile.",
            "Ada drives a car.",
        ]
        [hit] = store.search(NAMESPACE, query="vehicle")
        assert hit.key == saved["key"] and hit.score is not None
