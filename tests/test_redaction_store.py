"""Redaction at write: what a redacted session stores, indexes and queues for vectors holds no
masked value (SQLite on file and PostgreSQL), and a failing redactor stores nothing."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from sessions_core import (
    CompactResult,
    PIIRedactor,
    RedactionError,
    Session,
    SessionManager,
    StoreSearchContext,
)
from sessions_core.transfer import import_records

from .postgres import postgres_url, require_postgres, temporary_schema


class RecordingIndex:
    """A vector index that keeps the texts it is sent."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def add(self, ids: list[str], texts: list[str], metadatas: list[dict[str, Any]]) -> None:
        self.texts.update(zip(ids, texts))

    def delete(self, ids: list[str]) -> None:
        for vector_id in ids:
            self.texts.pop(vector_id, None)

    def search(self, query: str, k: int, where: dict[str, Any]) -> list[Any]:
        return []


class Secrets:
    """Values of several kinds around one random token, so that a trace of any of them is found
    as bytes, as an FTS term or in a row."""

    def __init__(self) -> None:
        self.token = "zq" + uuid.uuid4().hex[:12]
        self.email = f"{self.token}@example.com"
        self.api_key = f"sk-proj-{self.token}Ab12Cd34Ef56Gh78"
        self.card = "4111 1111 1111 1111"
        self.sentence = f"mail {self.email}, key {self.api_key}, card {self.card}"

    @property
    def values(self) -> list[str]:
        return [self.token, self.email, self.api_key, self.card, self.card.replace(" ", "")]


def write_everything(session: Session, secrets: Secrets) -> None:
    """Every kind of text a session stores, each carrying the secrets."""
    s = secrets.sentence
    session.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": s}]})
    session.append_message(
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": s},
                {"type": "tool-call", "toolCallId": "c1", "toolName": "send", "input": {"to": secrets.email}},
            ],
        }
    )
    session.append_message(
        {
            "id": "t1",
            "role": "tool",
            "parts": [
                {"type": "tool-result", "toolCallId": "c1", "toolName": "send", "output": {"echo": s}},
                {"type": "file", "mediaType": "text/plain", "data": b"attached", "filename": f"{secrets.email}.txt"},
            ],
        }
    )
    session.append_message({"id": "a2", "role": "assistant", "parts": [{"type": "text", "text": "done"}]})
    session.import_message(
        {"id": "i1", "role": "user", "parts": [{"type": "text", "text": s}]},
        parent_id="a2",
        created_at=datetime(2024, 1, 1, tzinfo=timezone.utc),
    )
    session.update_message({"id": "a2", "role": "assistant", "parts": [{"type": "text", "text": f"done: {s}"}]})
    session.replace_context_block("memory", s)
    session.append_context_block("memory", s)
    session.get_context_block("notes")
    session._blocks.get().set_search_entry("notes", "k1", s)
    session.add_compaction(s, "u1", "a1")
    session.compact(using=lambda messages, context: CompactResult(s, "u1", "t1"))
    session.refresh_system_prompt()
    session.drain_recall()


def redacted_session(store: Any, index: RecordingIndex) -> Session:
    return (
        Session(store)
        .for_session("s1")
        .with_redaction(PIIRedactor())
        .with_context("memory", max_tokens=2000)
        .with_context("notes", provider=StoreSearchContext())
        .with_cached_prompt()
        .with_semantic_recall(index, background=False)
    )


def export_records(secrets: Secrets) -> list[dict[str, Any]]:
    at = "2024-01-01T00:00:00+00:00"
    message = {"id": "x1", "role": "user", "parts": [{"type": "text", "text": secrets.sentence}]}
    return [
        {"kind": "message", "session_id": "imported", "parent_id": None, "created_at": at, "message": message},
        {"kind": "block", "session_id": "imported", "label": "memory", "content": secrets.sentence},
        {"kind": "search_entry", "session_id": "imported", "label": "notes", "key": "k", "content": secrets.sentence},
        {
            "kind": "compaction",
            "session_id": "imported",
            "id": str(uuid.uuid4()),
            "summary": secrets.sentence,
            "from_message_id": "x1",
            "to_message_id": "x1",
            "created_at": at,
        },
    ]


def sqlite_traces(path: Path, secrets: Secrets) -> list[str]:
    """Where any of the secrets shows in the SQLite file: a row of any table, an FTS term, the bytes."""
    found: list[str] = []
    conn = sqlite3.connect(path)
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                text = " ".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in row)
                found += [f"{table}: {value}" for value in secrets.values if value in text]
        for fts in [t for t in tables if t.endswith("_fts")]:
            conn.execute(f"CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, {fts}, row)")
            terms = [term for (term,) in conn.execute("SELECT term FROM temp.vocab")]
            found += [f"{fts} term {term}" for term in terms if secrets.token[:8] in term]
            conn.execute("DROP TABLE temp.vocab")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    for file in path.parent.glob(path.name + "*"):
        data = file.read_bytes()
        found += [f"{file.name} bytes: {value}" for value in secrets.values if value.encode() in data]
    return found


def test_a_redacted_sqlite_store_holds_no_masked_value(tmp_path):
    secrets, index, path = Secrets(), RecordingIndex(), tmp_path / "chat.db"
    session = redacted_session(str(path), index)
    write_everything(session, secrets)
    import_records(session.store, export_records(secrets), redactor=PIIRedactor())
    manager = SessionManager(session.store).with_redaction(PIIRedactor())
    first = manager.create("first").id
    manager.append(first, {"id": "m", "role": "user", "parts": [{"type": "text", "text": "hello"}]})
    manager.compact_and_split(first, secrets.sentence)
    history = session.get_history(raw=True)
    assert history and index.texts
    session.close()
    assert sqlite_traces(path, secrets) == []
    assert not [t for t in index.texts.values() if any(v in t for v in secrets.values)]
    assert "[EMAIL]" in "".join(index.texts.values())


def test_the_trace_finder_finds_what_an_unredacted_store_holds(tmp_path):
    secrets, path = Secrets(), tmp_path / "plain.db"
    session = redacted_session(str(path), RecordingIndex()).with_redaction(None)
    write_everything(session, secrets)
    session.close()
    traces = sqlite_traces(path, secrets)
    assert any(" term " in t for t in traces) and any(" bytes: " in t for t in traces)
    assert any(t.startswith("session_messages: ") for t in traces)


def test_the_stored_message_says_what_was_masked():
    session = Session().with_redaction(PIIRedactor())
    secrets = Secrets()
    result = session.append_message({"id": "u", "role": "user", "parts": [{"type": "text", "text": secrets.sentence}]})
    stored = session.get_message("u")
    assert stored is not None and result.message == stored
    assert stored.metadata["redacted"] == {"api_key": 1, "email": 1, "card": 1}
    assert stored.text == "mail [EMAIL], key [API_KEY], card [CARD]"
    clean = session.append_message({"id": "v", "role": "user", "parts": [{"type": "text", "text": "hello"}]})
    assert "redacted" not in clean.message.metadata
    assert session.search(secrets.token) == []


def test_a_plain_callable_redacts_and_counts_as_custom():
    session = Session().with_redaction(lambda text: text.replace("tea", "[DRINK]"))
    session.append_message({"id": "u", "role": "user", "parts": [{"type": "text", "text": "I like tea"}]})
    stored = session.get_message("u")
    assert stored is not None and stored.text == "I like [DRINK]"
    assert stored.metadata["redacted"] == {"custom": 1}


def failing(text: str) -> str:
    raise ValueError("detector crashed")


def test_a_redactor_that_raises_stores_nothing():
    index = RecordingIndex()
    session = redacted_session(":memory:", index)
    session.append_message({"id": "ok", "role": "user", "parts": [{"type": "text", "text": "kept"}]})
    session.replace_context_block("memory", "before")
    session.drain_recall()
    vectors = dict(index.texts)
    session.with_redaction(failing)
    with pytest.raises(RedactionError, match="detector crashed"):
        session.append_message({"id": "u", "role": "user", "parts": [{"type": "text", "text": "x"}]})
    with pytest.raises(RedactionError):
        session.append_messages([{"id": "v", "role": "user", "parts": [{"type": "text", "text": "y"}]}])
    with pytest.raises(RedactionError):
        session.replace_context_block("memory", "after")
    with pytest.raises(RedactionError):
        session.add_compaction("summary", "ok", "ok")
    with pytest.raises(RedactionError):
        session.update_message({"id": "ok", "role": "user", "parts": [{"type": "text", "text": "changed"}]})
    session.drain_recall()
    assert [m.id for m in session.get_history(raw=True)] == ["ok"]
    assert session.get_message("ok").text == "kept"
    assert session.get_context_block("memory").content == "before"
    assert session.get_compactions() == []
    assert session.recall.backlog().pending == 0
    assert index.texts == vectors


def test_a_redactor_must_be_callable():
    with pytest.raises(TypeError, match="redactor"):
        Session().with_redaction("mask")
    with pytest.raises(TypeError, match="redactor"):
        SessionManager().with_redaction(42)


def test_a_manager_redacts_every_session_it_gives_out():
    manager = SessionManager().with_redaction(PIIRedactor())
    session_id = manager.create("a").id
    manager.append(session_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "call +1 415 555 0100"}]})
    assert manager.get_history(session_id)[0].text == "call [PHONE]"


def postgres_traces(schema: str, secrets: Secrets) -> list[str]:
    import psycopg

    found: list[str] = []
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE'",
            (schema,),
        ).fetchall()
        for (table,) in tables:
            for (text,) in conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t'):
                found += [f"{table}: {value}" for value in secrets.values if value in text]
    return found


def test_a_redacted_postgres_store_holds_no_masked_value():
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    secrets, index = Secrets(), RecordingIndex()
    with temporary_schema() as schema:
        store = PostgresStore(postgres_url(), schema=schema, min_size=1, max_size=2)
        try:
            session = redacted_session(store, index)
            write_everything(session, secrets)
            import_records(store, export_records(secrets), redactor=PIIRedactor())
            assert session.get_history(raw=True)
            assert postgres_traces(schema, secrets) == []
            assert index.texts and not [t for t in index.texts.values() if any(v in t for v in secrets.values)]
        finally:
            store.close()


def test_the_cli_import_can_redact(tmp_path):
    import json

    from click.testing import CliRunner

    from sessions_core.cli import build_cli

    secrets = Secrets()
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(record) + "\n" for record in export_records(secrets)))
    for target, flags in (("new.db", ["--redact"]), ("existing.db", ["--redact"]), ("plain.db", [])):
        path = tmp_path / target
        if target == "existing.db":
            Session(str(path)).close()
        runner = CliRunner(env={"SESSIONS_STORE": None})
        result = runner.invoke(build_cli(), ["--store", str(path), "import", str(dump), *flags], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        with Session(str(path)).for_session("imported") as session:
            text = session.get_history(raw=True)[0].text
        assert (secrets.email not in text) == bool(flags), text
        assert bool(sqlite_traces(path, secrets)) != bool(flags)


def test_the_cli_salts_its_masks_and_finds_an_address_by_them_with_sessions_redact_salt(tmp_path):
    import json

    from click.testing import CliRunner

    from sessions_core.cli import build_cli

    ada, bob = Secrets(), Secrets()
    dump = tmp_path / "dump.jsonl"
    records = [{**record, "session_id": name} for name, secrets in (("ada", ada), ("bob", bob))
               for record in export_records(secrets)[:1]]  # fmt: skip
    records[1]["message"] = {**records[1]["message"], "id": "x2"}
    dump.write_text("".join(json.dumps(record) + "\n" for record in records))
    path = str(tmp_path / "chat.db")

    def cli(*args: str, salt: str | None = "pepper") -> Any:
        runner = CliRunner(env={"SESSIONS_STORE": None, "SESSIONS_REDACT_SALT": salt})
        result = runner.invoke(build_cli(), ["--store", path, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    cli("import", str(dump), "--redact")
    with Session(path).for_session("ada") as session:
        assert session.get_history(raw=True)[0].text.startswith("mail [EMAIL:")  # salted: one mask per address
    assert sqlite_traces(tmp_path / "chat.db", ada) == []
    found = cli("search", ada.email).stdout
    assert "ada" in found and "bob" not in found and "1 match" in found
    assert "No matches." in cli("search", ada.email, salt=None).stdout  # the address itself was never stored


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request):
    if request.param == "sqlite":
        yield ":memory:"
        return
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        store = PostgresStore(postgres_url(), schema=schema, min_size=1, max_size=2)
        yield store
        store.close()


def test_with_a_salted_redactor_a_masked_value_finds_where_it_was_mentioned(any_store):
    ada, bob = Secrets(), Secrets()
    manager = SessionManager(any_store).with_redaction(PIIRedactor(hash_salt="pepper"))
    manager.with_context("notes", provider=StoreSearchContext())
    for name, secrets in (("ada", ada), ("bob", bob)):
        session_id = manager.create(name).id
        text = f"Please invoice {secrets.email} for March."
        manager.append(session_id, {"id": f"{name}-1", "role": "user", "parts": [{"type": "text", "text": text}]})
        manager.get_session(session_id)._blocks.get().set_search_entry("notes", "contact", f"reach {secrets.email}")
    ada_id = next(info.id for info in manager.list_sessions() if info.name == "ada")
    ada_session = manager.get_session(ada_id)

    assert [hit.id for hit in manager.search(ada.email)] == ["ada-1"]  # not bob's address
    assert [hit.id for hit in ada_session.search(f"{ada.email} march")] == ["ada-1"]
    (session_search,) = manager.tools()  # the model's tool: it names the session where she was mentioned
    shown = session_search.invoke({"query": ada.email})
    assert 'session "ada"' in shown and 'session "bob"' not in shown and ada.email not in shown
    search_context = {tool.name: tool for tool in ada_session.tools()}["search_context"]
    assert "[contact]" in search_context.invoke({"label": "notes", "query": ada.email})
    assert "[contact]" not in search_context.invoke({"label": "notes", "query": bob.email})

    unsalted = SessionManager(":memory:").with_redaction(PIIRedactor())
    session_id = unsalted.create("ada").id
    unsalted.append(session_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": f"mail {ada.email}"}]})
    assert unsalted.search(ada.email) == []  # an unsalted mask would find every address: the query is left as is
    unsalted.close()
    manager.close()
