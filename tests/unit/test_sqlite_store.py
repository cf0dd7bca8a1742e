"""SQLite specifics: migrations, pragmas, closing."""

import re
import sqlite3

import pytest

from sessions_core import Session, SqliteStore, StoreError
from sessions_core.stores.sqlite import MIGRATIONS, _statements


def test_fresh_database_gets_every_migration_and_wal(tmp_path):
    store = SqliteStore(tmp_path / "a.db")
    store.setup()
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_an_older_database_is_migrated_in_place(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for statement in _statements(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute(
        "INSERT INTO session_messages (session_id, id, role, created_at, tokens, bytes, depth, path_tokens,"
        " path_bytes, text_content, content) VALUES ('', 'm0', 'user', 0, 5, 10, 1, 5, 10, 'kept',"
        ' \'{"id":"m0","role":"user","parts":[{"type":"text","text":"kept"}]}\')'
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with Session(path) as session:
        assert [m.text for m in session.get_history()] == ["kept"]
        assert session.store.get_block("", "memory") is None
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="newer"):
        store.setup()


def test_auto_setup_off_requires_setup(tmp_path):
    store = SqliteStore(tmp_path / "manual.db", auto_setup=False)
    with pytest.raises(StoreError, match="setup"):
        store.get_message("", "x")
    store.setup()
    assert store.get_message("", "x") is None


def test_closed_store_raises_a_clear_error():
    store = SqliteStore()
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_message("", "x")


def test_session_closes_only_what_it_opened(tmp_path):
    store = SqliteStore(tmp_path / "shared.db")
    with Session(store) as session:
        session.append_message({"id": "a", "role": "user", "parts": []})
    assert store.get_message("", "a") is not None
    store.close()


def test_invalid_synchronous_setting():
    with pytest.raises(ValueError):
        SqliteStore(synchronous="sometimes")


def test_search_ranks_only_the_most_recent_candidates(monkeypatch):
    from sessions_core.stores import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "SEARCH_CANDIDATES", 5)
    session = Session().for_session("s")
    for i in range(12):
        text = "needle " * (3 if i == 0 else 1) + "hay " * (i % 3)
        session.append_message({"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": text}]})
    hits = [hit.id for hit in session.search("needle", limit=20, match="all")]
    assert sorted(hits) == sorted(f"m{i}" for i in range(7, 12))  # the five newest matches
    assert "m0" not in hits  # the best-scoring but oldest match is outside the window
    other = Session(session.store).for_session("t")
    other.append_message({"id": "x", "role": "user", "parts": [{"type": "text", "text": "needle"}]})
    assert [hit.id for hit in other.search("needle", match="all")] == ["x"]  # the window is per session


def test_a_large_append_is_not_copied_into_a_temporary_table(tmp_path):
    """One append of a message over ``LARGE_ROW`` goes the batch way and gives the same row."""
    from sessions_core import Session

    big = "lorem ipsum " * 200_000
    for path in (tmp_path / "a.db", tmp_path / "b.db"):
        session = Session(str(path)).for_session("s")
        session.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
        if path.name == "a.db":
            session.append_message({"id": "u2", "role": "user", "parts": [{"type": "text", "text": big}]})
        else:
            session.append_messages([{"id": "u2", "role": "user", "parts": [{"type": "text", "text": big}]}])
        assert [m.id for m in session.get_history()] == ["u1", "u2"]
        assert session.get_message("u2").parts[0].text == big
        assert session.search("ipsum")[0].id == "u2"
        again = session.append_message({"id": "u2", "role": "user", "parts": [{"type": "text", "text": big}]})
        assert again.inserted is False
        session.store.close()
    rows = [
        sqlite3.connect(tmp_path / name)
        .execute("SELECT parent_id, depth, path_tokens, path_bytes, bytes, tokens FROM session_messages ORDER BY seq")
        .fetchall()
        for name in ("a.db", "b.db")
    ]
    assert rows[0] == rows[1]


def test_blocks_stored_before_versions_become_version_1(tmp_path):
    """Migration 0008: the content of every block and search entry is its version 1."""
    path = tmp_path / "seven.db"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:7]:
        for statement in _statements(migration):
            conn.execute(statement)
    conn.execute("INSERT INTO context_blocks VALUES ('s', 'memory', 1700000000000000, 'likes tea')")
    conn.execute(
        "INSERT INTO search_entries (session_id, label, key, created_at, updated_at, content, search_terms)"
        " VALUES ('s', 'kb', 'paris', 1, 1700000000000001, 'Paris is in France', 'paris franc')"
    )
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    assert [(v.version, v.content, v.source, v.created_at_us) for v in store.block_versions("s", "memory")] == [
        (1, "likes tea", "code", 1700000000000000)
    ]
    assert [v.content for v in store.block_versions("s", "kb", "paris")] == ["Paris is in France"]
    session = Session(store).for_session("s").with_context("memory", description="m")
    session.replace_context_block("memory", "likes coffee")
    assert [v.version for v in session.get_context_history("memory")] == [2, 1]
    store.close()


def test_overlays_stored_before_their_depths_get_them_at_setup(tmp_path):
    """Migration 0007 leaves the depths of existing overlays unknown; setup records them, so a
    compacted read of an upgraded database jumps over the covered range at once (issue 20)."""
    path = tmp_path / "six.db"
    with Session(str(path)).for_session("s") as session:
        for i in range(30):
            session.append_message({"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": f"m {i}"}]})
        overlay = session.add_compaction("summary", "m2", "m25")
        expected = [m.id for m in session.get_history()]
    conn = sqlite3.connect(path)
    conn.execute("UPDATE session_compactions SET from_depth = NULL, to_depth = NULL")  # as 0007 leaves them
    conn.execute(
        "INSERT INTO session_compactions (session_id, id, from_message_id, to_message_id, created_at,"
        " summary) VALUES ('s', 'ghost', 'm1', 'not-yet', 1, 'waits for its last message')"
    )
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    store.setup()
    depths = {row.compaction.id: (row.from_depth, row.to_depth) for row in store.overlays("s")}
    assert depths == {overlay.id: (3, 26), "ghost": (None, None)}
    session = Session(store).for_session("s")
    walks = store.path_ids
    store.path_ids = lambda *a, **k: pytest.fail("the whole path was walked")
    assert [m.id for m in session.get_history()] == expected
    # A delete changes depths (the rest of the chain becomes a root): they are recorded again at once.
    store.delete_messages("s", ["m1"])
    assert {row.compaction.id: (row.from_depth, row.to_depth) for row in store.overlays("s")} == {
        overlay.id: (1, 24),
        "ghost": (None, None),
    }
    store.path_ids = walks
    expected_after = [m.id for m in session.get_history()]
    store.path_ids = lambda *a, **k: pytest.fail("the whole path was walked")
    assert expected_after[0].startswith("compaction_") and expected_after[1:] == expected[3:]
    store.close()


BLOCKS_AT_SCHEMA_9 = [
    # (label, the row of context_blocks: version, content), and the versions kept beside it
    ("kept", (2, "likes coffee"), [(1, "likes tea"), (2, "likes coffee")]),
    ("later", (1, "current"), [(1, "current"), (2, "imported later")]),
    ("other", (3, "shown"), [(3, "another text")]),
    ("none", (4, "alone"), []),
]
"""What migration 0010 meets: a block consistent with its versions; one whose versions go past it
(an import); one whose version holds another text; one with no version at all."""


def test_blocks_become_their_versions_and_show_what_they_showed(tmp_path):
    """Migration 0010: a plain block is its newest version; what each block showed it still shows,
    and no version is lost."""
    path = tmp_path / "nine.db"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:9]:
        for statement in _statements(migration):
            conn.execute(statement)
    conn.execute("DROP TRIGGER context_blocks_version_insert")  # the versions below are set by hand
    conn.execute("DROP TRIGGER context_blocks_version_update")
    for label, (version, content), versions in BLOCKS_AT_SCHEMA_9:
        conn.execute("INSERT INTO context_blocks VALUES ('s', ?, 5, ?, ?, 'code', NULL)", (label, content, version))
        for number, text in versions:
            conn.execute(
                "INSERT INTO context_block_versions VALUES ('s', ?, '', ?, 1, 'code', NULL, ?)", (label, number, text)
            )
    conn.execute("PRAGMA user_version = 9")
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    labels = [label for label, _, _ in BLOCKS_AT_SCHEMA_9]
    assert store.get_blocks("s", labels) == {label: row[1] for label, row, _ in BLOCKS_AT_SCHEMA_9}
    assert [(v.version, v.content) for v in store.block_versions("s", "kept")] == [
        (2, "likes coffee"),
        (1, "likes tea"),
    ]
    assert [(v.version, v.content) for v in store.block_versions("s", "later")] == [
        (3, "current"),
        (2, "imported later"),
        (1, "current"),
    ]
    assert [(v.version, v.content) for v in store.block_versions("s", "other")] == [(4, "shown"), (3, "another text")]
    assert [(v.version, v.content) for v in store.block_versions("s", "none")] == [(1, "alone")]
    assert store.stats().blocks == 4
    assert store.write_block("s", "kept", "likes water") == 3
    assert store.get_block("s", "kept") == "likes water"
    store.close()


def test_a_block_written_at_a_version_it_has_is_left_as_it_is():
    """``write_block(version=N)``: an import whose versions came first; the block is version N."""
    store = SqliteStore(":memory:")
    assert store.write_block("s", "memory", "imported", version=5, source="import") == 5
    assert store.get_block("s", "memory") == "imported"
    assert store.write_block("s", "memory", "imported again", version=5, source="import") == 5
    assert [(v.version, v.content) for v in store.block_versions("s", "memory")] == [(5, "imported")]
    assert store.write_block("s", "memory", "next") == 6
    store.close()


def test_a_message_over_a_mebibyte_is_written_in_place(tmp_path):
    """Its text and JSON go to the row's last columns as blobs written in place (so that
    appending it copies neither); every read casts them back to the text they hold."""
    from sessions_core.stores.sql import LARGE_ROW

    store = SqliteStore(tmp_path / "large.db")
    session = Session(store).for_session("s")
    text = "opening 東京 🙂 " + "x" * LARGE_ROW
    session.append_messages(
        [
            {"id": "small", "role": "user", "parts": [{"type": "text", "text": "small"}]},
            {"id": "large", "role": "user", "parts": [{"type": "text", "text": text}]},
        ]
    )
    conn = sqlite3.connect(tmp_path / "large.db")
    rows = conn.execute(
        "SELECT id, typeof(large_text), typeof(large_content), text_content, length(content) FROM session_messages"
        " ORDER BY seq"
    ).fetchall()
    assert rows == [("small", "null", "null", "small", rows[0][4]), ("large", "blob", "blob", "", 0)]
    text_bytes, json_bytes = conn.execute(
        "SELECT large_text, large_content FROM session_messages WHERE id = 'large'"
    ).fetchone()
    assert text_bytes.decode() == text
    assert json_bytes.decode() == store.get_message("s", "large").content
    assert session.get_message("large").text == text
    # An update over 1 MiB is written in place too; one under it clears the large columns.
    session.update_message({"id": "small", "role": "user", "parts": [{"type": "text", "text": text + "!"}]})
    session.update_message({"id": "large", "role": "user", "parts": [{"type": "text", "text": "now small"}]})
    assert conn.execute(
        "SELECT id, typeof(large_content), text_content FROM session_messages ORDER BY seq"
    ).fetchall() == [("small", "blob", ""), ("large", "null", "now small")]
    assert [m.text for m in session.get_history()] == [text + "!", "now small"]
    store.close()


def test_blob_io_column_names_match_this_sqlite(tmp_path):
    """Blob I/O names the right column, whichever way this SQLite maps names after a VIRTUAL
    generated column (``_blob_io_misplaces``)."""
    from sessions_core.stores.sqlite import _blob_name

    store = SqliteStore(tmp_path / "names.db")
    Session(store).for_session("s").append_message({"id": "a", "role": "user", "parts": []})
    conn = sqlite3.connect(tmp_path / "names.db")
    conn.execute("UPDATE session_messages SET large_text = zeroblob(3), large_content = zeroblob(5)")
    for column, size in (("large_text", 3), ("large_content", 5)):
        with conn.blobopen("session_messages", _blob_name(conn, column), 1) as blob:
            assert len(blob) == size
    store.close()


@pytest.mark.parametrize("count", [1, 3, 100])
def test_an_item_upsert_binds_its_parameters_by_position(count):
    """A batch of puts is bound as one tuple, not by 600 names (each found by a linear scan):
    every placeholder is numbered, which Python 3.12+ accepts for a sequence without warning."""
    store = SqliteStore(":memory:")
    store.setup()
    rows = [(f"p{n}", f"k{n}", f'{{"n": {n}}}', 10**15 + n, 1.5, f"term{n}") for n in range(count)]
    sql, params = store._put_items("ns", rows, 7)
    assert isinstance(params, tuple) and len(params) == 2 + 6 * count
    assert re.findall(r"(?<![\w:]):[A-Za-z_]\w*", sql) == []
    assert max(int(mark) for mark in re.findall(r"\?(\d+)", sql)) == len(params)
    store._single(lambda conn: conn.execute(sql, params), write=True)
    stored = store._all(
        "SELECT prefix, key, value, expires_at, ttl_minutes, created_at FROM store_items ORDER BY prefix", ()
    )
    expected = sorted((p, k, v, e, t, 7) for p, k, v, e, t, _terms in rows)
    assert [tuple(row) for row in stored] == expected
    store.close()


def test_checkpoint_statements_bind_by_position():
    store = SqliteStore(":memory:")
    for sql in (store._put_checkpoint, store._put_writes_sql(3, True)[0], store._put_writes_sql(1, False)[0]):
        assert re.findall(r"(?<![\w:]):[A-Za-z_]\w*", sql) == []
        assert "?1" in sql
    store.close()
