"""``Checkpoints`` reads the registry for a thread only the first time it writes to it, and
keeps doing so past 4,096 threads (it cleared its whole memory of them then, so most puts
among 10,000 threads read the registry again); when full it forgets the first thread it
remembered, no other."""

from __future__ import annotations

import pytest

from sessions_core import SessionManager
from sessions_core import checkpoints as checkpoints_module
from sessions_core.checkpoints import Checkpoints
from sessions_core.integration import CheckpointRow


def _row(thread_id: str, checkpoint_id: str) -> CheckpointRow:
    return CheckpointRow(thread_id, "", checkpoint_id, None, "msgpack", b"state", "{}")


def test_a_known_thread_is_not_looked_up_again_past_4096_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    manager = SessionManager(":memory:")
    checkpoints = Checkpoints(manager)
    for n in range(5000):
        checkpoints.put(_row(f"t-{n}", "c1"))
    lookups: list[str] = []
    ensure = checkpoints_module.ensure_session
    monkeypatch.setattr(checkpoints_module, "ensure_session", lambda m, t: (lookups.append(t), ensure(m, t))[1])
    for n in range(5000):
        checkpoints.put(_row(f"t-{n}", "c2"))
    assert lookups == []
    assert checkpoints.get("t-4999") is not None and len(manager.list_sessions()) == 5000
    manager.close()


def test_a_full_memory_forgets_the_first_thread_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints_module, "_ID_CACHE", 3)
    manager = SessionManager(":memory:")
    checkpoints = Checkpoints(manager)
    for thread_id in ("a", "b", "c", "d"):
        checkpoints.put(_row(thread_id, "c1"))
    lookups: list[str] = []
    ensure = checkpoints_module.ensure_session
    monkeypatch.setattr(checkpoints_module, "ensure_session", lambda m, t: (lookups.append(t), ensure(m, t))[1])
    for thread_id in ("b", "c", "d", "a"):
        checkpoints.put(_row(thread_id, "c2"))
    assert lookups == ["a"]
    manager.close()


def test_a_cleared_session_is_registered_again() -> None:
    manager = SessionManager(":memory:")
    checkpoints = Checkpoints(manager)
    checkpoints.put(_row("t", "c1"))
    manager.delete("t")
    assert manager.get("t") is None
    checkpoints.put(_row("t", "c2"))
    assert manager.get("t") is not None
    manager.close()
