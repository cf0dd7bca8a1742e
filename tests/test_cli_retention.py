"""``sessions prune`` and ``sessions erase``: what goes is listed and counted, what stays is untouched."""

from __future__ import annotations

import json
import sys
import types
import uuid
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("click", reason="the cli extra is not installed (pip install 'session-memory[cli]')")

from sessions_core import Session, SessionManager, SqliteStore

from .helpers import msg
from .postgres import postgres_url, require_postgres, temporary_schema
from .test_cli import assert_error, populate, run, snapshot

LONG_AGO = datetime(2003, 4, 5, tzinfo=timezone.utc)
MARKER = "zqerasedmarkerxq"


def _old(store, storage_id: str, text: str = "from long ago") -> None:
    Session(store).for_session(storage_id).import_message(msg("m1", text), parent_id=None, created_at=LONG_AGO)


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, dict]:
    """The CLI suite's store, plus two sessions last active in 2003: one in the default
    namespace, one in ``team``."""
    path = tmp_path / "sessions.db"
    store = SqliteStore(path)
    facts = populate(store)
    _old(store, "old-chat", f"a secret {MARKER}")
    SessionManager(store, namespace="team").get_session("old").import_message(
        msg("m1", "old team talk"), parent_id=None, created_at=LONG_AGO
    )
    store.close()
    return str(path), facts


def _sessions(path: str) -> list[str]:
    return [row["session_id"] for row in json.loads(run("--store", path, "list", "--json").stdout)]


def test_a_dry_run_lists_and_counts_what_would_go_and_removes_nothing(db):
    path, _facts = db
    before = _sessions(path)
    result = run("--store", path, "prune", "--older-than", "90d", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "Would prune 2 sessions last active before" in result.stdout
    assert "old-chat" in result.stdout and "team:old" in result.stdout
    assert "messages" in result.stdout
    assert _sessions(path) == before
    data = json.loads(run("--store", path, "prune", "--older-than", "90d", "--dry-run", "--json").stdout)
    assert data["dry_run"] and [s["session"] for s in data["sessions"]] == ["old-chat", "team:old"]
    assert data["counts"]["messages"] == 2 and data["counts"]["registry"] == 0


def test_prune_removes_the_old_sessions_of_every_namespace_and_keeps_the_rest(db):
    path, facts = db
    with closing(SqliteStore(path)) as store:
        kept = {s: snapshot(store, s) for s in ("chat", facts["manager_session"], "blocks-only")}
    result = run("--store", path, "prune", "--older-than", "12w", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [s["session"] for s in data["sessions"]] == ["old-chat", "team:old"] and not data["dry_run"]
    assert data["counts"]["messages"] == 2
    remaining = _sessions(path)
    assert "old-chat" not in remaining and "team:old" not in remaining
    with closing(SqliteStore(path)) as store:
        assert {s: snapshot(store, s) for s in kept} == kept
    again = run("--store", path, "prune", "--older-than", "90d")
    assert again.exit_code == 0 and "Pruned 0 sessions" in again.stdout


def test_prune_within_one_namespace(db):
    path, _facts = db
    result = run("--store", path, "prune", "--older-than", "30d", "--namespace", "team")
    assert result.exit_code == 0, result.stderr
    assert "Pruned 1 session of namespace 'team'" in result.stdout and "team:old" in result.stdout
    assert "REMOVED" in result.stdout
    remaining = _sessions(path)
    assert "team:old" not in remaining and "old-chat" in remaining


@pytest.mark.parametrize("age", ["90", "soon", "-3d", "d", ""])
def test_a_bad_age_exits_2(db, age):
    path, _facts = db
    assert_error(run("--store", path, "prune", "--older-than", age), 2, "--older-than")


def test_erase_a_session_counts_what_goes_and_leaves_none_of_its_text_in_the_files(db):
    path, _facts = db
    result = run("--store", path, "erase", "old-chat", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["sessions"] == ["old-chat"] and data["counts"]["messages"] == 1 and not data["vacuumed"]
    assert "old-chat" not in _sessions(path)
    files = [Path(path), Path(path + "-wal")]
    assert all(MARKER.encode() not in f.read_bytes() for f in files if f.exists())
    table = run("--store", path, "erase", "chat", "--vacuum")
    assert table.exit_code == 0, table.stderr
    assert "Erased 1 session and vacuumed the store." in table.stdout
    assert "block versions" in table.stdout and "search entries" in table.stdout


def test_erase_a_namespace(db):
    path, facts = db
    result = run("--store", path, "erase", "--namespace", "team")
    assert result.exit_code == 0, result.stderr
    assert "Erased 2 sessions of namespace 'team'." in result.stdout
    remaining = _sessions(path)
    assert facts["manager_session"] not in remaining and "team:old" not in remaining and "chat" in remaining


def test_erase_refuses_what_it_cannot_name(db):
    path, _facts = db
    assert_error(run("--store", path, "erase", "nobody"), 1, "unknown session 'nobody'")
    assert_error(run("--store", path, "erase"), 2, "SESSION or --namespace")
    assert_error(run("--store", path, "erase", "chat", "--namespace", "team"), 2, "SESSION or --namespace")


def test_erase_one_message_of_a_session(tmp_path):
    path = str(tmp_path / "chat.db")
    with closing(SqliteStore(path)) as store:
        session = Session(store).for_session("chat")
        session.append_message(msg("m1", "hello"))
        session.append_message(msg("m2", f"my password is {MARKER}"))
        session.append_message(msg("m3", "thanks", role="assistant"))
    result = run("--store", path, "erase", "chat", "--message", "m2", "--message", "m9", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["sessions"] == ["chat"] and data["messages"] == ["m2"] and data["counts"]["messages"] == 1
    assert all(MARKER.encode() not in f.read_bytes() for f in (Path(path), Path(path + "-wal")) if f.exists())
    with closing(SqliteStore(path)) as store:
        session = Session(store).for_session("chat")
        assert session.get_message("m1") is not None and session.get_message("m2") is None
    table = run("--store", path, "erase", "chat", "--message", "m3")
    assert table.exit_code == 0, table.stderr
    assert "Erased 1 message of session 'chat'." in table.stdout and "REMOVED" in table.stdout
    assert_error(run("--store", path, "erase", "chat", "--message", "m3"), 1, "holds none of the messages 'm3'")
    assert_error(run("--store", path, "erase", "--namespace", "team", "--message", "m1"), 2, "--message and --block")


def test_erase_one_block_of_a_session(tmp_path):
    path = str(tmp_path / "chat.db")
    with closing(SqliteStore(path)) as store:
        session = Session(store).for_session("chat").with_context("memory").with_context("kept")
        session.replace_context_block("memory", f"the code is {MARKER}")
        session.replace_context_block("memory", "the code changed")
        session.replace_context_block("kept", "stays")
    result = run("--store", path, "erase", "chat", "--block", "memory", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["block"] == "memory" and data["key"] is None and data["counts"]["block_versions"] == 2
    assert all(MARKER.encode() not in f.read_bytes() for f in (Path(path), Path(path + "-wal")) if f.exists())
    with closing(SqliteStore(path)) as store:
        assert Session(store).for_session("chat").with_context("kept").get_context_block("kept").content == "stays"
    table = run("--store", path, "erase", "chat", "--block", "kept")
    assert table.exit_code == 0, table.stderr
    assert "Erased block 'kept' of session 'chat' with all its versions." in table.stdout
    assert_error(run("--store", path, "erase", "chat", "--block", "kept"), 1, "session 'chat' holds no block 'kept'")
    assert_error(
        run("--store", path, "erase", "chat", "--block", "notes", "--key", "k"),
        1,
        "session 'chat' holds no entry 'k' of block 'notes' (see `sessions blocks`)",
    )
    assert_error(run("--store", path, "erase", "chat", "--key", "k"), 2, "--key goes with --block LABEL")
    assert_error(
        run("--store", path, "erase", "chat", "--block", "a", "--message", "m"), 2, "give --message ID or --block"
    )


def test_erase_with_an_index_deletes_the_vectors_now(tmp_path, monkeypatch):
    pytest.importorskip("langchain_core")
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_sessions import SynonymEmbeddings, VectorStoreRecall

    vectors = InMemoryVectorStore(SynonymEmbeddings())
    module = types.ModuleType("sessions_erase_cli_index")
    module.index = lambda: VectorStoreRecall(vectors)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    path = str(tmp_path / "recall.db")
    for session_id, text in (("trip", "We agreed on the automobile lease"), ("trip2", "The vehicle was returned")):
        with Session(path).for_session(session_id) as session:
            session.with_semantic_recall(VectorStoreRecall(vectors), background=False)
            session.append_message(msg("m", text))
            session.drain_recall()
    assert len(vectors.store) == 2
    queued = run("--store", path, "erase", "trip", "--json")
    assert json.loads(queued.stdout)["vectors_pending"] == 1  # without --index: through the outbox
    assert len(vectors.store) == 2
    result = run("--store", path, "erase", "trip2", "--index", "sessions_erase_cli_index:index")
    assert result.exit_code == 0, result.stderr
    assert len(vectors.store) == 1 and "left for" not in result.stdout
    backlog = json.loads(run("--store", path, "recall", "backlog", "--json").stdout)
    assert backlog["vectors"] == 1 and backlog["pending"] == 1  # only the first erase's queued delete
    run("--store", path, "recall", "send", "--index", "sessions_erase_cli_index:index")
    assert len(vectors.store) == 0


def test_prune_and_erase_on_postgres(tmp_path):
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        with closing(PostgresStore(postgres_url(), schema=schema)) as store:
            populate(store)
            _old(store, "old-chat")
            _old(store, f"gone-{uuid.uuid4().hex[:6]}")
        base = ("--store", postgres_url(), "--schema", schema)
        pruned = json.loads(run(*base, "prune", "--older-than", "90d", "--json").stdout)
        assert len(pruned["sessions"]) == 2 and pruned["counts"]["messages"] == 2
        result = run(*base, "erase", "chat", "--vacuum", "--json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["vacuumed"]
        assert "chat" not in _sessions_of(base)


def _sessions_of(base: tuple[str, ...]) -> list[str]:
    return [row["session_id"] for row in json.loads(run(*base, "list", "--json").stdout)]
