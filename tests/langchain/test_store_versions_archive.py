"""SQLite keeps an item's current version in its row only (migration 0016): a first put writes
one row, and an item's history (every put, and its deletions) reads the same as before."""

from __future__ import annotations

import sqlite3

from langchain_sessions import SessionStore
from sessions_core import SqliteStore
from sessions_core.stores import sqlite as sqlite_module
from sessions_core.stores.sqlite import MIGRATIONS


def write_history(store: SessionStore) -> None:
    for n in range(3):
        store.put(("memories", "u"), "kept", {"content": f"take {n}"})
    store.put(("memories", "u"), "gone", {"content": "once"})
    store.delete(("memories", "u"), "gone")
    store.put(("memories", "u"), "back", {"content": "first"})
    store.delete(("memories", "u"), "back")
    store.put(("memories", "u"), "back", {"content": "again"})


def histories(path) -> dict[str, list[tuple]]:
    store = SqliteStore(path)
    try:
        return {
            key: [(row.version, row.value) for row in store.item_versions("", "memories.u", key)]
            for key in ("kept", "gone", "back")
        }
    finally:
        store.close()


def test_a_first_put_writes_no_version_row_and_history_has_every_version(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    store.put(("memories", "u"), "new", {"content": "hello"})
    write_history(store)
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM store_item_versions WHERE key = 'new'").fetchone() == (0,)
    found = histories(path)
    assert [version for version, _ in found["kept"]] == [3, 2, 1]
    assert [value is None for _, value in found["gone"]] == [True, False]
    assert [version for version, _ in found["back"]] == [3, 2, 1]
    assert [value is None for _, value in found["back"]] == [False, True, False]


def test_the_migration_keeps_every_version_once(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:15])
        old = SessionStore(str(path))
        write_history(old)
        old.close()
    with sqlite3.connect(path) as conn:  # schema 15 kept every version in store_item_versions
        before = {
            key: conn.execute(
                "SELECT version, value FROM store_item_versions WHERE key = ? ORDER BY version DESC", (key,)
            ).fetchall()
            for key in ("kept", "gone", "back")
        }
    migrated = SessionStore(str(path))
    migrated.put(("memories", "u"), "kept", {"content": "take 3"})
    migrated.close()
    after = histories(path)
    assert after["kept"][1:] == before["kept"] and after["kept"][0][0] == 4
    assert after["gone"] == before["gone"] and after["back"] == before["back"]
