"""Encryption at rest: a SQLite store opened with ``key=`` (SQLCipher) keeps no stored text in its
files, refuses a wrong or missing key with a clear error, and changes its key; the CLI reads the
key from ``SESSIONS_KEY``. The whole conformance suite also runs on it (``sqlite-encrypted``)."""

from __future__ import annotations

import asyncio
import base64
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")

from sessions_core import (
    EncryptionKeyError,
    InvalidInputError,
    Session,
    SessionManager,
    SqliteStore,
    StoreError,
    StoreSearchContext,
    StoreUnavailableError,
)
from sessions_core.cipher import CIPHER_SETTINGS, DEFAULT_SETTINGS, SQLITE_HEADER, key_pragma
from sessions_core.stores import sqlite as sqlite_module

from .helpers import msg

KEY = "correct horse battery staple"
RAW_KEY = bytes(range(32))


def _write_everything(store: SqliteStore, marker: str) -> None:
    """Messages (text, tool call and result, a file payload), blocks and their versions, a search
    entry and a compaction, each carrying ``marker``."""
    session = (
        Session(store)
        .for_session("s")
        .with_context("memory", description="Learned facts")
        .with_context("knowledge", description="Notes", provider=StoreSearchContext())
    )
    for n in range(50):
        session.append_message(msg(f"u{n}", f"message {n} about {marker}"))
    session.append_message(
        {
            "id": "call",
            "role": "assistant",
            "parts": [{"type": "tool-call", "toolCallId": "c1", "toolName": "lookup", "input": {"q": marker}}],
        }
    )
    session.append_message(
        {
            "id": "result",
            "role": "tool",
            "parts": [{"type": "tool-result", "toolCallId": "c1", "toolName": "lookup", "output": {"a": marker}}],
        }
    )
    payload = (marker * 200).encode()
    session.append_message(
        {
            "id": "file",
            "role": "user",
            "parts": [{"type": "file", "mediaType": "text/plain", "data": base64.b64encode(payload).decode()}],
        }
    )
    session.replace_context_block("memory", f"the user likes {marker}")
    session.replace_context_block("memory", f"the user loves {marker}")
    store.set_search_entry("s", "knowledge", "fact", f"a fact about {marker}")
    session.add_compaction(f"summary of {marker}", "u0", "u10")


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.parent.glob(path.name + "*") if not p.name.endswith("-shm")}


@pytest.mark.parametrize("key", [KEY, RAW_KEY], ids=["passphrase", "raw"])
def test_the_files_hold_no_stored_text(tmp_path, key):
    marker = "quokka" + secrets.token_hex(8)
    plain, encrypted = tmp_path / "plain.db", tmp_path / "encrypted.db"
    for path, store_key in ((plain, None), (encrypted, key)):
        store = SqliteStore(path, key=store_key)
        _write_everything(store, marker)
        open_files = _files(path)  # while open: the WAL holds the latest pages
        assert f"{path.name}-wal" in open_files
        store.close()
        closed_files = _files(path)
        if store_key is None:  # the control: a plain file holds the marker
            assert any(marker.encode() in data for data in {**open_files, **closed_files}.values())
            continue
        for name, data in [*open_files.items(), *closed_files.items()]:
            assert marker.encode() not in data, name
            assert b"quokka" not in data, name
        assert not closed_files[path.name].startswith(SQLITE_HEADER)
        assert not open_files[path.name].startswith(SQLITE_HEADER)
    store = SqliteStore(encrypted, key=key)
    reopened = Session(store).for_session("s")
    assert reopened.search(marker) and reopened.get_message("file") is not None
    assert store.get_block("s", "memory") == f"the user loves {marker}"
    store.close()


def _encrypted_file(tmp_path: Path, key: str | bytes = KEY) -> Path:
    path = tmp_path / "chat.db"
    with Session(path, key=key) as session:
        session.append_message(msg("a", "hello there"))
    return path


def test_a_wrong_key_is_a_clear_error(tmp_path):
    path = _encrypted_file(tmp_path)
    for wrong in ("not the key", RAW_KEY):
        with pytest.raises(EncryptionKeyError, match="wrong key") as raised:
            SqliteStore(path, key=wrong).schema_version()
        assert "file is not a database" not in str(raised.value)
        assert isinstance(raised.value, StoreError)
    with pytest.raises(EncryptionKeyError, match="wrong key"):
        Session(path, key="not the key").get_history()
    with pytest.raises(EncryptionKeyError, match="wrong key"):
        SqliteStore(path, key="not the key", read_only=True).schema_version()


def test_no_key_for_an_encrypted_file_says_it_is_encrypted(tmp_path):
    path = _encrypted_file(tmp_path)
    for store in (SqliteStore(path), SqliteStore(path, read_only=True)):
        with pytest.raises(EncryptionKeyError, match="this database is encrypted: pass key=") as raised:
            store.schema_version()
        assert "not a SQLite database" not in str(raised.value)
    with pytest.raises(EncryptionKeyError, match="encrypted"):
        Session(path).get_history()


def test_a_key_for_a_plain_file_says_it_is_not_encrypted(tmp_path):
    path = tmp_path / "plain.db"
    with Session(path) as session:
        session.append_message(msg("a", "hello"))
    with pytest.raises(EncryptionKeyError, match="not encrypted, so key= does not apply"):
        SqliteStore(path, key=KEY).schema_version()
    with Session(path) as session:  # the failed open changed nothing
        assert [m.id for m in session.get_history()] == ["a"]


def test_a_text_file_is_still_not_a_database(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("not a database, only text long enough to fill a header " * 20)
    with pytest.raises(StoreError, match="not a database") as raised:
        SqliteStore(path).schema_version()
    assert not isinstance(raised.value, EncryptionKeyError)


def test_rekey_then_only_the_new_key_opens(tmp_path):
    path = _encrypted_file(tmp_path)
    store = SqliteStore(path, key=KEY)
    store.rekey("new passphrase")
    Session(store).append_message(msg("b", "after the rekey"))  # the open store goes on
    store.close()
    with pytest.raises(EncryptionKeyError, match="wrong key"):
        SqliteStore(path, key=KEY).schema_version()
    store = SqliteStore(path, key="new passphrase")
    assert [m.id for m in Session(store).get_history()] == ["a", "b"]
    store.rekey(RAW_KEY)
    store.close()
    with Session(path, key=RAW_KEY) as session:
        assert [m.id for m in session.get_history()] == ["a", "b"]
        assert [r.id for r in session.search("rekey")] == ["b"]


@pytest.mark.parametrize("key", [KEY, RAW_KEY], ids=["passphrase", "raw"])
def test_rekey_encrypts_a_plain_file(tmp_path, key):
    path = tmp_path / "plain.db"
    marker = "quokka" + secrets.token_hex(8)
    store = SqliteStore(path)
    _write_everything(store, marker)
    assert not store.encrypted
    store.rekey(key)
    assert store.encrypted
    Session(store).for_session("s").append_message(msg("later", f"more {marker}"))
    before = Session(store).for_session("s").get_history()
    store.close()
    for name, data in _files(path).items():
        assert marker.encode() not in data, name
    assert not path.read_bytes().startswith(SQLITE_HEADER)
    assert sorted(p.name for p in tmp_path.iterdir() if ".encrypting" in p.name) == []
    with Session(path, key=key) as session:
        session.for_session("s")
        assert session.get_history() == before
        assert session.search(marker)
        assert session.store.schema_version() == len(sqlite_module.MIGRATIONS)
    with pytest.raises(EncryptionKeyError, match="encrypted"):
        SqliteStore(path).schema_version()


def _sqlcipher(path: Path, key: str, settings: tuple[str, ...]):
    """A bare SQLCipher connection to ``path`` with ``key`` and ``settings``."""
    from sqlcipher3 import dbapi2

    conn = dbapi2.connect(str(path), isolation_level=None)
    conn.execute(f"PRAGMA key = {key_pragma(key)}")
    for setting in settings:
        conn.execute(f"PRAGMA {setting}")
    return conn


@pytest.mark.parametrize("made_by", ["a new file", "rekey of a plain file"])
def test_a_file_is_encrypted_with_the_store_settings(tmp_path, made_by):
    if made_by == "a new file":
        path = _encrypted_file(tmp_path)
    else:
        path = tmp_path / "plain.db"
        with Session(path) as session:
            session.append_message(msg("a", "hello there"))
        SqliteStore(path).rekey(KEY)
    conn = _sqlcipher(path, KEY, CIPHER_SETTINGS)  # another SQLCipher tool, told the same settings
    assert conn.execute("SELECT id FROM session_messages").fetchall() == [("a",)]
    assert conn.execute("PRAGMA cipher_hmac_algorithm").fetchone()[0] == "HMAC_SHA256"
    conn.close()
    with pytest.raises(Exception, match="not a database"):  # SQLCipher's defaults do not decrypt it
        _sqlcipher(path, KEY, DEFAULT_SETTINGS).execute("SELECT count(*) FROM sqlite_master").fetchone()


def test_a_file_made_with_sqlcipher_defaults_opens_and_keeps_them(tmp_path, capfd):
    made = _encrypted_file(tmp_path)
    legacy = tmp_path / "legacy.db"
    conn = _sqlcipher(made, KEY, CIPHER_SETTINGS)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.execute("ATTACH DATABASE ? AS legacy KEY ?", (str(legacy), KEY))  # SQLCipher's defaults
    conn.execute("SELECT sqlcipher_export('legacy')").fetchone()
    conn.execute(f"PRAGMA legacy.user_version = {version}")
    conn.execute("DETACH DATABASE legacy")
    conn.close()
    capfd.readouterr()
    with Session(legacy, key=KEY) as session:
        session.append_message(msg("b", "written on the defaults"))
        assert "ERROR" not in capfd.readouterr().err  # the expected first failure is not logged
        assert [m.id for m in session.get_history()] == ["a", "b"]
        assert session.store._conn.execute("PRAGMA cipher_hmac_algorithm").fetchone()[0] == "HMAC_SHA512"
    store = SqliteStore(legacy, key=KEY, read_only=True)
    assert [r.id for r in Session(store).search("defaults")] == ["b"]
    store.close()
    conn = _sqlcipher(legacy, KEY, DEFAULT_SETTINGS)
    assert conn.execute("SELECT count(*) FROM session_messages").fetchone()[0] == 2
    conn.close()
    with pytest.raises(EncryptionKeyError, match="wrong key"):
        SqliteStore(legacy, key="not the key").schema_version()


_READER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN")
conn.execute("SELECT count(*) FROM session_messages").fetchone()
print("reading", flush=True)
sys.stdin.readline()
"""


def test_encrypting_refuses_a_file_in_use_and_replaces_it_under_idle_stores(tmp_path):
    path = tmp_path / "plain.db"
    other = SqliteStore(path)
    Session(other).append_message(msg("a", "hello"))
    # Another process in a read transaction (in this one, SQLCipher's and sqlite3's SQLite
    # libraries do not see each other's locks).
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert reader.stdout is not None and reader.stdout.readline().strip() == "reading"
    store = SqliteStore(path, timeout=0.2)
    with pytest.raises(StoreError, match="another connection is using the file"):
        store.rekey(KEY)
    reader.communicate("done\n", timeout=30)
    assert path.read_bytes().startswith(SQLITE_HEADER) and not store.encrypted
    assert [p.name for p in tmp_path.iterdir() if ".encrypting" in p.name] == []
    store.rekey(KEY)  # the idle store left open does not stop it...
    with pytest.raises(StoreUnavailableError, match="replaced"):
        Session(other).append_message(msg("b", "lost?"))  # ...and refuses to write to the old file
    with pytest.raises(EncryptionKeyError, match="encrypted"):
        Session(other).get_history()  # its next call opens the encrypted file, without a key
    assert [m.id for m in Session(store).get_history()] == ["a"]
    store.close()


def test_rekey_refuses_what_it_cannot_do(tmp_path):
    with pytest.raises(InvalidInputError, match="only a database file"):
        SqliteStore(":memory:").rekey(KEY)
    path = _encrypted_file(tmp_path)
    with pytest.raises(StoreError, match="read-only"):
        SqliteStore(path, key=KEY, read_only=True).rekey("other")
    with pytest.raises(InvalidInputError, match="non-empty"):
        SqliteStore(path, key=KEY).rekey("")


def test_session_and_manager_round_trip(tmp_path):
    path = tmp_path / "chat.db"
    with Session(str(path), key=KEY) as session:
        session.for_session("s").append_message(msg("a", "hello encrypted world"))
    with Session(str(path), key=KEY) as session:
        session.for_session("s")
        assert [m.text for m in session.get_history()] == ["hello encrypted world"]
    with SessionManager(path, key=KEY) as manager:
        info = manager.create("Trip")
        manager.append(info.id, msg("m1", "Lisbon in May"))
    with SessionManager(path, key=KEY) as manager:
        assert [m.id for m in manager.get_history(info.id)] == ["m1"]
        assert [hit.id for hit in manager.search("Lisbon")] == ["m1"]


def test_async_twins_on_an_encrypted_store(tmp_path):
    async def main() -> list[str]:
        async with Session(tmp_path / "chat.db", key=KEY) as session:
            await session.aappend_message(msg("a", "hello"))
            return [m.id for m in await session.aget_history()]

    assert asyncio.run(main()) == ["a"]


def test_read_only_and_memory_with_a_key(tmp_path):
    path = _encrypted_file(tmp_path)
    with Session(SqliteStore(path, key=KEY, read_only=True)) as session:
        assert [m.id for m in session.get_history()] == ["a"]
        with pytest.raises(StoreError, match="read-only"):
            session.append_message(msg("b", "no"))
    with Session(":memory:", key=KEY) as session:
        session.append_message(msg("a", "in memory"))
        assert [m.id for m in session.search("memory")] == ["a"]


def test_a_large_message_round_trips_without_blob_io(tmp_path):
    store = SqliteStore(tmp_path / "large.db", key=KEY)
    assert not store._in_place  # SQLCipher's driver has no blobopen: the rows are bound
    text = "word " * 300_000
    session = Session(store)
    session.append_message(msg("big", text))
    session.update_message(msg("big", text + "more"))
    store.close()
    with Session(tmp_path / "large.db", key=KEY) as session:
        assert session.get_message("big").text == text + "more"


def test_key_goes_with_a_path_only():
    with pytest.raises(InvalidInputError, match="SQLite files only"):
        Session("postgresql://user@localhost/db", key=KEY)
    with pytest.raises(InvalidInputError, match="goes with a SQLite path"):
        Session(SqliteStore(":memory:"), key=KEY)
    with pytest.raises(InvalidInputError, match="goes with a SQLite path"):
        SessionManager(SqliteStore(":memory:"), key=KEY)


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [("", InvalidInputError, "non-empty"), (b"short", InvalidInputError, "32 bytes"), (42, TypeError, "str")],
)
def test_bad_keys(key, error, message):
    with pytest.raises(error, match=message):
        SqliteStore(":memory:", key=key)


def test_a_passphrase_with_quotes_is_quoted(tmp_path):
    key = 'it\'s "quoted"; DROP TABLE x; --'
    path = _encrypted_file(tmp_path, key)
    with Session(path, key=key) as session:
        assert [m.id for m in session.get_history()] == ["a"]
    with pytest.raises(EncryptionKeyError):
        SqliteStore(path, key="it's").schema_version()


def test_the_driver_errors_are_caught_on_an_encrypted_store(tmp_path):
    """SQLCipher's exceptions are no ``sqlite3.Error``: the store still turns them into its own."""
    store = SqliteStore(tmp_path / "chat.db", key=KEY)
    Session(store).append_message(msg("a", "hello"))
    with pytest.raises(StoreError) as raised:
        store._read(lambda conn: conn.execute("SELECT nope FROM nowhere").fetchall())
    assert not isinstance(raised.value.__cause__, sqlite3.Error)
    store.close()


def test_without_sqlcipher_a_key_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlcipher3", None)
    monkeypatch.setitem(sys.modules, "sqlcipher3.dbapi2", None)
    sqlite_module._cipher.cache_clear()
    try:
        with pytest.raises(StoreError, match=r'pip install "session-memory\[encryption\]"'):
            SqliteStore("chat.db", key=KEY)
        SqliteStore(":memory:").close()  # without a key nothing changes
    finally:
        sqlite_module._cipher.cache_clear()


# -- the command line ----------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str | None] | None = None, input: str | None = None):
    pytest.importorskip("click", reason="the cli extra is not installed")
    pytest.importorskip("rich", reason="the cli extra is not installed")
    from click.testing import CliRunner

    from sessions_core.cli import build_cli

    base: dict[str, str | None] = {"SESSIONS_STORE": None, "SESSIONS_KEY": None, "SESSIONS_NEW_KEY": None}
    runner = CliRunner(env={**base, **(env or {})})
    return runner.invoke(build_cli(), list(args), input=input, catch_exceptions=False)


def _plain_file(tmp_path: Path) -> Path:
    path = tmp_path / "chat.db"
    with Session(path) as session:
        session.for_session("chat").append_message(msg("u1", "Plan a trip to Lisbon"))
    return path


def test_cli_reads_the_key_from_the_environment(tmp_path):
    path = _encrypted_file(tmp_path)
    listed = _cli("--store", str(path), "list", "--json", env={"SESSIONS_KEY": KEY})
    assert listed.exit_code == 0, listed.stderr
    assert '"messages": 1' in listed.stdout
    found = _cli("--store", str(path), "search", "hello", env={"SESSIONS_KEY": KEY})
    assert found.exit_code == 0 and "hello there" in found.stdout
    missing = _cli("--store", str(path), "list")
    assert missing.exit_code == 1
    assert "this database is encrypted" in missing.stderr and "SESSIONS_KEY" in missing.stderr
    wrong = _cli("--store", str(path), "stats", env={"SESSIONS_KEY": "nope"})
    assert wrong.exit_code == 1 and "wrong key" in wrong.stderr
    assert "ERROR CORE" not in wrong.stderr  # SQLCipher's own log lines are silenced
    postgres = _cli("--store", "postgresql://u@localhost/db", "list", env={"SESSIONS_KEY": KEY})
    assert postgres.exit_code == 2 and "SQLite files only" in postgres.stderr


def test_cli_export_and_import_into_a_new_encrypted_file(tmp_path):
    source = _encrypted_file(tmp_path)
    exported = _cli("--store", str(source), "export", "", env={"SESSIONS_KEY": KEY})
    assert exported.exit_code == 0, exported.stderr
    dump = tmp_path / "dump.jsonl"
    dump.write_text(exported.stdout)
    target = tmp_path / "copy.db"
    imported = _cli("--store", str(target), "import", str(dump), env={"SESSIONS_KEY": "copy key"})
    assert imported.exit_code == 0, imported.stderr
    assert not target.read_bytes().startswith(SQLITE_HEADER)
    with Session(target, key="copy key") as session:
        assert [m.text for m in session.get_history()] == ["hello there"]


def test_cli_rekey_encrypts_then_changes_the_key(tmp_path):
    path = _plain_file(tmp_path)
    encrypted = _cli("rekey", str(path), env={"SESSIONS_NEW_KEY": "first"})
    assert encrypted.exit_code == 0, encrypted.stderr
    assert "Encrypted" in encrypted.stdout
    assert not path.read_bytes().startswith(SQLITE_HEADER)
    changed = _cli("--store", str(path), "rekey", input="second\nsecond\n", env={"SESSIONS_KEY": "first"})
    assert changed.exit_code == 0, changed.stderr
    assert "Changed the key" in changed.stdout and "second" not in changed.stdout  # the prompt is hidden
    assert _cli("--store", str(path), "list", env={"SESSIONS_KEY": "first"}).exit_code == 1
    listed = _cli("--store", str(path), "list", env={"SESSIONS_KEY": "second"})
    assert listed.exit_code == 0 and "chat" in listed.stdout


def test_cli_rekey_refusals(tmp_path):
    path = _plain_file(tmp_path)
    mismatch = _cli("rekey", str(path), input="one\ntwo\n")
    assert mismatch.exit_code != 0  # the confirmation differs: click asks again, then input ends
    assert path.read_bytes().startswith(SQLITE_HEADER)
    same = _cli("rekey", str(path), env={"SESSIONS_KEY": "k", "SESSIONS_NEW_KEY": "k"})
    assert same.exit_code == 2 and "current one" in same.stderr
    memory = _cli("rekey", ":memory:", env={"SESSIONS_NEW_KEY": "k"})
    assert memory.exit_code == 2 and "SQLite database file" in memory.stderr
    missing = _cli("rekey", str(tmp_path / "none.db"), env={"SESSIONS_NEW_KEY": "k"})
    assert missing.exit_code == 1 and "no SQLite database" in missing.stderr


@pytest.mark.parametrize("key", [KEY, RAW_KEY], ids=["passphrase", "raw"])
def test_rekey_none_decrypts_into_a_plain_file(tmp_path, key):
    path = tmp_path / "vault.db"
    marker = "quokka" + secrets.token_hex(8)
    store = SqliteStore(path, key=key)
    _write_everything(store, marker)
    before = Session(store).for_session("s").get_history()
    store.rekey(None)
    assert not store.encrypted
    Session(store).for_session("s").append_message(msg("later", f"after {marker}"))
    store.close()
    assert path.read_bytes().startswith(SQLITE_HEADER)
    assert sorted(p.name for p in tmp_path.iterdir() if ".decrypting" in p.name) == []
    with Session(path) as session:  # the standard library's sqlite3 opens it
        session.for_session("s")
        assert session.get_history()[:-1] == before and session.get_history()[-1].id == "later"
        assert session.search(marker)
        assert session.store.schema_version() == len(sqlite_module.MIGRATIONS)
    with pytest.raises(EncryptionKeyError, match="not encrypted"):
        SqliteStore(path, key=key).schema_version()
    SqliteStore(path).rekey(None)  # a plain file stays as it is
    assert path.read_bytes().startswith(SQLITE_HEADER)


def test_cli_rekey_decrypt(tmp_path):
    path = _encrypted_file(tmp_path)
    refused = _cli("rekey", str(path), "--decrypt")
    assert refused.exit_code == 2 and "SESSIONS_KEY" in refused.stderr
    wrong = _cli("rekey", str(path), "--decrypt", env={"SESSIONS_KEY": "nope"})
    assert wrong.exit_code == 1 and "wrong key" in wrong.stderr
    assert not path.read_bytes().startswith(SQLITE_HEADER)
    decrypted = _cli("rekey", str(path), "--decrypt", env={"SESSIONS_KEY": KEY})
    assert decrypted.exit_code == 0, decrypted.stderr
    assert "Decrypted" in decrypted.stdout and path.read_bytes().startswith(SQLITE_HEADER)
    listed = _cli("--store", str(path), "list")
    assert listed.exit_code == 0, listed.stderr
    with Session(path) as session:
        assert [m.text for m in session.get_history()] == ["hello there"]
