"""SQLite faults: each a ``StoreError`` with the driver's error chained and a message that says
what to do, nothing acknowledged that was not stored, and the store usable again once the
fault is repaired; ``read_only=True`` for read-only files, folders and snapshots (API and CLI).

The tests run as root here, where ``chmod`` stops nothing: a read-only file is made with
``chattr +i`` and a read-only folder with a read-only bind mount (``chmod`` for other users).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sessions_core import Session, SessionsError, SqliteStore, StoreError
from sessions_core.stores.sqlite import MIGRATIONS, _statements

from .helpers import msg

ROOT = os.geteuid() == 0


def _run(*command: str) -> bool:
    return shutil.which(command[0]) is not None and subprocess.run(command, capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """``path`` read-only for this process (root included) in a writable folder."""
    if not ROOT:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    if not _run("chattr", "+i", str(path)):
        pytest.skip("running as root on a file system without chattr +i: no way to make a file read-only for root")
    try:
        yield
    finally:
        _run("chattr", "-i", str(path))


@contextlib.contextmanager
def read_only_folder(folder: Path, where: Path) -> Iterator[Path]:
    """``folder`` seen read-only (a mounted snapshot): as root a read-only bind mount at
    ``where``, else ``folder`` itself with its write permission removed."""
    if not ROOT:
        modes = {p: p.stat().st_mode for p in [folder, *folder.iterdir()]}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield folder
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    where.mkdir()
    if not _run("mount", "--bind", str(folder), str(where)):
        pytest.skip("running as root without the right to mount: no read-only bind mount for the folder")
    try:
        if not _run("mount", "-o", "remount,bind,ro", str(where)):
            pytest.skip("running as root, but a bind mount cannot be made read-only here")
        yield where
    finally:
        if not _run("umount", str(where)):
            _run("umount", "-l", str(where))


def fingerprint(folder: Path) -> dict[str, tuple[str, float]]:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime) for p in folder.iterdir()}


def filled(path: Path, count: int = 3, session_id: str = "s") -> Path:
    with Session(path) as owner:
        session = owner.for_session(session_id)
        for i in range(count):
            session.append_message(msg(f"m{i}", f"lisbon weather note {i}"))
    return path


def history(store: SqliteStore, session_id: str = "s") -> list[str]:
    return [m.id for m in Session(store).for_session(session_id).get_history()]


def assert_store_error(error: pytest.ExceptionInfo, *words: str) -> None:
    assert isinstance(error.value, StoreError)
    assert isinstance(error.value.__cause__, sqlite3.Error), "the driver's error is chained"
    for word in words:
        assert word in str(error.value)


# -- the file: deleted, replaced ---------------------------------------------------------


def test_an_append_to_a_deleted_file_raises_and_acknowledges_nothing(tmp_path):
    path = filled(tmp_path / "a.db")
    store = SqliteStore(path)
    session = Session(store).for_session("s")
    session.append_message(msg("before", "stored"))
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    with pytest.raises(StoreError, match="deleted") as error:
        session.append_message(msg("lost", "would be lost"))
    assert "nothing was written" in str(error.value)
    assert not path.exists()
    # The next call opens what the path names then: a new, empty database; a batch is refused alike.
    assert history(store) == []
    session.append_message(msg("x", "x"))
    os.unlink(path)
    with pytest.raises(StoreError, match="deleted"):
        session.append_messages([msg("y", "y"), msg("z", "z")])
    store.close()


def test_a_write_to_a_replaced_file_raises(tmp_path):
    path = filled(tmp_path / "a.db")
    store = SqliteStore(path)
    session = Session(store).for_session("s")
    session.append_message(msg("before", "stored"))
    other = filled(tmp_path / "other.db", count=1, session_id="t")
    os.replace(other, path)
    with pytest.raises(StoreError, match="replaced by another file"):
        session.append_message(msg("after", "not acknowledged"))
    store.close()


# -- read-only file ----------------------------------------------------------------------


def test_a_read_only_file_reads_refuses_writes_clearly_and_writes_again_once_writable(tmp_path):
    path = filled(tmp_path / "a.db")
    store = SqliteStore(path)
    with read_only_file(path):
        assert history(store) == ["m0", "m1", "m2"]
        with pytest.raises(StoreError) as error:
            Session(store).for_session("s").append_message(msg("m3", "refused"))
        assert_store_error(error, "readonly", "read_only=True")
    Session(store).for_session("s").append_message(msg("m3", "stored now"))
    assert history(store) == ["m0", "m1", "m2", "m3"]
    store.close()


def test_a_migration_of_a_read_only_file_raises_and_changes_nothing(tmp_path):
    path = tmp_path / "old.db"
    _old_schema(path)
    before = path.read_bytes()
    store = SqliteStore(path)
    with read_only_file(path):
        with pytest.raises(StoreError) as error:
            store.setup()
        assert_store_error(error, "readonly", "read_only=True")
    assert path.read_bytes() == before
    store.setup()  # writable again: migrated
    assert store.schema_version() == len(MIGRATIONS)
    store.close()


def _old_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    for statement in _statements(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_read_only_mode_reads_a_read_only_file_and_refuses_every_write_untouched(tmp_path):
    path = filled(tmp_path / "a.db")
    with read_only_file(path):
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        store = SqliteStore(path, read_only=True)
        session = Session(store).for_session("s")
        assert history(store) == ["m0", "m1", "m2"]
        assert [r.id for r in session.search("lisbon")]
        writes = [
            lambda: session.append_message(msg("m3", "no")),
            lambda: session.append_messages([msg("m4", "no")]),
            lambda: session.delete_messages(["m0"]),
            lambda: session.clear_messages(),
            lambda: store.set_block("s", "memory", "no"),
        ]
        for write in writes:
            with pytest.raises(StoreError, match="opened read-only"):
                write()
        store.close()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_read_only_mode_async_twins_raise_the_same_error(tmp_path):
    path = filled(tmp_path / "a.db")
    store = SqliteStore(path, read_only=True)
    session = Session(store).for_session("s")

    async def run() -> None:
        assert [m.id for m in await session.aget_history()] == ["m0", "m1", "m2"]
        with pytest.raises(StoreError, match="opened read-only"):
            await session.aappend_message(msg("m3", "no"))

    asyncio.run(run())
    store.close()


def test_read_only_mode_never_creates_migrates_or_accepts_an_unknown_schema(tmp_path):
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no database file"):
        SqliteStore(missing, read_only=True).setup()
    assert not missing.exists()

    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(StoreError, match="no session-memory tables"):
        SqliteStore(empty, read_only=True).setup()

    old = tmp_path / "old.db"
    _old_schema(old)
    before = old.read_bytes()
    with pytest.raises(StoreError, match="older than this library's.*sessions migrate"):
        SqliteStore(old, read_only=True).setup()
    assert old.read_bytes() == before

    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        SqliteStore(newer, read_only=True).setup()

    with pytest.raises(ValueError):
        SqliteStore(":memory:", read_only=True)


# -- read-only folder (a mounted snapshot) -------------------------------------------------


def test_a_read_only_folder_is_read_with_read_only_mode(tmp_path):
    folder = tmp_path / "backup"
    folder.mkdir()
    filled(folder / "a.db")  # closed cleanly: no -wal, no -shm
    before = fingerprint(folder)
    with read_only_folder(folder, tmp_path / "mnt") as snapshot:
        writable = SqliteStore(snapshot / "a.db")
        with pytest.raises(StoreError) as error:
            history(writable)
        assert_store_error(error, "read_only=True")
        writable.close()
        store = SqliteStore(snapshot / "a.db", read_only=True)
        assert history(store) == ["m0", "m1", "m2"]
        with pytest.raises(StoreError, match="opened read-only"):
            Session(store).for_session("s").append_message(msg("m3", "no"))
        store.close()
    assert fingerprint(folder) == before


def test_a_read_only_snapshot_of_an_open_database_reads_its_write_ahead_log(tmp_path):
    live, folder = tmp_path / "live", tmp_path / "snapshot"
    live.mkdir()
    store = SqliteStore(live / "a.db")
    store.setup()
    store._conn.execute("PRAGMA wal_autocheckpoint = 0")  # keep the messages in the -wal
    for i in range(3):
        Session(store).for_session("s").append_message(msg(f"m{i}", "in the log"))
    shutil.copytree(live, folder)  # the database, its -wal and -shm, as a snapshot takes them
    store.close()
    with read_only_folder(folder, tmp_path / "mnt") as snapshot:
        reader = SqliteStore(snapshot / "a.db", read_only=True)
        assert history(reader) == ["m0", "m1", "m2"]
        reader.close()


def test_a_read_only_folder_with_a_log_but_no_shm_is_refused_clearly(tmp_path):
    live, folder = tmp_path / "live", tmp_path / "snapshot"
    live.mkdir()
    folder.mkdir()
    store = SqliteStore(live / "a.db")
    store.setup()
    store._conn.execute("PRAGMA wal_autocheckpoint = 0")
    Session(store).for_session("s").append_message(msg("m0", "only in the log"))
    for name in ("a.db", "a.db-wal"):
        shutil.copy(live / name, folder / name)
    store.close()
    with read_only_folder(folder, tmp_path / "mnt") as snapshot:
        with pytest.raises(StoreError, match="write-ahead log.*copy the database"):
            SqliteStore(snapshot / "a.db", read_only=True).setup()


# -- damaged files -------------------------------------------------------------------------


def test_a_file_that_is_not_a_database_raises_then_works_once_replaced(tmp_path):
    path = tmp_path / "a.db"
    path.write_text("not a database, only text long enough to fill a header " * 20)
    store = SqliteStore(path)
    with pytest.raises(StoreError) as error:
        history(store)
    assert_store_error(error, "not a database", "check the path")
    path.unlink()
    filled(path)
    assert history(store) == ["m0", "m1", "m2"]
    store.close()


def _corrupt_tables(path: Path) -> None:
    """Overwrite the first bytes of the root page of the messages table and its indexes."""
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    roots = [
        row[0]
        for row in conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE tbl_name = 'session_messages' AND rootpage > 1"
        )
    ]
    conn.close()
    assert roots
    with open(path, "r+b") as file:
        for root in roots:
            file.seek((root - 1) * page_size)
            file.write(b"\xee" * 64)


def test_a_corrupted_page_raises_then_works_once_restored(tmp_path):
    path = filled(tmp_path / "a.db", count=200)
    backup = tmp_path / "backup.db"
    shutil.copyfile(path, backup)
    _corrupt_tables(path)
    store = SqliteStore(path)
    with pytest.raises(StoreError) as error:
        history(store)
    assert_store_error(error, "malformed", "restore it from a backup")
    with pytest.raises(StoreError, match="malformed"):
        Session(store).for_session("s").append_message(msg("new", "refused"))
    with pytest.raises(StoreError, match="malformed"):
        Session(store).for_session("s").search("lisbon")
    shutil.copyfile(backup, path)
    assert len(history(store)) == 200
    Session(store).for_session("s").append_message(msg("new", "stored"))
    store.close()


# -- contention, disk full -------------------------------------------------------------------


def test_a_lock_held_past_the_busy_timeout_raises_then_the_store_writes(tmp_path):
    path = filled(tmp_path / "a.db")
    store = SqliteStore(path, timeout=0.3)
    session = Session(store).for_session("s")
    assert history(store) == ["m0", "m1", "m2"]
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    started = time.monotonic()
    with pytest.raises(StoreError) as error:
        session.append_message(msg("m3", "waits"))
    assert 0.25 <= time.monotonic() - started < 5
    assert_store_error(error, "locked", "timeout=")
    holder.execute("ROLLBACK")
    holder.close()
    assert session.append_message(msg("m3", "stored")).inserted
    assert history(store) == ["m0", "m1", "m2", "m3"]
    store.close()


DISK_FULL = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    from sessions_core import Session, SqliteStore, SessionsError
    path = sys.argv[1]
    store = SqliteStore(path)
    session = Session(store).for_session("s")
    session.append_message({"id": "first", "role": "user", "parts": [{"type": "text", "text": "x"}]})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path + "-wal") + 200_000, hard))
    acknowledged, error = [], None
    for i in range(200):
        message = {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": f"{i} " + "y" * 50_000}]}
        try:
            if session.append_message(message).inserted:
                acknowledged.append(message["id"])
        except SessionsError as failure:
            error = {"type": type(failure).__name__, "text": str(failure), "cause": type(failure.__cause__).__name__,
                     "failed": message["id"]}
            break
        except Exception as failure:
            error = {"type": type(failure).__name__, "text": str(failure), "raw": True}
            break
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    after = session.append_message({"id": "after", "role": "user", "parts": [{"type": "text", "text": "z"}]})
    store.close()
    print(json.dumps({"acknowledged": acknowledged, "error": error, "after": after.inserted}))
    """
)


def test_a_full_disk_raises_and_the_store_writes_again_once_there_is_room(tmp_path):
    path = tmp_path / "a.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", DISK_FULL, str(path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    error = report["error"]
    assert error is not None and not error.get("raw"), report
    assert error["type"] == "StoreError" and error["cause"] in {"OperationalError", "DatabaseError"}, report
    assert "full" in error["text"] and "retry" in error["text"], report
    assert report["after"] is True
    stored = history(SqliteStore(path))
    assert stored == ["first", *report["acknowledged"], "after"]
    assert error["failed"] not in stored


# -- the sessions CLI reads a read-only snapshot -------------------------------------------


def test_the_cli_read_commands_read_a_read_only_folder(tmp_path):
    pytest.importorskip("click", reason="the cli extra is not installed (pip install 'session-memory[cli]')")
    from click.testing import CliRunner

    from sessions_core.cli import build_cli

    folder = tmp_path / "backup"
    folder.mkdir()
    filled(folder / "a.db")
    block_store = SqliteStore(folder / "a.db")
    block_store.set_block("s", "memory", "likes Lisbon")
    block_store.close()
    before = fingerprint(folder)
    runner = CliRunner()
    with read_only_folder(folder, tmp_path / "mnt") as snapshot:
        store = str(snapshot / "a.db")
        commands = [
            ["list"],
            ["list", "--json"],
            ["show", "s"],
            ["search", "lisbon"],
            ["export", "s"],
            ["blocks", "s"],
            ["stats"],
        ]
        for command in commands:
            result = runner.invoke(build_cli(), ["--store", store, *command])
            assert result.exit_code == 0, (command, result.output)
        source = tmp_path / "in.jsonl"
        assert runner.invoke(build_cli(), ["--store", store, "export", "s", "-o", str(source)]).exit_code == 0
        assert [json.loads(line).get("id") for line in source.read_text().splitlines()].count("m2") == 1
        refused = runner.invoke(build_cli(), ["--store", store, "import", str(source), "--into", "copy"])
        assert refused.exit_code == 1 and "Error" in refused.output and "Traceback" not in refused.output
    assert fingerprint(folder) == before


def test_the_cli_read_commands_do_not_migrate_an_old_schema(tmp_path):
    pytest.importorskip("click", reason="the cli extra is not installed (pip install 'session-memory[cli]')")
    from click.testing import CliRunner

    from sessions_core.cli import build_cli

    path = tmp_path / "old.db"
    _old_schema(path)
    before = path.read_bytes()
    result = CliRunner().invoke(build_cli(), ["--store", str(path), "list"])
    assert result.exit_code == 1 and "sessions migrate" in result.output
    assert path.read_bytes() == before


def test_every_store_call_turns_a_driver_failure_into_a_store_error(tmp_path):
    """Every statement refused by SQLite (an authorizer that denies all): each call of the store's
    interface raises ``StoreError`` with the driver's error chained, then works once allowed."""
    from sessions_core.stores.base import LATEST, CompactionRow, MessageRecord, SessionChanges, SessionRow

    store = SqliteStore(tmp_path / "a.db")
    session = Session(store).for_session("s")
    session.append_message(msg("m0", "lisbon"))
    seq = store.message_rows("s")[0][0]

    def record(name: str) -> MessageRecord:
        return MessageRecord(name, "user", f'{{"id":"{name}","role":"user","parts":[]}}', name, 1, 1_000)

    row = SessionRow("", "n", "n", "n", None, None, None, 0, 0, 0.0, None, 1, 1)
    compaction = CompactionRow("c", "summary", "m0", "m0", 1)
    calls = {
        "insert_message": lambda: store.insert_message("s", record("m1"), LATEST),
        "insert_messages": lambda: store.insert_messages("s", [record("m2")], LATEST),
        "update_message": lambda: store.update_message("s", record("m0")),
        "delete_messages": lambda: store.delete_messages("s", ["m0"]),
        "clear_session": lambda: store.clear_session("s"),
        "get_message": lambda: store.get_message("s", "m0"),
        "latest_leaf": lambda: store.latest_leaf("s"),
        "children": lambda: store.children("s", "m0"),
        "path": lambda: store.path("s", "m0"),
        "path_ids": lambda: store.path_ids("s", "m0"),
        "path_tail": lambda: store.path_tail("s", "m0", 1_000, 1),
        "path_totals": lambda: store.path_totals("s", "m0"),
        "fetch_contents": lambda: store.fetch_contents([seq]),
        "get_blobs": lambda: store.get_blobs(["d"]),
        "add_compaction": lambda: store.add_compaction("s", compaction),
        "get_compactions": lambda: store.get_compactions("s"),
        "get_block": lambda: store.get_block("s", "memory"),
        "set_block": lambda: store.set_block("s", "memory", "x"),
        "get_cached_prompt": lambda: store.get_cached_prompt("s"),
        "set_cached_prompt": lambda: store.set_cached_prompt("s", "x"),
        "set_search_entry": lambda: store.set_search_entry("s", "notes", "k", "lisbon"),
        "count_search_entries": lambda: store.count_search_entries("s", "notes"),
        "search_entries": lambda: store.search_entries("s", "notes", "lisbon", 5),
        "register_session": lambda: store.register_session(row),
        "get_session_row": lambda: store.get_session_row("", "n"),
        "list_session_rows": lambda: store.list_session_rows(""),
        "update_session_row": lambda: store.update_session_row("", "n", SessionChanges(name="m")),
        "delete_session": lambda: store.delete_session("", "n"),
        "fork_session": lambda: store.fork_session("s", "m0", row),
        "search_sessions": lambda: store.search_sessions("", "lisbon", 5),
        "search_messages": lambda: store.search_messages(["s"], "lisbon", 5),
        "session_summaries": lambda: store.session_summaries(),
        "message_rows": lambda: store.message_rows("s"),
        "message_tree": lambda: store.message_tree("s"),
        "list_blocks": lambda: store.list_blocks("s"),
        "search_entry_counts": lambda: store.search_entry_counts("s"),
        "search_entry_rows": lambda: store.search_entry_rows("s"),
        "stored_message_ids": lambda: store.stored_message_ids("s", ["m0"]),
        "import_block": lambda: store.import_block("s", "memory", "x", 1),
        "import_compaction": lambda: store.import_compaction("s", compaction),
        "schema_version": lambda: store.schema_version(),
        "stats": lambda: store.stats(),
        "setup": lambda: store.setup(),
        "session.search": lambda: session.search("lisbon"),
        "session.append_message": lambda: session.append_message(msg("m3", "x")),
    }
    store._conn.set_authorizer(lambda *args: sqlite3.SQLITE_DENY)
    for name, call in calls.items():
        with pytest.raises(StoreError) as error:
            call()
        assert isinstance(error.value.__cause__, sqlite3.Error), name
    store._conn.set_authorizer(None)
    assert [m.id for m in session.get_history()] == ["m0"]
    store.close()


def test_every_sqlite_fault_is_a_sessions_error():
    assert issubclass(StoreError, SessionsError)


# -- read-only mode as another user: a WAL file of mode 444 in a folder it cannot write -----------


def _as_other_user(call: Callable[[], str]) -> str:
    """``call()`` in a forked child running as ``nobody`` when this process is root (the same
    interpreter: nobody may not be able to run this Python), else in this process; its result,
    or ``"raised <type>: <message>"``."""
    if not ROOT:
        try:
            return call()
        except Exception as error:
            return f"raised {type(error).__name__}: {error}"
    import pwd

    nobody = pwd.getpwnam("nobody")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            out = call()
        except BaseException as error:
            out = f"raised {type(error).__name__}: {error}"
        os.write(write, out.encode("utf-8", "replace"))
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


@pytest.fixture
def foreign_wal_folder():
    """A folder holding a WAL database of mode 444, both owned by this process and not
    writable by ``nobody`` (as root), or made read-only (otherwise); under the system's temporary
    folder, which ``nobody`` can reach (pytest's ``tmp_path`` is private to its user)."""
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="sessions-ro-"))
    top.chmod(0o755)
    folder = top / "theirs"
    folder.mkdir()
    path = filled(folder / "a.db")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert sorted(p.name for p in folder.iterdir()) == ["a.db"]
    path.chmod(0o444)
    folder.chmod(0o755 if ROOT else 0o555)
    try:
        yield path
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
        shutil.rmtree(top)


def test_read_only_mode_reads_a_wal_file_in_a_folder_it_cannot_write_creating_nothing(foreign_wal_folder):
    """Issue 36: SQLite says ``SQLITE_READONLY`` (not ``SQLITE_CANTOPEN``) there; the store
    falls back to ``immutable=1`` and neither it nor ``sessions show`` makes a file."""
    path = foreign_wal_folder
    before = fingerprint(path.parent)

    def read() -> str:
        store = SqliteStore(path, read_only=True)
        try:
            found = history(store)
            hits = [r.id for r in Session(store).for_session("s").search("lisbon")]
        finally:
            store.close()
        return f"{','.join(found)}|{len(hits)}"

    assert _as_other_user(read) == "m0,m1,m2|3"
    assert fingerprint(path.parent) == before  # no -wal, no -shm, nothing changed

    def show() -> str:
        from click.testing import CliRunner

        from sessions_core.cli import build_cli

        result = CliRunner(env={"SESSIONS_STORE": None}).invoke(build_cli(), ["--store", str(path), "show", "s"])
        return f"{result.exit_code}|{result.output}"

    shown = _as_other_user(show)
    assert shown.startswith("0|"), shown
    assert "lisbon weather note 2" in shown
    assert fingerprint(path.parent) == before


def test_read_only_mode_refuses_a_wal_with_changes_it_could_not_read_there(foreign_wal_folder):
    path = foreign_wal_folder
    folder = path.parent
    folder.chmod(0o755)
    path.chmod(0o644)
    writer = sqlite3.connect(path)  # a writer keeps its -wal (and -shm) while it has the file open
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("CREATE TABLE extra (x)")
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > 0
    shm = Path(f"{path}-shm")
    saved = shm.read_bytes()
    shm.unlink()  # as after a crash: the -wal alone
    try:
        path.chmod(0o444)
        folder.chmod(0o755 if ROOT else 0o555)
        result = _as_other_user(lambda: ",".join(history(SqliteStore(path, read_only=True))))
        assert result.startswith("raised StoreError"), result
        assert "write-ahead log" in result and "copy the database" in result
        assert not shm.exists()
    finally:
        folder.chmod(0o755)
        shm.write_bytes(saved)
        writer.close()
