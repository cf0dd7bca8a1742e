"""A keyword search of LangGraph items on SQLite reads its scope's postings only (migration
0018): each indexed item's row of the keyword index holds a token for its namespace and one for
each prefix its own starts with, and a search matches its words AND its scope's token, so that it
costs in proportion to the scope, not the store. What it finds is unchanged: the scope is
checked on every match (two scopes may share a token); an item without terms has no tokens; the
migration gives the already indexed items theirs."""

from __future__ import annotations

import sqlite3

from langgraph.store.base import PutOp

from langchain_sessions import SessionStore
from sessions_core import SqliteStore
from sessions_core.fts import index_text
from sessions_core.stores import sqlite as sqlite_module
from sessions_core.stores.sql import item_scope_token, item_scope_tokens
from sessions_core.stores.sqlite import MIGRATIONS

from .test_deferred_fts import check_indexes


def _in_index(path, namespace: str, under: str) -> int:
    """How many rows of the items' keyword index hold the scope's token."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT count(*) FROM store_items_fts WHERE store_items_fts MATCH ?",
            (f'scope_tokens : "{item_scope_token(namespace, under)}"',),
        ).fetchone()[0]


def _matched(store, prefix: tuple[str, ...], query: str, limit: int = 10) -> list[str]:
    """The keys a search matched (scored), best first; the unmatched items it lists after them left out."""
    return [item.key for item in store.search(prefix, query=query, limit=limit) if item.score is not None]


def test_every_prefix_an_item_is_under_finds_it_and_no_other_scope_does(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    store.batch(
        [PutOp(("memories", f"user-{n % 10}"), f"k{n}", {"content": f"an avocet seen {n}"}) for n in range(300)]
        + [PutOp(("notes", "user-1", "trips"), "lisbon", {"content": "an avocet by the river"})]
        + [PutOp(("memories", "user-1"), "hidden", {"content": "an avocet"}, index=False)]
    )
    assert set(_matched(store, ("memories", "user-3"), "avocet", limit=100)) == {f"k{n}" for n in range(3, 300, 10)}
    assert [i.key for i in store.search(("notes",), query="avocet")] == ["lisbon"]
    assert [i.key for i in store.search(("notes", "user-1", "trips"), query="avocet")] == ["lisbon"]
    assert store.search(("notes", "user-1", "trip"), query="avocet") == []  # a label's prefix is not a prefix
    assert len(store.search(("memories",), query="avocet", limit=1000)) == 301  # unscored: the unindexed one
    assert _in_index(path, "", "memories.user-3") == 30
    assert _in_index(path, "", "memories") == 300
    assert _in_index(path, "", "") == 301
    assert _in_index(path, "", "notes.user-1") == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT scope_tokens FROM store_items WHERE key = 'hidden'").fetchone() == ("",)
        assert conn.execute("SELECT scope_tokens FROM store_items WHERE key = 'lisbon'").fetchone() == (
            item_scope_tokens("", "notes.user-1.trips"),
        )
    store.close()
    check_indexes(path)


def test_a_changed_item_loses_its_tokens_until_indexed_again(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    store.put(("memories", "u"), "a", {"content": "a whimbrel"})
    store.put(("memories", "u"), "b", {"content": "a curlew"})
    assert _matched(store, ("memories", "u"), "whimbrel") == ["a"]
    store.put(("memories", "u"), "a", {"content": "no longer"}, index=False)
    store.put(("memories", "u"), "b", {"content": "a whimbrel now"})
    assert _in_index(path, "", "memories.u") == 0  # their old rows are out: b waits, a has no terms
    assert _matched(store, ("memories", "u"), "whimbrel") == ["b"]
    assert _in_index(path, "", "memories.u") == 1
    store.close()
    check_indexes(path)


def test_a_read_only_reader_searches_the_waiting_items_by_scope(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    store.put(("memories", "a"), "one", {"content": "a godwit"})
    store.put(("memories", "b"), "two", {"content": "a godwit too"})
    reader = SessionStore(SqliteStore(path, read_only=True))
    assert [i.key for i in reader.search(("memories", "b"), query="godwit")] == ["two"]
    assert set(_matched(reader, ("memories",), "godwit")) == {"one", "two"}
    reader.close()
    store.close()


def test_the_migration_gives_the_indexed_items_their_tokens(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:17])
        SqliteStore(path).setup()
    with sqlite3.connect(path) as conn:  # indexed items of then, and one waiting as its text
        for seq, prefix, key, text in [(1, "memories.u", "a", "a sanderling"), (2, "notes.v", "b", "sanderlings")]:
            terms = index_text(f"content\n{text}")
            conn.execute(
                "INSERT INTO store_items (seq, namespace, prefix, key, value, version, created_at, updated_at,"
                " search_terms) VALUES (?, '', ?, ?, ?, 1, 0, 0, ?)",
                (seq, prefix, key, f'{{"content": "{text}"}}', terms),
            )
            conn.execute("INSERT INTO store_items_fts (rowid, search_terms) VALUES (?, ?)", (seq, terms))
        conn.execute("UPDATE fts_indexed SET seq = 2 WHERE source = 'store_items'")
        conn.execute(
            "INSERT INTO store_items (seq, namespace, prefix, key, value, version, created_at, updated_at,"
            " search_terms) VALUES (3, '', 'memories.u', 'c', '{}', 1, 0, 0, 'content\nsanderling flock')"
        )
    store = SessionStore(str(path))
    assert set(_matched(store, ("memories",), "sanderling")) == {"a", "c"}
    assert [i.key for i in store.search(("notes", "v"), query="sanderling")] == ["b"]
    assert _in_index(path, "", "") == 3
    store.close()
    check_indexes(path)
