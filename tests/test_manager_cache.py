"""The manager's bounded cache of ``Session`` handles."""

from __future__ import annotations

import gc
import weakref

import pytest

from sessions_core import ConflictError, Session, SessionManager


def test_a_manager_serving_100k_sessions_holds_at_most_its_cache_size():
    manager = SessionManager(":memory:", cache_size=256).with_context("memory", max_tokens=100)
    alive: weakref.WeakSet[Session] = weakref.WeakSet()
    for n in range(100_000):
        alive.add(manager.get_session(f"user-{n}"))
    gc.collect()
    assert len(manager._sessions) == 256
    assert len(alive) <= 256
    manager.close()


def test_an_evicted_session_is_rebuilt_from_the_store():
    manager = SessionManager(":memory:", cache_size=2).with_context("memory", max_tokens=100)
    first = manager.get_session("a")
    first.replace_context_block("memory", "likes tea")
    manager.append("a", {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hello"}]})
    for other in ("b", "c", "d"):
        manager.get_session(other)
    again = manager.get_session("a")
    assert again is not first
    assert again.get_context_block("memory").content == "likes tea"
    assert [m.parts[0].text for m in again.get_history()] == ["hello"]
    manager.close()


def test_the_most_recently_used_sessions_stay_cached():
    manager = SessionManager(":memory:", cache_size=2)
    a = manager.get_session("a")
    manager.get_session("b")
    assert manager.get_session("a") is a  # a is now the most recent
    manager.get_session("c")  # evicts b
    assert manager.get_session("a") is a
    assert set(manager._sessions) == {"a", "c"}
    manager.close()


def test_builder_steps_reach_sessions_built_after_eviction():
    manager = SessionManager(":memory:", cache_size=1)
    manager.get_session("a")
    manager.get_session("b")
    manager.with_context("notes", max_tokens=50)
    assert "NOTES" in manager.get_session("a").freeze_system_prompt().upper()
    manager.close()


@pytest.mark.parametrize("size", [0, -1])
def test_a_cache_size_below_one_is_refused(size):
    with pytest.raises(ValueError, match="cache_size"):
        SessionManager(":memory:", cache_size=size)


def test_a_cache_size_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="cache_size"):
        SessionManager(":memory:", cache_size="10")  # type: ignore[arg-type]


def test_a_managers_session_handle_is_not_rescoped_in_place():
    manager = SessionManager(":memory:")
    handle = manager.get_session("a")
    with pytest.raises(ConflictError, match="get_session"):
        handle.for_session("b")
    assert handle.for_session(handle.session_id) is handle  # naming its own session changes nothing
    assert manager.get_session("a") is handle and handle.session_id == "a"
    manager.close()
