"""SessionChatStore: a BaseChatStore over a SessionManager, sync and async."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.storage.chat_store.base import BaseChatStore

from llamaindex_sessions import SessionChatStore
from sessions_core import SessionManager


def texts(messages):
    return [m.content for m in messages]


def m(text, role="user"):
    return ChatMessage(role=role, content=text)


@pytest.fixture
def store(db):
    with SessionManager(db) as manager:
        yield SessionChatStore(manager)


def test_is_a_chat_store_and_keys_are_sessions(store):
    assert isinstance(store, BaseChatStore)
    assert store.get_keys() == []
    store.add_message("alice", m("hello"))
    store.add_message("bob", m("hi"))
    assert sorted(store.get_keys()) == ["alice", "bob"]
    assert store.manager.get("alice").name == "alice"
    assert [hit.session_id for hit in store.manager.search("hello")] == ["alice"]


def test_add_get_and_tool_messages(store):
    call = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={"x": 1})])
    result = ChatMessage(role="tool", content="done", additional_kwargs={"tool_call_id": "c1"})
    for message in (m("q"), call, result, m("a", "assistant")):
        store.add_message("k", message)
    assert store.get_messages("k") == [m("q"), call, result, m("a", "assistant")]
    assert store.get_messages("unknown") == []


def test_set_messages_keeps_the_shared_prefix(store):
    store.set_messages("k", [m("one"), m("two", "assistant")])
    store.set_messages("k", [m("one"), m("two", "assistant"), m("three")])
    session = store.manager.get_session("k")
    assert session.get_path_length() == 3
    store.set_messages("k", [m("one"), m("other", "assistant")])
    assert texts(store.get_messages("k")) == ["one", "other"]
    assert len(session.search("two")) == 1  # the old branch is kept


def test_deletes_move_to_a_branch_and_return_what_they_hide(store):
    store.set_messages("k", [m("a"), m("b", "assistant"), m("c"), m("d", "assistant")])
    assert store.delete_message("k", 1).content == "b"
    assert texts(store.get_messages("k")) == ["a", "c", "d"]
    assert store.delete_last_message("k").content == "d"
    assert texts(store.get_messages("k")) == ["a", "c"]
    assert store.delete_message("k", 7) is None
    assert texts(store.delete_messages("k")) == ["a", "c"]
    assert store.get_messages("k") == []
    assert store.delete_messages("k") is None
    assert store.delete_last_message("k") is None
    assert store.manager.get_session("k").search("b")  # nothing was deleted
    store.add_message("k", m("x"), idx=0)
    store.add_message("k", m("y"), idx=0)
    assert texts(store.get_messages("k")) == ["y", "x"]


def test_async_methods(store):
    async def go():
        await store.aset_messages("k", [m("one")])
        await store.async_add_message("k", m("two", "assistant"))
        await store.aadd_message("k", m("three"))
        got = await store.aget_messages("k")
        last = await store.adelete_last_message("k")
        removed = await store.adelete_message("k", 0)
        keys = await store.aget_keys()
        cleared = await store.adelete_messages("k")
        return got, last, removed, keys, cleared

    got, last, removed, keys, cleared = asyncio.run(go())
    assert texts(got) == ["one", "two", "three"]
    assert (last.content, removed.content, keys, texts(cleared)) == ("three", "one", ["k"], ["two"])


def test_under_llamaindex_chat_memory_buffer(store):
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="carol", token_limit=1000)
    memory.put(m("hello"))
    memory.put(m("hi there", "assistant"))
    assert texts(memory.get()) == ["hello", "hi there"]
    memory.reset()
    assert memory.get_all() == []
    assert store.manager.get_session("carol").search("hello")


def test_get_keys_in_the_order_keys_were_first_written_as_simple_chat_store(store):
    from llama_index.core.storage.chat_store import SimpleChatStore

    simple = SimpleChatStore()
    for key in ("bob", "alice", "carol", "bob", "alice"):
        for chat_store in (store, simple):
            chat_store.add_message(key, m(f"to {key}"))
    assert store.get_keys() == simple.get_keys() == ["bob", "alice", "carol"]
