"""The search migration: a database made by the previous schema is re-indexed by the library, in
resumable batches, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import sqlite3

import pytest

from sessions_core import PostgresStore, Session, SqliteStore
from sessions_core.stores import postgres as postgres_module
from sessions_core.stores.sqlite import MIGRATIONS, _statements

from .postgres import postgres_url, require_postgres, temporary_schema

TEXTS = {
    "zh": "我们周五部署新版本到生产环境",
    "ja": "東京でラーメンを食べました",
    "ko": "금요일에 새 버전을 배포합니다",
    "code": "call getUserById in user_service.py",
    "en": "the deployment failed",
}
ENTRIES = {"tokyo": "東京の天気は晴れです", "deploy": "Run deploy_service.sh on Fridays"}
SQLITE_PREVIOUS = 5
POSTGRES_PREVIOUS = 2
OLD_MESSAGE = (
    "INSERT INTO {p}session_messages (session_id, id, parent_id, role, created_at, tokens, bytes, depth,"
    " path_tokens, path_bytes, text_content, content) VALUES ({v})"
)
OLD_ENTRY = "INSERT INTO {p}search_entries (session_id, label, key, created_at, updated_at, content) VALUES ({v})"


def _old_rows(count: int = 1) -> list[tuple]:
    rows, parent = [], None
    for n in range(count):
        for key, text in TEXTS.items():
            message_id = f"{key}{n}" if count > 1 else key
            content = json.dumps({"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]})
            depth = len(rows) + 1
            rows.append(("", message_id, parent, "user", depth, 1, 10, depth, depth, depth * 10, text, content))
            parent = message_id
    return rows


def _assert_found(session: Session) -> None:
    assert [h.id for h in session.search("部署")] == ["zh"]
    assert [h.id for h in session.search("ラーメン")] == ["ja"]
    assert [h.id for h in session.search("배포")] == ["ko"]
    assert [h.id for h in session.search("UserById")] == ["code"]
    assert [h.id for h in session.search("deploy")] == ["en"]
    assert session.store.search_entries("", "kb", "天気", 10) == [("tokyo", ENTRIES["tokyo"])]
    assert session.store.search_entries("", "kb", "deploy_service", 10) == [("deploy", ENTRIES["deploy"])]


# -- SQLite -------------------------------------------------------------------------------------


def _previous_sqlite(path, rows) -> None:
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:SQLITE_PREVIOUS]:
        for statement in _statements(migration):
            conn.execute(statement)
    conn.executemany(OLD_MESSAGE.format(p="", v=", ".join("?" * 12)), rows)
    conn.executemany(
        OLD_ENTRY.format(p="", v="?, ?, ?, ?, ?, ?"), [("", "kb", k, 1, 1, text) for k, text in ENTRIES.items()]
    )
    conn.execute(f"PRAGMA user_version = {SQLITE_PREVIOUS}")
    conn.commit()
    conn.close()


def test_a_previous_sqlite_database_is_reindexed(tmp_path):
    path = tmp_path / "old.db"
    _previous_sqlite(path, _old_rows())
    calls = []
    store = SqliteStore(path)
    store.setup(progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, len(TEXTS) + len(ENTRIES)) and calls[-1] == (len(TEXTS) + len(ENTRIES),) * 2
    with Session(store) as session:
        _assert_found(session)
        assert [m.text for m in session.get_history()] == list(TEXTS.values())
    assert sqlite3.connect(path).execute("SELECT count(*) FROM search_backfill").fetchone()[0] == 0
    store.close()


def test_an_interrupted_sqlite_backfill_resumes_where_it_stopped(tmp_path):
    path = tmp_path / "old.db"
    _previous_sqlite(path, _old_rows(40))
    store = SqliteStore(path)
    store.backfill_batch = 30

    def interrupt(done, total):
        if done >= 60:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.setup(progress=interrupt)
    store.close()
    assert sqlite3.connect(path).execute(
        "SELECT next_seq FROM search_backfill WHERE source = 'session_messages'"
    ).fetchone() == (61,)
    calls = []
    reopened = SqliteStore(path)
    reopened.setup(progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 200 - 60)  # the entries came first, and are done
    hits = Session(reopened).search("部署", limit=100)
    assert sorted(h.id for h in hits) == sorted(f"zh{n}" for n in range(40))
    reopened.close()


def test_a_new_sqlite_database_has_nothing_to_backfill(tmp_path):
    store = SqliteStore(tmp_path / "new.db")
    calls = []
    store.setup(progress=lambda done, total: calls.append((done, total)))
    assert calls == []
    store.close()


# -- PostgreSQL ---------------------------------------------------------------------------------


def test_a_previous_postgres_schema_is_reindexed():
    require_postgres()
    import psycopg

    with temporary_schema() as schema:
        prefix = f'"{schema}".'
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            for script in postgres_module._qualified(list(postgres_module.MIGRATIONS[:POSTGRES_PREVIOUS]), schema):
                conn.execute(script)
            with conn.cursor() as cursor:
                cursor.executemany(OLD_MESSAGE.format(p=prefix, v=", ".join(["%s"] * 12)), _old_rows())
                cursor.executemany(
                    OLD_ENTRY.format(p=prefix, v=", ".join(["%s"] * 6)),
                    [("", "kb", k, 1, 1, text) for k, text in ENTRIES.items()],
                )
        calls = []
        store = PostgresStore(postgres_url(), schema=schema)
        try:
            store.setup(progress=lambda done, total: calls.append((done, total)))
            assert calls[-1] == (len(TEXTS) + len(ENTRIES),) * 2
            assert store.schema_version() == len(postgres_module.MIGRATIONS)
            with Session(store) as session:
                _assert_found(session)
        finally:
            store.close()


# -- the CLI ------------------------------------------------------------------------------------


def test_sessions_migrate_reindexes_and_reports(tmp_path):
    pytest.importorskip("click")
    pytest.importorskip("rich")
    from click.testing import CliRunner

    from sessions_core.cli import build_cli

    path = tmp_path / "old.db"
    _previous_sqlite(path, _old_rows())
    runner = CliRunner(env={"SESSIONS_STORE": None})
    result = runner.invoke(build_cli(), ["--store", str(path), "migrate"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"{path}: schema version {len(MIGRATIONS)}; 7 rows re-indexed for search"
    again = runner.invoke(build_cli(), ["--store", str(path), "migrate"], catch_exceptions=False)
    assert again.stdout.strip() == f"{path}: schema version {len(MIGRATIONS)}"
    found = runner.invoke(build_cli(), ["--store", str(path), "search", "ラーメン"], catch_exceptions=False)
    assert "東京でラーメンを食べました" in found.stdout
