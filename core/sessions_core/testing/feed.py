"""The change feed (``subscribe``, ``mirror``) and client-input safety, on every store and mode."""

from __future__ import annotations

import asyncio

import pytest

from sessions_core import MessageTooLargeError, create_compact_function

from .builders import ids, msg
from .harness import skip_where_unsupported


def _session(s):
    return s.session if hasattr(s, "_loop") else s


def test_every_write_is_reported_with_its_session(make_session):
    s = make_session("feed")
    _session(s).with_context("memory", max_tokens=200)
    events = []
    unsubscribe = _session(s).subscribe(events.append)
    s.append_message(msg("m0"))
    s.append_message(msg("m1"))
    s.append_message(msg("m0"))  # already stored: reported, not inserted
    s.update_message(msg("m1", "changed"))
    s.add_compaction("summary", "m0", "m0")
    s.replace_context_block("memory", "likes tea")
    s.delete_messages(["m1", "ghost"])
    s.clear_messages()
    assert [e.type for e in events] == ["append", "append", "append", "update", "compact", "block", "delete", "clear"]
    assert {e.session_id for e in events} == {"feed"}
    first, second, duplicate = events[:3]
    assert (first.message.id, first.parent_id, first.inserted) == ("m0", None, True)
    assert (second.parent_id, second.inserted) == ("m0", True)
    assert (duplicate.message.id, duplicate.inserted) == ("m0", False)
    assert events[3].message.text == "changed"
    assert events[4].compaction.summary == "summary"
    assert (events[5].label, events[5].key) == ("memory", None)
    assert events[6].message_ids == ("m1",)
    unsubscribe()
    s.append_message(msg("after"))
    assert len(events) == 8


def test_tool_writes_and_compactions_are_reported(make_session):
    s = make_session()
    session = _session(s)
    session.with_context("memory", max_tokens=200)
    session.on_compaction(
        create_compact_function(summarize=lambda prompt: "short summary", protect_head=1, keep_recent_tokens=10)
    )
    events = []
    session.subscribe(events.append)
    set_context = next(t for t in s.tools() if t.name == "set_context")
    assert set_context.invoke({"label": "memory", "content": "User likes coffee."}).startswith("Written to memory")
    for i in range(6):
        s.append_message(msg(f"m{i}", "word " * 30))
    s.compact()
    assert [e.type for e in events].count("block") == 1
    assert events[-1].type == "compact"


def test_async_subscribers_are_awaited(make_session):
    s = make_session()
    seen = []

    async def subscriber(event):
        await asyncio.sleep(0)
        seen.append(event.type)

    _session(s).subscribe(subscriber)
    s.append_message(msg("m0"))
    s.delete_messages(["m0"])
    assert seen == ["append", "delete"]


def test_a_failing_subscriber_never_fails_the_write(make_session):
    s = make_session()

    def broken(event):
        raise RuntimeError("subscriber bug")

    _session(s).subscribe(broken)
    assert s.append_message(msg("m0")).inserted
    assert ids(s.get_history()) == ["m0"]


def test_mirror_stays_equal_to_the_history(make_session):
    s = make_session()
    session = _session(s)
    state: dict[str, list] = {"messages": []}
    stop = session.mirror(lambda: state["messages"], lambda value: state.__setitem__("messages", value))

    def check():
        assert ids(state["messages"]) == ids(s.get_history())

    for i in range(5):
        s.append_message(msg(f"m{i}"))
        check()
    s.append_message(msg("branch"), parent_id="m1")
    check()
    s.append_message(msg("on-branch"))
    check()
    s.update_message(msg("m1", "edited"))
    check()
    assert state["messages"][1].text == "edited"
    s.delete_messages(["branch"])  # its child becomes a root, and the active leaf
    check()
    s.delete_messages(["on-branch"])
    check()
    s.add_compaction("summary of the start", "m0", "m2")
    check()
    assert state["messages"][0].id.startswith("compaction_")
    s.append_message(msg("root"), parent_id=None)
    check()
    s.clear_messages()
    check()
    assert state["messages"] == []
    stop()
    s.append_message(msg("unseen"))
    assert state["messages"] == []


def test_manager_feed_names_the_managers_session(make_manager):
    manager = make_manager(namespace="feed")
    target = manager.target if hasattr(manager, "target") else manager
    events = []
    target.subscribe(events.append)
    info = manager.create("chat")
    manager.append(info.id, msg("m0"))
    manager.delete(info.id)
    assert [(e.type, e.session_id) for e in events] == [("append", info.id), ("clear", info.id)]


def test_client_messages_lose_reserved_metadata(make_session):
    s = make_session(reserved_metadata_keys=("usage", "internal"))
    message = msg("c1", metadata={"usage": {"tokens": 5}, "internal": True, "theme": "dark"})
    stored = s.append_message(message, source="client").message
    assert stored.metadata == {"theme": "dark"}
    assert s.get_message("c1").metadata == {"theme": "dark"}
    server = s.append_message(msg("s1", metadata={"usage": {"tokens": 7}}))
    assert server.message.metadata == {"usage": {"tokens": 7}}


def test_oversized_client_messages_are_refused_and_nothing_is_stored(make_session):
    s = make_session(max_message_bytes=200)
    s.append_message(msg("small", "ok"), source="client")
    with pytest.raises(MessageTooLargeError, match="over the limit of 200"):
        s.append_message(msg("big", "x" * 500), source="client")
    assert s.get_message("big") is None
    assert ids(s.get_history()) == ["small"]
    assert s.append_message(msg("server-big", "x" * 500)).inserted  # the limit is for client input


skip_where_unsupported(globals())
