"""SQLite's keyword indexes take new rows in bulk (migration 0015): a new row waits for a search
of its table, a write of 64 rows, or a store's 64th write (an item for a search of the items
only, its text analysed then: migration 0017); whatever waits, a search finds it (a read-only
reader's too), and the index stays exactly the rows' terms (FTS5's own integrity check) through
inserts, updates, deletes and ``seq`` values given again."""

from __future__ import annotations

import sqlite3
import time

import pytest
from langgraph.store.base import PutOp

from langchain_sessions import SessionStore
from sessions_core import Session, SqliteStore
from sessions_core.fts import index_text
from sessions_core.stores import sqlite as sqlite_module
from sessions_core.stores.sqlite import _FTS_TABLES, CATCH_UP, MIGRATIONS
from sessions_core.testing.builders import ids, msg


def indexed_up_to(path, source: str = "session_messages") -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT seq FROM fts_indexed WHERE source = ?", (source,)).fetchone()[0]


def check_indexes(path) -> None:
    """FTS5's integrity check of every keyword index against its table, once the waiting rows
    are indexed (what a search does first)."""
    store = SqliteStore(path)
    for source in ("session_messages", "search_entries", "store_items"):
        store._searchable(source)
    store.close()
    with sqlite3.connect(path) as conn:
        for table in _FTS_TABLES:
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")


def test_a_new_message_waits_for_the_index_and_a_search_finds_it(tmp_path):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_message(msg("a", "the kestrel survey starts on monday"))
    assert indexed_up_to(path) == 0
    assert ids(session.search("kestrel")) == ["a"]
    assert indexed_up_to(path) == 1
    check_indexes(path)


def test_every_64th_write_indexes_what_waits(tmp_path):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_message(msg("m0", "note number 0 about heron"))
    appended = 1
    while indexed_up_to(path) == 0:
        session.append_message(msg(f"m{appended}", f"note number {appended} about heron"))
        appended += 1
        assert appended <= CATCH_UP
    with sqlite3.connect(path) as conn:
        match = "SELECT count(*) FROM session_messages_fts WHERE session_messages_fts MATCH 'heron'"
        assert conn.execute(match).fetchone() == (indexed_up_to(path),)
    assert len(session.search("heron", limit=100)) == appended
    check_indexes(path)


def test_a_write_of_64_rows_indexes_them_in_its_transaction(tmp_path):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_message(msg("first", "a lone heron"))
    session.append_messages([msg(f"m{n}", f"a heron {n}") for n in range(CATCH_UP)])
    assert indexed_up_to(path) == CATCH_UP + 1
    check_indexes(path)


def test_a_read_only_reader_finds_the_waiting_rows_and_writes_nothing(tmp_path):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_messages([msg(f"n{i}", f"meeting notes number {i}") for i in range(70)])  # indexed in bulk
    session.append_message(msg("rare", "the meeting about the kestrel survey"))
    session.append_message(msg("common", "notes notes meeting"))
    waiting = indexed_up_to(path)
    reader = Session(SqliteStore(path, read_only=True)).for_session("s")
    assert ids(reader.search("kestrel notes", limit=3))[0] == "rare"
    assert ids(reader.search("kestrel", match="all")) == ["rare"]
    assert set(ids(reader.search("notes", limit=200))) == {f"n{i}" for i in range(70)} | {"common"}
    assert indexed_up_to(path) == waiting  # nothing was written
    session.append_message(msg("late", "a kestrel again"))  # waits too: the reader's next search sees it
    assert sorted(ids(reader.search("kestrel"))) == ["late", "rare"]
    assert indexed_up_to(path) == waiting
    assert sorted(ids(session.search("kestrel"))) == ["late", "rare"]
    assert indexed_up_to(path) == 73


def test_changes_and_deletions_of_waiting_and_indexed_rows_keep_the_index_exact(tmp_path):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_messages([msg(f"old{i}", f"indexed falcon {i}") for i in range(65)])
    assert indexed_up_to(path) == 65
    session.append_messages([msg(f"new{i}", f"waiting falcon {i}") for i in range(5)])
    session.update_message(msg("old3", "changed to osprey"))  # indexed: changed at once
    session.update_message(msg("new2", "changed to osprey too"))  # waiting: indexed as it is then
    session.delete_messages(["old5", "new4"])
    assert sorted(ids(session.search("osprey"))) == ["new2", "old3"]
    found = set(ids(session.search("falcon", limit=200)))
    assert found == {f"old{i}" for i in range(65)} - {"old3", "old5"} | {"new0", "new1", "new3"}
    check_indexes(path)


def test_a_deletion_at_the_top_lowers_the_mark_so_a_seq_given_again_waits(tmp_path):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_messages([msg(f"m{i}", f"plover {i}") for i in range(65)])
    session.delete_messages(["m63", "m64"])  # the newest rows: SQLite gives their seq again
    assert indexed_up_to(path) == 63
    session.append_message(msg("again", "a plover returns"))
    with sqlite3.connect(path) as conn:
        seq = conn.execute("SELECT seq FROM session_messages WHERE id = 'again'").fetchone()[0]
    assert seq == 64 > indexed_up_to(path)
    assert "again" in ids(session.search("returns"))
    check_indexes(path)


def test_items_put_overwritten_and_deleted_keep_the_index_exact(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    for n in range(100):
        store.put(("memories", "u"), f"k{n}", {"content": f"grebe sighting {n}"})
    for n in range(0, 100, 7):
        store.put(("memories", "u"), f"k{n}", {"content": f"changed to a dunlin {n}"})
    for n in range(0, 100, 11):
        store.delete(("memories", "u"), f"k{n}")
    expected = {f"k{n}" for n in range(0, 100, 7)} - {f"k{n}" for n in range(0, 100, 11)}
    found = store.search(("memories",), query="dunlin", limit=100)
    assert {item.key for item in found if item.score is not None} == expected  # matched; the rest follow unscored
    store.close()
    check_indexes(path)


def test_the_migration_marks_every_existing_row_indexed(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:14])
        old = Session(str(path)).for_session("s")
        old.append_messages([msg(f"m{i}", f"sandpiper {i}") for i in range(3)])  # indexed at once, as then
        old.store.close()
    reopened = Session(str(path)).for_session("s")
    reopened.get_history()  # migrates
    assert indexed_up_to(path) == 3
    assert len(reopened.search("sandpiper")) == 3
    check_indexes(path)


@pytest.mark.parametrize("count", [1, 63, 64, 65, 200])
def test_appended_in_one_batch_every_message_is_found(tmp_path, count):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_messages([msg(f"m{i}", f"curlew {i}") for i in range(count)])
    assert len(session.search("curlew", limit=500)) == count
    check_indexes(path)


def test_close_indexes_what_waits_but_never_waits_for_another_writer(tmp_path):
    path = tmp_path / "chat.db"
    session = Session(str(path)).for_session("s")
    session.append_message(msg("a", "a wren sings"))
    session.store.close()
    assert indexed_up_to(path) == 1
    session = Session(str(path)).for_session("s")
    session.append_message(msg("b", "a wren again"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    started = time.monotonic()
    session.store.close()
    assert time.monotonic() - started < 1
    other.execute("ROLLBACK")
    other.close()
    assert indexed_up_to(path) == 1
    assert ids(Session(str(path)).for_session("s").search("wren")) == ["b", "a"]


def item_rows(path) -> dict[str, tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return {key: (seq, terms) for seq, key, terms in conn.execute("SELECT seq, key, search_terms FROM store_items")}


def test_an_item_put_neither_analyses_nor_indexes_and_a_search_does_both(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    for n in range(CATCH_UP + 1):  # past a 64th write: items still wait
        store.put(("memories", "u"), f"k{n}", {"content": f"Sightings of herons {n}"})
    store.batch([PutOp(("memories", "u"), f"b{n}", {"content": f"Sightings of egrets {n}"}) for n in range(200)])
    rows = item_rows(path)
    assert indexed_up_to(path, "store_items") == 0
    assert rows["k0"][1] == "content\nSightings of herons 0"  # the text to analyse, as stored then
    found = store.search(("memories",), query="heron", limit=300)
    assert {item.key for item in found if item.score is not None} == {f"k{n}" for n in range(CATCH_UP + 1)}
    assert indexed_up_to(path, "store_items") == max(seq for seq, _terms in item_rows(path).values())
    assert item_rows(path)["k0"][1] == index_text("content\nSightings of herons 0")
    store.close()
    check_indexes(path)


def test_a_changed_indexed_item_waits_again_under_a_new_seq(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    for n in range(5):
        store.put(("memories", "u"), f"k{n}", {"content": f"a lapwing {n}"})
    assert len(store.search(("memories",), query="lapwing")) == 5  # indexes them
    mark = indexed_up_to(path, "store_items")
    store.put(("memories", "u"), "k1", {"content": "now a godwit"})
    seq, text = item_rows(path)["k1"]
    assert seq > mark and text == "content\nnow a godwit"
    assert indexed_up_to(path, "store_items") == mark
    assert [item.key for item in store.search(("memories",), query="godwit") if item.score is not None] == ["k1"]
    assert {item.key for item in store.search(("memories",), query="lapwing") if item.score is not None} == {
        "k0",
        "k2",
        "k3",
        "k4",
    }
    assert [v.version for v in store.item_versions(("memories", "u"), "k1")] == [2, 1]
    store.close()
    check_indexes(path)


def test_a_read_only_reader_analyses_the_waiting_items_and_writes_nothing(tmp_path):
    path = tmp_path / "memory.db"
    store = SessionStore(str(path))
    store.put(("memories", "u"), "rare", {"content": "Running with the kestrels"})
    store.put(("memories", "u"), "common", {"content": "notes about notes"})
    reader = SessionStore(SqliteStore(path, read_only=True))
    found = reader.search(("memories",), query="kestrel run", limit=1)  # stemmed: analysed as a put would have
    assert [item.key for item in found] == ["rare"] and found[0].score is not None
    assert indexed_up_to(path, "store_items") == 0
    assert item_rows(path)["rare"][1] == "content\nRunning with the kestrels"
    store.put(("memories", "u"), "late", {"content": "a kestrel again"})
    assert {item.key for item in reader.search(("memories",), query="kestrel") if item.score is not None} == {
        "rare",
        "late",
    }
    assert indexed_up_to(path, "store_items") == 0
    store.search(("memories",), query="kestrel")  # the writer indexes them
    assert indexed_up_to(path, "store_items") > 0
    assert [item.key for item in reader.search(("memories",), query="kestrel run", limit=1)] == ["rare"]
    reader.close()
    store.close()
    check_indexes(path)


def test_the_items_migration_indexes_the_waiting_items_as_their_terms(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:16])
        old = SessionStore(str(path))
        assert old.get(("memories", "u"), "a") is None  # migrates
        old.close()
    with sqlite3.connect(path) as conn:  # a put of then: its terms stored, waiting for the index
        conn.execute(
            "INSERT INTO store_items (namespace, prefix, key, value, version, created_at, updated_at, search_terms)"
            " VALUES ('', 'memories.u', 'a', ?, 1, 0, 0, ?)",
            ('{"content": "Stargazing tonight"}', index_text("content\nStargazing tonight")),
        )
    assert indexed_up_to(path, "store_items") == 0
    store = SessionStore(str(path))
    assert [item.key for item in store.search(("memories",), query="stargazing")] == ["a"]
    assert item_rows(path)["a"][1] == index_text("content\nStargazing tonight")  # not analysed twice
    assert indexed_up_to(path, "store_items") == 1
    store.close()
    check_indexes(path)
