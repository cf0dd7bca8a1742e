"""``Checkpoints`` registers a thread's session (with its checkpoint, in one transaction) only
the first time it writes to it, and keeps doing so past 4,096 threads (it cleared its whole
memory of them then, so most puts among 10,000 threads read the registry again); when full it
forgets the first thread it remembered, no other."""

from __future__ import annotations

import pytest

from sessions_core import SessionManager
from sessions_core import checkpoints as checkpoints_module
from sessions_core.checkpoints import Checkpoints
from sessions_core.integration import CheckpointRow


def _row(thread_id: str, checkpoint_id: str) -> CheckpointRow:
    return CheckpointRow(thread_id, "", checkpoint_id, None, "msgpack", b"state", "{}")


def _registrations(manager: SessionManager, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads whose put asks the store to register their session, from now on."""
    registered: list[str] = []
    put = manager.store.put_checkpoint

    def spy(session_id: str, namespace: str, row: CheckpointRow, **options: object) -> None:
        if options.get("session") is not None:
            registered.append(row.thread_id)
        put(session_id, namespace, row, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(manager.store, "put_checkpoint", spy)
    return registered


def test_a_known_thread_is_not_looked_up_again_past_4096_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    manager = SessionManager(":memory:")
    checkpoints = Checkpoints(manager)
    for n in range(5000):
        checkpoints.put(_row(f"t-{n}", "c1"))
    lookups = _registrations(manager, monkeypatch)
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
    lookups = _registrations(manager, monkeypatch)
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


def test_a_first_checkpoint_reads_nothing_before_its_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registration is part of the checkpoint's write: no registry read, no second write."""
    manager = SessionManager(":memory:")
    checkpoints = Checkpoints(manager)
    calls: list[str] = []
    for name in ("get_session_row", "register_session"):
        method = getattr(manager.store, name)
        monkeypatch.setattr(manager.store, name, lambda *a, _n=name, _m=method, **k: (calls.append(_n), _m(*a, **k))[1])
    checkpoints.put(_row("t", "c1"))
    assert calls == [] and manager.get("t") is not None
    manager.close()
