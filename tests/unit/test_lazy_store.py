"""A SQLite store opens its file on first use: building a ``Session`` or ``SessionManager``
(inside async code, say) does no I/O."""

from __future__ import annotations

from sessions_core import Session, SessionManager
from sessions_core.stores.sqlite import SqliteStore


def test_building_opens_nothing_first_use_does(tmp_path):
    path = tmp_path / "chat.db"
    store = SqliteStore(path)
    Session(store).for_session("s").with_context("memory", max_tokens=100)
    SessionManager(store)
    assert not path.exists()
    assert Session(store).for_session("s").get_history() == []
    assert path.exists()
    store.close()


def test_closing_an_unused_store_is_fine(tmp_path):
    store = SqliteStore(tmp_path / "unused.db")
    store.close()
    store.close()
    assert not (tmp_path / "unused.db").exists()
