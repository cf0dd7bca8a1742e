"""sessions_core.branching: soft resets, set-the-history, raw paths, registered ids."""

from __future__ import annotations

import asyncio

import pytest

from sessions_core import Session, SessionManager
from sessions_core.branching import (
    aset_active_history,
    ensure_session,
    is_marker,
    raw_history,
    set_active_history,
    soft_reset,
)
from tests.helpers import ids, msg


def texts(messages):
    return [m.text for m in messages]


@pytest.fixture
def session():
    with Session().for_session("s") as s:
        for i, role in enumerate(["user", "assistant", "user", "assistant"]):
            s.append_message(msg(f"m{i}", f"text {i}", role))
        yield s


def test_soft_reset_starts_an_empty_branch_and_keeps_everything(session):
    marker = soft_reset(session)
    assert is_marker(marker)
    assert raw_history(session) == []
    session.append_message(msg("n0", "fresh start"))
    assert ids(raw_history(session)) == ["n0"]
    assert ids(raw_history(session, "m3")) == ["m0", "m1", "m2", "m3"]
    assert [hit.id for hit in session.search("text")]  # old messages still searchable


def test_equal_history_changes_nothing(session):
    before = session.get_path_length()
    again = [msg(f"x{i}", f"text {i}", role) for i, role in enumerate(["user", "assistant", "user", "assistant"])]
    assert set_active_history(session, again) == []
    assert session.get_path_length() == before
    assert ids(raw_history(session)) == ["m0", "m1", "m2", "m3"]


def test_extension_appends_only_the_new_messages(session):
    history = [m.model_copy(update={"id": f"copy{i}"}) for i, m in enumerate(raw_history(session))]
    stored = set_active_history(session, [*history, msg("m4", "text 4")])
    assert ids(stored) == ["m4"]
    assert ids(raw_history(session)) == ["m0", "m1", "m2", "m3", "m4"]


def test_divergence_branches_at_the_shared_prefix(session):
    stored = set_active_history(session, [msg("a", "text 0"), msg("b", "other", "assistant")])
    assert ids(stored) == ["b"]
    assert ids(raw_history(session)) == ["m0", "b"]
    assert ids(session.get_branches("m0")) == ["m1", "b"]


def test_a_prefix_becomes_the_active_branch(session):
    set_active_history(session, [msg("a", "text 0"), msg("b", "text 1", "assistant")])
    assert ids(raw_history(session)) == ["m0", "m1"]
    session.append_message(msg("next", "continues after m1"))
    assert ids(raw_history(session)) == ["m0", "m1", "next"]
    assert ids(session.get_history("m3")) == ["m0", "m1", "m2", "m3"]


def test_nothing_shared_is_a_new_root_and_empty_is_a_reset(session):
    set_active_history(session, [msg("z", "unrelated")])
    assert ids(raw_history(session)) == ["z"]
    set_active_history(session, [])
    assert raw_history(session) == []


def test_an_id_stored_elsewhere_gets_a_new_id(session):
    stored = set_active_history(session, [msg("m3", "reused id, other text")])
    assert stored[0].id != "m3"
    assert texts(raw_history(session)) == ["reused id, other text"]


def test_invalid_message_stores_nothing(session):
    with pytest.raises(ValueError):
        set_active_history(session, [msg("ok", "fine"), {"id": "bad", "role": "robot", "parts": []}])
    assert ids(raw_history(session)) == ["m0", "m1", "m2", "m3"]


def test_async_twin(session):
    asyncio.run(aset_active_history(session, [msg("a", "text 0")]))
    assert ids(raw_history(session)) == ["m0"]


def test_raw_history_ignores_compaction(session):
    session.add_compaction("summary", "m1", "m2")
    assert texts(session.get_history()) == ["text 0", "summary", "text 3"]
    assert ids(raw_history(session)) == ["m0", "m1", "m2", "m3"]


def test_ensure_session_registers_a_chosen_id():
    with SessionManager(namespace="app") as manager:
        info = ensure_session(manager, "alice")
        assert (info.id, info.name) == ("alice", "alice")
        assert ensure_session(manager, "alice", name="other").name == "alice"
        manager.append("alice", msg("u1", "hello there"))
        assert [i.id for i in manager.list_sessions()] == ["alice"]
        assert [hit.session_id for hit in manager.search("hello")] == ["alice"]


def test_append_registers_the_session_only_when_asked():
    with SessionManager(namespace="app") as manager:
        manager.append("bob", msg("u1", "kept, unregistered"))
        assert manager.get("bob") is None
        manager.append("bob", msg("u2", "and now registered"), register=True)
        info = manager.get("bob")
        assert info is not None and (info.id, info.name) == ("bob", "bob")
        manager.append("bob", msg("u3", "touched, not registered again"), register=True)
        again = manager.get("bob")
        assert again is not None and (again.created_at, again.name) == (info.created_at, "bob")
        assert [m.id for m in manager.get_history("bob")] == ["u1", "u2", "u3"]


def test_a_registration_registers_at_first_use_and_again_after_a_delete():
    from sessions_core.integration import Registration

    with SessionManager() as manager:
        listening = len(manager._feed._subscribers)
        registrations = [Registration(manager, f"s{n}") for n in range(100)]
        assert len(manager._feed._subscribers) == listening  # none kept: a history may live long
        assert manager.list_sessions() == []  # nothing until asked
        registrations[0].ensure()
        registrations[1].ensure()
        assert sorted(info.id for info in manager.list_sessions()) == ["s0", "s1"]
        assert manager.delete("s0")
        registrations[1].ensure()  # checked again (another session went), still there
        registrations[0].ensure()
        assert sorted(info.id for info in manager.list_sessions()) == ["s0", "s1"]


def test_session_history_reads_never_show_head_markers():
    from sessions_core import Session
    from sessions_core.branching import soft_reset

    session = Session()
    session.append_message({"id": "a", "role": "user", "parts": [{"type": "text", "text": "x"}]})
    marker = soft_reset(session)
    session.append_message({"id": "b", "role": "user", "parts": [{"type": "text", "text": "y"}]})
    assert [m.id for m in session.get_history()] == ["b"]
    assert [m.id for m in session.history(newest_first=True)] == ["b"]
    assert [m.id for m in session.get_recent_history(10_000).messages] == ["b"]
    assert [m.id for m in session.get_history(raw=True)] == [marker.id, "b"]
