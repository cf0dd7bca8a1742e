"""The ``sessions`` command line: every command on SQLite (and Postgres), round trips, bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("click", reason="the cli extra is not installed (pip install 'session-memory[cli]')")
pytest.importorskip("rich", reason="the cli extra is not installed (pip install 'session-memory[cli]')")

from click.testing import CliRunner

from sessions_core import ContextError, Session, SessionManager, SqliteStore, StaticContext, StoreSearchContext
from sessions_core.cli import build_cli

from .helpers import msg
from .postgres import postgres_url, require_postgres, temporary_schema

SESSION = "chat"


def _tool_call(message_id: str) -> dict:
    return {
        "id": message_id,
        "role": "assistant",
        "parts": [{"type": "tool-call", "toolCallId": "c1", "toolName": "weather", "input": {"city": "Lisbon"}}],
    }


def _tool_result(message_id: str) -> dict:
    return {
        "id": message_id,
        "role": "tool",
        "parts": [{"type": "tool-result", "toolCallId": "c1", "toolName": "weather", "output": {"temp": 22}}],
    }


def populate(store) -> dict:
    """A branched session with a compaction, store-backed blocks, search entries and a cached
    prompt; a manager session in a namespace; a session holding only a block."""
    session = (
        Session(store)
        .for_session(SESSION)
        .with_context("soul", provider=StaticContext("You are a helpful assistant."))
        .with_context("memory", description="Learned facts", max_tokens=500)
        .with_context("knowledge", description="Notes", provider=StoreSearchContext())
        .with_cached_prompt()
    )
    session.append_message(msg("u1", "Plan a trip to Lisbon in May"))
    session.append_message(msg("a1", "Lisbon is lovely in May.", role="assistant"))
    session.append_message(msg("u2", "What about the weather there?"))
    session.append_message(_tool_call("a2"))
    session.append_message(_tool_result("t1"))
    session.append_message(msg("a3", "About 22 degrees and sunny.", role="assistant"))
    session.append_message(msg("a1b", "Porto might suit you better.", role="assistant"), parent_id="u1")
    session.append_message(msg("u3b", "Tell me more\nabout Porto [bold]now[/bold]"))
    session.append_message(msg("a3c", "Regenerated: warm, 22 degrees.", role="assistant"), parent_id="t1")
    compaction = session.add_compaction("The user plans a Lisbon trip and asked about the weather.", "a1", "t1")
    session.replace_context_block("memory", "User likes coffee.")
    tools = {tool.name: tool for tool in session.tools()}
    tools["set_context"].invoke({"label": "knowledge", "key": "trams", "content": "Lisbon trams are yellow."})
    tools["set_context"].invoke({"label": "knowledge", "key": "wine", "content": "Porto has port wine."})
    session.freeze_system_prompt()

    manager = SessionManager(store, namespace="team")
    info = manager.create("Trip planning", model="gpt-4o")
    manager.append(info.id, msg("x1", "hello team, lisbon again"))
    manager.add_usage(info.id, input_tokens=1200, output_tokens=300, cost=0.004)

    store.set_block("blocks-only", "memory", "Just a block.")
    return {"compaction": compaction.id, "manager_session": f"team:{info.id}", "leaves": ["a3", "a3c", "u3b"]}


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, dict]:
    path = tmp_path / "sessions.db"
    store = SqliteStore(path)
    facts = populate(store)
    store.close()
    return str(path), facts


def run(*args: str, input: str | None = None, env: dict | None = None):
    runner = CliRunner(env={"SESSIONS_STORE": None, **(env or {})})
    return runner.invoke(build_cli(), list(args), input=input, catch_exceptions=False)


def assert_error(result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, lines[-1])


def snapshot(store, session_id: str) -> dict:
    """Everything of a session a round trip must keep."""
    session = Session(store).for_session(session_id)
    leaves = []
    after = 0
    ids = []
    while page := store.message_rows(session_id, after, 3):
        ids += [row.id for _seq, row in page]
        after = page[-1][0]
    for message_id in ids:
        if not store.children(session_id, message_id):
            leaves.append(message_id)
    histories = {leaf: [m.model_dump(mode="json", by_alias=True) for m in session.get_history(leaf)] for leaf in leaves}
    messages = {message_id: store.get_message(session_id, message_id) for message_id in ids}
    entries = []
    after = 0
    while page := store.search_entry_rows(session_id, after, 2):
        entries += [(e.label, e.key, e.content) for e in page]
        after = page[-1].seq
    return {
        "histories": histories,
        "messages": {k: (v.parent_id, v.role, v.created_at_us, json.loads(v.content)) for k, v in messages.items()},
        "compactions": [tuple(c) for c in store.get_compactions(session_id)],
        "blocks": [(b.label, b.content) for b in store.list_blocks(session_id)],
        "prompt": store.get_cached_prompt(session_id),
        "entries": entries,
        "latest": store.latest_leaf(session_id).id if ids else None,
    }


# -- the store methods behind the command line (SQLite here, Postgres below) ------------------------


# -- every command on SQLite ---------------------------------------------------------------------


def test_list(db):
    path, facts = db
    result = run("--store", path, "list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "NAME", "NAMESPACE", "MESSAGES"]
    row = next(line for line in lines if line.startswith(facts["manager_session"]))
    assert "Trip planning" in row and " team " in row and "1200" in row and "300" in row and "0.0040" in row
    chat = next(line for line in lines if line.startswith(SESSION + " "))
    assert chat.split()[1:4] == ["-", "-", "9"]
    assert any(line.startswith("blocks-only ") for line in lines)
    assert lines[-1] == "3 sessions"
    assert not any(line != line.rstrip() for line in lines)

    listed = json.loads(run("--store", path, "list", "--json").stdout)
    by_id = {item["session_id"]: item for item in listed}
    assert by_id[SESSION]["messages"] == 9 and by_id[SESSION]["name"] is None
    assert by_id[facts["manager_session"]]["name"] == "Trip planning"
    assert by_id[facts["manager_session"]]["namespace"] == "team"
    assert by_id[facts["manager_session"]]["input_tokens"] == 1200
    assert by_id["blocks-only"]["messages"] == 0 and by_id["blocks-only"]["last_activity"] is None


def test_list_of_an_empty_store(tmp_path):
    path = tmp_path / "empty.db"
    SqliteStore(path).setup()
    result = run("--store", str(path), "list")
    assert result.exit_code == 0 and result.stdout.strip() == "No sessions."


def test_store_comes_from_the_environment(db):
    path, _ = db
    result = run("list", "--json", env={"SESSIONS_STORE": path})
    assert result.exit_code == 0 and len(json.loads(result.stdout)) == 3


def test_show_prints_every_branch_marks_the_active_one_and_compactions(db):
    path, facts = db
    result = run("--store", path, "show", SESSION)
    assert result.exit_code == 0, result.output
    out = result.stdout
    lines = out.splitlines()
    assert lines[0].startswith(f"session {SESSION}: 9 messages, 3 leaves, 1 compaction; active leaf a3c")

    def line_of(message_id: str) -> str:
        return next(line for line in lines if re.search(rf"── [* ] {message_id} ", line))

    for message_id in ("u1", "a1", "u2", "a2", "t1", "a3c"):  # the active branch
        assert f"* {message_id} " in line_of(message_id), line_of(message_id)
    for message_id in ("a3", "a1b", "u3b"):  # the other branches
        assert f"* {message_id} " not in line_of(message_id)
    assert "<- active leaf" in line_of("a3c")
    for message_id in ("a1", "u2", "a2", "t1"):
        assert f"[summarised by compaction {facts['compaction']}]" in line_of(message_id)
    for message_id in ("u1", "a3", "a3c", "a1b"):
        assert "summarised by" not in line_of(message_id)
    assert f"compaction {facts['compaction']}" in out and "covers a1 .. t1" in out
    assert "branch 1/2 from u1 (active)" in out and "branch 2/2 from u1" in out
    assert "branch 2/2 from t1 (active)" in out
    assert '-> weather({"city":"Lisbon"})' in line_of("a2")  # tool calls and results summarised
    assert '<- weather: {"temp":22}' in line_of("t1")
    assert "Tell me more about Porto [bold]now[/bold]" in line_of("u3b")  # one line, no markup
    # The branch of u1's second child nests deeper than the chain it forks from.
    assert line_of("a1b").index("a1b") > line_of("u1").index("u1")


def test_show_a_manager_session_and_one_without_messages(db):
    path, facts = db
    result = run("--store", path, "show", facts["manager_session"])
    assert result.exit_code == 0
    assert "name 'Trip planning'" in result.stdout and "* x1 user: hello team" in result.stdout
    result = run("--store", path, "show", "blocks-only")
    assert result.exit_code == 0 and "(no messages)" in result.stdout


def test_search(db):
    path, facts = db
    result = run("--store", path, "search", "lisbon")
    assert result.exit_code == 0, result.output
    rows = [line.split()[:3] for line in result.stdout.splitlines()[1:-1]]
    assert sorted(rows) == sorted(
        [[SESSION, "u1", "user"], [SESSION, "a1", "assistant"], [facts["manager_session"], "x1", "user"]]
    )
    assert result.stdout.splitlines()[-1] == "3 matches"
    only = run("--store", path, "search", "lisbon", "--session", SESSION, "--limit", "1")
    assert only.exit_code == 0 and only.stdout.splitlines()[-1] == "1 match"
    none = run("--store", path, "search", "zanzibar")
    assert none.exit_code == 0 and none.stdout.strip() == "No matches."
    some = run("--store", path, "search", "what about lisbon and zanzibar?")
    assert some.exit_code == 0 and some.stdout.splitlines()[-1] == "3 matches"
    strict = run("--store", path, "search", "what about lisbon and zanzibar?", "--match", "all")
    assert strict.exit_code == 0 and strict.stdout.strip() == "No matches."


def test_blocks(db):
    path, _ = db
    result = run("--store", path, "blocks", SESSION)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "memory" in out and "User likes coffee." in out
    assert any(line.split()[:2] == ["knowledge", "2"] for line in out.splitlines())
    assert "Cached prompt: yes" in out
    bare = run("--store", path, "blocks", "blocks-only")
    assert "Just a block." in bare.stdout and "No search entries." in bare.stdout
    assert "Cached prompt: no" in bare.stdout


def test_stats(db):
    path, _ = db
    data = json.loads(run("--store", path, "stats", "--json").stdout)
    assert data["backend"] == "sqlite" and data["schema_version"] >= 3
    assert (data["sessions"], data["registered_sessions"], data["messages"]) == (3, 1, 10)
    assert (data["compactions"], data["blocks"], data["cached_prompts"], data["search_entries"]) == (1, 2, 1, 2)
    assert data["file_bytes"] == os.path.getsize(path) and data["database_bytes"] > 0
    plain = run("--store", path, "stats")
    assert plain.exit_code == 0
    assert any(line.split() == ["messages", "10"] for line in plain.stdout.splitlines())
    assert any(line.startswith("schema version") for line in plain.stdout.splitlines())
    assert any(line.startswith("file bytes") for line in plain.stdout.splitlines())


# -- export and import ---------------------------------------------------------------------------


def export_lines(path: str, session_id: str = SESSION) -> list[dict]:
    result = run("--store", path, "export", session_id)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_export_format(db):
    path, facts = db
    records = export_lines(path)
    kinds = [r["kind"] for r in records]
    assert (
        kinds
        == ["session"]
        + ["message"] * 9
        + ["compaction"]
        + ["block_version"] * 3
        + ["block", "prompt"]
        + ["search_entry"] * 2
    )
    assert records[0]["format"] == "session-memory/1" and records[0]["registry"] is None
    written: set[str] = set()
    for record in records[1:10]:  # parents before children
        assert record["parent_id"] is None or record["parent_id"] in written
        written.add(record["id"])
        assert record["session_id"] == SESSION
        assert record["message"]["id"] == record["id"]
        assert datetime.fromisoformat(record["created_at"]).tzinfo is not None
    tool_call = next(r for r in records if r.get("id") == "a2")
    assert tool_call["message"]["parts"][0]["toolCallId"] == "c1"  # camelCase, as the AI SDK has it
    compaction = records[10]
    assert (compaction["id"], compaction["from_message_id"], compaction["to_message_id"]) == (
        facts["compaction"],
        "a1",
        "t1",
    )
    versions = records[11:14]  # every kept version of the blocks and entries, by label and key
    assert [(v["kind"], v["label"], v["key"] != "", v["version"], v["source"]) for v in versions] == [
        ("block_version", "knowledge", True, 1, "tool"),
        ("block_version", "knowledge", True, 1, "tool"),
        ("block_version", "memory", False, 1, "code"),
    ]
    assert records[14]["label"] == "memory" and records[14]["content"] == "User likes coffee."
    assert [r["content"] for r in records[16:]] == ["Lisbon trams are yellow.", "Porto has port wine."]
    manager = export_lines(path, facts["manager_session"])
    assert manager[0]["registry"]["name"] == "Trip planning" and manager[0]["registry"]["input_tokens"] == 1200


def test_export_to_a_file(db, tmp_path):
    path, _ = db
    target = tmp_path / "out" / "chat.jsonl"
    target.parent.mkdir()
    result = run("--store", path, "export", SESSION, "-o", str(target))
    assert result.exit_code == 0 and result.stdout == ""
    assert "Exported session chat to" in result.stderr and "9 messages" in result.stderr
    assert len(target.read_text().splitlines()) == 18
    assert [p.name for p in target.parent.iterdir()] == ["chat.jsonl"]  # no temporary file left


def test_round_trip_into_a_fresh_database(db, tmp_path):
    path, facts = db
    dump = tmp_path / "chat.jsonl"
    assert run("--store", path, "export", SESSION, "-o", str(dump)).exit_code == 0
    fresh = str(tmp_path / "fresh.db")
    result = run("--store", fresh, "import", str(dump))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        "Imported into chat: stored 9 messages, 1 compaction, 3 block versions, 1 block, 1 cached prompt,"
        " 2 search entries."
    )
    original, copy = SqliteStore(path), SqliteStore(fresh)
    before, after = snapshot(original, SESSION), snapshot(copy, SESSION)
    assert sorted(before["histories"]) == facts["leaves"]
    assert after == before
    assert Session(copy).for_session(SESSION).get_history()[-1].id == "a3c"
    # A manager session keeps its registry row, so a manager sees it again.
    dump2 = tmp_path / "team.jsonl"
    assert run("--store", path, "export", facts["manager_session"], "-o", str(dump2)).exit_code == 0
    assert run("--store", fresh, "import", str(dump2)).exit_code == 0
    manager = SessionManager(copy, namespace="team")
    [info] = manager.list_sessions()
    assert (info.name, info.model, info.input_tokens, info.output_tokens) == ("Trip planning", "gpt-4o", 1200, 300)
    assert [m.id for m in manager.get_history(info.id)] == ["x1"]
    original.close()
    copy.close()


def test_a_new_database_is_built_aside_and_moved_into_place(db, tmp_path, monkeypatch):
    path, _ = db
    dump = tmp_path / "chat.jsonl"
    dump.write_text(run("--store", path, "export", SESSION).stdout)
    fresh = tmp_path / "fresh.db"
    assert run("--store", str(fresh), "import", str(dump)).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".fresh", "fresh"))) == ["fresh.db"]
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask  # as SQLite would have created it

    # Another process creates the database while this one builds it: nothing of either is lost.
    raced = tmp_path / "raced.db"
    link = os.link

    def create_first(source, target):
        other = SqliteStore(target)
        Session(other).for_session("theirs").append_message(msg("t1"))
        other.close()
        return link(source, target)

    monkeypatch.setattr(os, "link", create_first)
    result = run("--store", str(raced), "import", str(dump))
    assert result.exit_code == 0, result.output
    assert "Imported into chat: stored 9 messages" in result.stdout
    store = SqliteStore(raced)
    assert snapshot(store, SESSION) == snapshot(SqliteStore(path), SESSION)
    assert [m.id for m in Session(store).for_session("theirs").get_history()] == ["t1"]
    store.close()
    assert not list(tmp_path.glob(".raced.db.*"))


def test_importing_twice_stores_nothing_twice(db, tmp_path):
    path, _ = db
    dump = tmp_path / "chat.jsonl"
    dump.write_text(run("--store", path, "export", SESSION).stdout)
    fresh = str(tmp_path / "fresh.db")
    assert run("--store", fresh, "import", str(dump)).exit_code == 0
    stats = json.loads(run("--store", fresh, "stats", "--json").stdout)
    again = run("--store", fresh, "import", str(dump))
    assert again.exit_code == 0
    assert again.stdout.strip() == (
        "Imported into chat: nothing new; already present: 9 messages, 1 compaction, 3 block versions, 1 block,"
        " 1 cached prompt, 2 search entries."
    )
    after = json.loads(run("--store", fresh, "stats", "--json").stdout)
    for key in ("sessions", "messages", "compactions", "blocks", "cached_prompts", "search_entries"):
        assert after[key] == stats[key], key


def test_an_import_run_in_process_leaves_nothing_frozen(db, tmp_path):
    """The import freezes what is loaded for the length of the command only."""
    import gc

    path, _ = db
    dump = tmp_path / "chat.jsonl"
    dump.write_text(run("--store", path, "export", SESSION).stdout)
    gc.unfreeze()
    assert run("--store", str(tmp_path / "fresh.db"), "import", str(dump)).exit_code == 0
    assert gc.get_freeze_count() == 0


def test_import_into_another_session_of_the_same_store(db, tmp_path):
    path, _ = db
    dump = tmp_path / "chat.jsonl"
    dump.write_text(run("--store", path, "export", SESSION).stdout)
    first = run("--store", path, "import", "--into", "copy", str(dump))
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("Imported into copy: stored 9 messages, 1 compaction")
    second = run("--store", path, "import", "--into", "copy", str(dump))
    assert "nothing new" in second.stdout
    store = SqliteStore(path)
    original, copy = snapshot(store, SESSION), snapshot(store, "copy")

    def without_overlay_ids(histories):
        return {
            leaf: [{**m, "id": "compaction_*"} if m["id"].startswith("compaction_") else m for m in messages]
            for leaf, messages in histories.items()
        }

    assert without_overlay_ids(copy["histories"]) == without_overlay_ids(original["histories"])
    assert copy["messages"] == original["messages"]
    assert copy["blocks"] == original["blocks"] and copy["entries"] == original["entries"]
    # Compaction ids are unique in a store: the copy's overlay has its own, stable id.
    [(copy_id, *copy_rest)] = copy["compactions"]
    [(original_id, *original_rest)] = original["compactions"]
    assert copy_id != original_id and copy_rest == original_rest
    store.close()


def test_import_from_stdin(db, tmp_path):
    path, _ = db
    dump = run("--store", path, "export", SESSION).stdout
    fresh = str(tmp_path / "fresh.db")
    result = run("--store", fresh, "import", "-", "--into", "piped", input=dump)
    assert result.exit_code == 0, result.output
    assert "Imported into piped: stored 9 messages" in result.stdout


def test_export_writes_parents_before_children_even_when_times_disagree(tmp_path):
    path = str(tmp_path / "odd.db")
    store = SqliteStore(path)
    session = Session(store).for_session("odd")
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    session.import_message(msg("root"), parent_id=None, created_at=base + timedelta(hours=2))
    session.import_message(msg("child"), parent_id="root", created_at=base)  # older than its parent
    session.import_message(msg("grandchild"), parent_id="child", created_at=base - timedelta(hours=1))
    store.close()
    records = export_lines(path, "odd")
    assert [r["id"] for r in records if r["kind"] == "message"] == ["root", "child", "grandchild"]
    fresh = str(tmp_path / "fresh.db")
    dump = tmp_path / "odd.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert run("--store", fresh, "import", str(dump)).exit_code == 0
    copy = SqliteStore(fresh)
    assert snapshot(copy, "odd") == snapshot(SqliteStore(path), "odd")
    copy.close()


# -- bad input -------------------------------------------------------------------------------------


def test_unknown_session_exits_1(db):
    path, _ = db
    for command in (["show", "nope"], ["export", "nope"], ["blocks", "nope"], ["search", "x", "--session", "nope"]):
        assert_error(run("--store", path, *command), 1, "unknown session 'nope'")


@pytest.mark.parametrize(
    "line_number, corrupt, expected",
    [
        (5, lambda r: json.dumps(r)[:-7], "not valid JSON"),
        (4, lambda r: json.dumps({**r, "message": {**r["message"], "role": "robot"}}), "invalid message 'u2': role"),
        (4, lambda r: json.dumps({**r, "message": {**r["message"], "parts": "oops"}}), "invalid message 'u2': parts"),
        (4, lambda r: json.dumps({**r, "parent_id": "ghost"}), "parent 'ghost'"),
        (6, lambda r: json.dumps({**r, "created_at": "yesterday"}), "'created_at' is not an ISO 8601 time"),
        (7, lambda r: json.dumps({**r, "kind": "wat"}), "unknown kind 'wat'"),
        (3, lambda r: "[1, 2]", "expected a JSON object"),
        (11, lambda r: json.dumps({**r, "summary": None}), "'summary' must be a string"),
        (12, lambda r: json.dumps({**r, "content": 3}), "'content' must be a string"),
        (14, lambda r: json.dumps({k: v for k, v in r.items() if k != "key"}), "'key' must be a string"),
    ],
)
def test_a_malformed_line_exits_2_naming_it_and_stores_nothing(db, tmp_path, line_number, corrupt, expected):
    path, _ = db
    lines = run("--store", path, "export", SESSION).stdout.splitlines()
    lines[line_number - 1] = corrupt(json.loads(lines[line_number - 1]))
    dump = tmp_path / "bad.jsonl"
    dump.write_text("\n".join(lines) + "\n")

    fresh = tmp_path / "fresh.db"
    assert_error(run("--store", str(fresh), "import", str(dump)), 2, f"bad.jsonl line {line_number}:", expected)
    assert not fresh.exists()  # not even created
    assert not list(tmp_path.glob(".fresh.db.*"))  # nor the file it was being built in

    existing = tmp_path / "existing.db"
    store = SqliteStore(existing)
    store.setup()  # a store opens on first use: set up, it exists (empty)
    store.close()
    assert_error(run("--store", str(existing), "import", "--into", "other", str(dump)), 2, f"line {line_number}:")
    assert json.loads(run("--store", str(existing), "stats", "--json").stdout)["sessions"] == 0


def test_import_refuses_other_bad_files(db, tmp_path):
    path, facts = db
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    assert_error(run("--store", path, "import", str(empty)), 2, "holds no records")
    assert_error(run("--store", path, "import", str(tmp_path / "missing.jsonl")), 1, "no such file")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"kind": "prompt", "session_id": "x", "prompt": "\xff"}\n')
    assert_error(run("--store", path, "import", str(binary)), 2, "line 1: not UTF-8")
    two = tmp_path / "two.jsonl"
    two.write_text(
        run("--store", path, "export", SESSION).stdout + run("--store", path, "export", facts["manager_session"]).stdout
    )
    assert_error(run("--store", path, "import", "--into", "x", str(two)), 2, "line 19:", "more than one session")
    assert run("--store", path, "import", "--dry-run", str(two)).stdout.startswith(f"{two}: 20 valid records")
    header = tmp_path / "future.jsonl"
    header.write_text(json.dumps({"kind": "session", "format": "session-memory/99", "session_id": "x"}) + "\n")
    assert_error(run("--store", path, "import", str(header)), 2, "line 1: unsupported format")


def test_bad_stores(tmp_path):
    assert_error(run("--store", str(tmp_path / "missing.db"), "list"), 1, "no SQLite database at")
    assert not (tmp_path / "missing.db").exists()
    assert_error(run("--store", "mysql://somewhere/db", "list"), 2, "unsupported store URL")
    assert_error(run("--store", str(tmp_path), "list"), 2, "is a directory")
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all, just some text that is long enough" * 20)
    assert_error(run("--store", str(text), "stats"), 2, "is not a session-memory SQLite database")
    store = SqliteStore(tmp_path / "ok.db")
    store.setup()
    store.close()
    assert_error(run("--store", str(tmp_path / "ok.db"), "--schema", "x", "list"), 2, "--schema applies to PostgreSQL")
    refused = run("--store", "postgresql://nobody@127.0.0.1:1/none", "list")
    assert_error(refused, 1, "cannot connect to postgresql://nobody@127.0.0.1:1/none")
    secret = run("--store", "postgresql://user:hunter2@127.0.0.1:1/none", "list")
    assert "hunter2" not in secret.stderr and "***" in secret.stderr
    key_value = run("--store", "host=127.0.0.1 port=1 dbname=none password=hunter2", "list")  # libpq's form
    assert_error(key_value, 1, "cannot connect to host=127.0.0.1 port=1 dbname=none password=***")
    assert "hunter2" not in key_value.stderr + key_value.stdout


def test_usage_errors_exit_2(db):
    path, _ = db
    assert run("--store", path, "bogus").exit_code == 2
    assert run("--store", path, "show").exit_code == 2
    assert run("--store", path, "search", "x", "--limit", "0").exit_code == 2


# -- the real process ------------------------------------------------------------------------------


def sessions(*args: str, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONS_STORE"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "sessions_core", *args],
        capture_output=True,
        text=True,
        input=input,
        env=environment,
        timeout=120,
        check=False,
    )


def test_python_dash_m_runs_every_command(db, tmp_path):
    path, _ = db
    listed = sessions("list", env={"SESSIONS_STORE": path})
    assert listed.returncode == 0, listed.stderr
    assert "Trip planning" in listed.stdout and listed.stdout.splitlines()[-1] == "3 sessions"
    shown = sessions("--store", path, "show", SESSION)
    assert shown.returncode == 0 and "<- active leaf" in shown.stdout
    assert "\x1b[" not in shown.stdout  # plain text when not a terminal
    assert sessions("--store", path, "search", "porto").stdout.splitlines()[-1] == "2 matches"
    assert "Cached prompt: yes" in sessions("--store", path, "blocks", SESSION).stdout
    assert json.loads(sessions("--store", path, "stats", "--json").stdout)["messages"] == 10

    exported = sessions("--store", path, "export", SESSION)
    assert exported.returncode == 0 and len(exported.stdout.splitlines()) == 18
    fresh = str(tmp_path / "fresh.db")
    imported = sessions("--store", fresh, "import", "-", input=exported.stdout)
    assert imported.returncode == 0, imported.stderr
    assert snapshot(SqliteStore(fresh), SESSION) == snapshot(SqliteStore(path), SESSION)

    missing = sessions("--store", path, "show", "nope")
    assert missing.returncode == 1 and missing.stderr == "Error: unknown session 'nope' (see `sessions list`)\n"
    bad = sessions("--store", fresh, "import", "-", input='{"kind": "message"\n')
    assert bad.returncode == 2 and bad.stderr.startswith("Error: <stdin> line 1: not valid JSON")
    assert "Traceback" not in bad.stderr and len(bad.stderr.splitlines()) == 1
    help_text = sessions("--help")
    assert help_text.returncode == 0 and "export" in help_text.stdout and "--schema" in help_text.stdout


def test_importing_the_package_loads_neither_click_nor_rich():
    code = (
        "import sys, sessions_core, sessions_core.cli\n"
        "print(','.join(m for m in ('click', 'rich') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_a_missing_cli_extra_is_named():
    code = "import sys\nsys.modules['rich'] = None\nfrom sessions_core.cli import main\nmain(['list'])\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "pip install 'session-memory[cli]'" in result.stderr and "Traceback" not in result.stderr


# -- PostgreSQL ------------------------------------------------------------------------------------


@pytest.fixture
def pg_schema():
    require_postgres()
    with temporary_schema() as name:
        yield name


def test_postgres_export_import_list_show(db, tmp_path, pg_schema):
    from sessions_core.stores.postgres import PostgresStore

    path, facts = db
    url = postgres_url()
    pg = ("--store", url, "--schema", pg_schema)
    assert_error(run(*pg, "list"), 1, f"no session-memory tables in schema '{pg_schema}'")

    dump = tmp_path / "chat.jsonl"
    dump.write_text(run("--store", path, "export", SESSION).stdout)
    first = run(*pg, "import", str(dump))
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("Imported into chat: stored 9 messages, 1 compaction")
    assert "nothing new" in run(*pg, "import", str(dump)).stdout
    team = tmp_path / "team.jsonl"
    team.write_text(run("--store", path, "export", facts["manager_session"]).stdout)
    assert run(*pg, "import", str(team)).exit_code == 0

    listed = {item["session_id"]: item for item in json.loads(run(*pg, "list", "--json").stdout)}
    assert listed[SESSION]["messages"] == 9 and listed[facts["manager_session"]]["name"] == "Trip planning"
    assert run(*pg, "show", SESSION).stdout == run("--store", path, "show", SESSION).stdout
    assert_error(run(*pg, "show", "nope"), 1, "unknown session 'nope'")

    store, original = PostgresStore(url, schema=pg_schema, max_size=2), SqliteStore(path)
    try:
        assert snapshot(store, SESSION) == snapshot(original, SESSION)
    finally:
        store.close()
        original.close()

    # And back: Postgres -> a fresh SQLite file reads the same.
    back = tmp_path / "back.jsonl"
    assert run(*pg, "export", SESSION, "-o", str(back)).exit_code == 0
    fresh = str(tmp_path / "fresh.db")
    assert run("--store", fresh, "import", str(back)).exit_code == 0
    assert snapshot(SqliteStore(fresh), SESSION) == snapshot(SqliteStore(path), SESSION)
    stats = json.loads(run(*pg, "stats", "--json").stdout)
    assert stats["backend"] == "postgresql" and stats["messages"] == 10 and pg_schema in stats["store"]


def test_export_carries_file_payloads(tmp_path):
    """Payloads kept outside the row are exported inline (bytes as base64) and imported back."""
    import base64
    import subprocess
    import sys

    from sessions_core import Session

    png = bytes(range(256)) * 4
    with Session(tmp_path / "a.db").for_session("x") as session:
        session.append_message(
            {"id": "a", "role": "user", "parts": [{"type": "file", "mediaType": "image/png", "data": png}]}
        )
        session.append_message(
            {
                "id": "b",
                "role": "user",
                "parts": [
                    {
                        "type": "file",
                        "mediaType": "image/png",
                        "data": "data:image/png;base64," + base64.b64encode(png).decode(),
                    }
                ],
            }
        )
    export = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessions_core",
            "--store",
            str(tmp_path / "a.db"),
            "export",
            "x",
            "-o",
            str(tmp_path / "x.jsonl"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sessions-blob:" not in (tmp_path / "x.jsonl").read_text()
    subprocess.run(
        [sys.executable, "-m", "sessions_core", "--store", str(tmp_path / "b.db"), "import", str(tmp_path / "x.jsonl")],
        capture_output=True,
        text=True,
        check=True,
    )
    with Session(tmp_path / "b.db").for_session("x") as copy:
        first, second = copy.get_history()
        assert first.parts[0].data == png  # bytes come back as bytes
        assert second.parts[0].data == "data:image/png;base64," + base64.b64encode(png).decode()
    assert export.returncode == 0


def test_show_pages_a_long_session(tmp_path):
    path = str(tmp_path / "long.db")
    with Session(path).for_session("long") as session:
        session.append_messages([msg(f"m{i:04d}", f"message {i}") for i in range(1200)])
    first = run("--store", path, "show", "long")
    assert first.exit_code == 0
    assert "m0000" in first.stdout and "m0499" in first.stdout and "m0500" not in first.stdout
    assert first.stdout.rstrip().endswith("messages 1-500 of 1,200 shown (page 1 of 3; --page 2 for the next 500)")
    last = run("--store", path, "show", "long", "--page", "3", "--limit", "500")
    assert "m1000" in last.stdout and "m1199" in last.stdout and "m0999" not in last.stdout
    assert last.stdout.rstrip().endswith("messages 1,001-1,200 of 1,200 shown (page 3 of 3)")
    assert "<- active leaf" in last.stdout
    assert run("--store", path, "show", "long", "--page", "0").exit_code == 2


def test_ids_are_never_folded_in_tables():
    import io

    from rich.console import Console

    from sessions_core.cli.output import emit, table

    out = Console(file=io.StringIO(), force_terminal=True, width=60)
    grid = table(out, "SESSION", "TEXT")
    long_id = "team:" + "0123456789abcdef" * 3
    grid.add_row(long_id, "a text long enough to be folded over several lines of the table " * 2)
    emit(out, grid)
    assert long_id in out.file.getvalue()


def test_blocks_history_and_restore(tmp_path):
    """Issue 21: ``sessions blocks SESSION --history LABEL`` lists the versions with what changed;
    ``--restore LABEL VERSION`` makes one current as a new version."""
    path = str(tmp_path / "versions.db")
    session = Session(path).for_session("u1").with_context("memory", description="Facts")
    session.replace_context_block("memory", "User likes tea. Lives in Porto.")
    session.replace_context_block("memory", "User likes tea. Lives in Lisbon.")
    {t.name: t for t in session.tools()}["set_context"].invoke(
        {"label": "memory", "content": "User is Bob."}, tool_call_id="call_1"
    )
    session.store.close()
    listed = run("--store", path, "blocks", "u1", "--history", "memory")
    assert listed.exit_code == 0, listed.output
    rows = [line.split(None, 3) for line in listed.stdout.strip().splitlines()[1:]]
    assert [(r[0], " ".join(r[3].split())) for r in rows] == [
        ("3", "tool (call_1) -likes tea. Lives in Lisbon. +is Bob."),
        ("2", "code -Porto. +Lisbon."),
        ("1", "code +User likes tea. Lives in Porto."),
    ]
    restored = run("--store", path, "blocks", "u1", "--restore", "memory", "2")
    assert restored.exit_code == 0 and restored.stdout.strip() == (
        "Restored block 'memory' of session u1 to version 2, as version 4."
    )
    assert SqliteStore(path).get_block("u1", "memory") == "User likes tea. Lives in Lisbon."
    assert_error(run("--store", path, "blocks", "u1", "--restore", "memory", "9"), 1, "has no version 9")
    assert_error(run("--store", path, "blocks", "u1", "--restore", "memory", "x"), 2, "version number")
    assert_error(run("--store", path, "blocks", "u1", "--history", "nope"), 1, "no versions of block 'nope'")
    assert_error(run("--store", path, "blocks", "u1", "--key", "k"), 2, "--key goes with")


def test_blocks_restore_is_the_librarys_restore(tmp_path, monkeypatch):
    """``--restore`` is ``Session.restore_context``, not a write of its own: with the block's
    ``--max-tokens`` a version over the limit is refused with the library's error and nothing is
    recorded; ``--keep-versions`` prunes as the block's ``keep_versions`` does; the write is
    published on the change feed with its version; a keyed entry restores by key."""
    from sessions_core.feed import ChangeFeed

    path = str(tmp_path / "restore.db")
    session = Session(path).for_session("u1").with_context("memory", max_tokens=20)
    session.replace_context_block("memory", "short")
    session.store.write_block("u1", "memory", "word " * 30)  # version 2, over the block's limit
    session.replace_context_block("memory", "current")
    for text in ("Lisbon has trams", "Lisbon has no trams"):
        session.store.write_block("u1", "kb", text, key="lisbon")
    with pytest.raises(ContextError) as refused:
        session.restore_context("memory", 2)
    session.store.close()

    def versions(label: str, key: str | None = None) -> list[int]:
        store = SqliteStore(path)
        try:
            return [v.version for v in store.block_versions("u1", label, key)]
        finally:
            store.close()

    over = run("--store", path, "blocks", "u1", "--restore", "memory", "2", "--max-tokens", "20")
    assert_error(over, 1, str(refused.value))
    assert versions("memory") == [3, 2, 1]

    events = []
    publish = ChangeFeed.publish
    monkeypatch.setattr(ChangeFeed, "publish", lambda feed, event: (events.append(event), publish(feed, event)))
    kept = run("--store", path, "blocks", "u1", "--restore", "memory", "1", "--keep-versions", "2")
    assert kept.exit_code == 0, kept.output
    assert kept.stdout.strip() == "Restored block 'memory' of session u1 to version 1, as version 4."
    assert versions("memory") == [4, 3]
    assert [(e.type, e.session_id, e.label, e.key, e.version) for e in events] == [("block", "u1", "memory", None, 4)]

    keyed = run("--store", path, "blocks", "u1", "--restore", "kb", "1", "--key", "lisbon")
    assert keyed.exit_code == 0, keyed.output
    assert "Restored block 'kb' entry 'lisbon' of session u1 to version 1, as version 3." in keyed.stdout
    assert events[-1].label == "kb" and events[-1].key == "lisbon" and events[-1].version == 3
    store = SqliteStore(path)
    assert store.search_entries("u1", "kb", "trams", 5) == [("lisbon", "Lisbon has trams")]
    store.close()
    assert_error(run("--store", path, "blocks", "u1", "--max-tokens", "5"), 2, "--max-tokens goes with --restore")


# -- what a first-time user met (issue 35): each message exactly ---------------------------------


def error_line(result) -> str:
    assert "Traceback" not in result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_show_refuses_a_page_past_the_end(tmp_path):
    path = str(tmp_path / "three.db")
    with Session(path).for_session("three") as session:
        session.append_messages([msg(f"m{i}", f"message {i}") for i in range(3)])
    past = run("--store", path, "show", "three", "--page", "9", "--limit", "1")
    assert past.exit_code == 2 and past.stdout == ""
    assert error_line(past) == "Error: --page 9 is past the end: session 'three' has 3 messages, 3 pages of 1"
    assert error_line(run("--store", path, "show", "three", "--page", "2")) == (
        "Error: --page 2 is past the end: session 'three' has 3 messages, 1 page of 500"
    )
    assert (
        run("--store", path, "show", "three", "--page", "3", "--limit", "1")
        .stdout.rstrip()
        .endswith("messages 3-3 of 3 shown (page 3 of 3)")
    )


def test_files_a_read_cannot_use_are_named_by_their_path(tmp_path, monkeypatch):
    """No ``SqliteStore(...)`` repr, no ``read_only=True``: the path the user gave and what to do."""
    import sqlite3

    monkeypatch.chdir(tmp_path)
    Path("empty.db").write_bytes(b"")
    assert_error(run("--store", "empty.db", "list"), 2)
    assert error_line(run("--store", "empty.db", "list")) == (
        "Error: empty.db is empty: it holds no session-memory database (check the path)"
    )
    with sqlite3.connect("other.db") as conn:
        conn.execute("CREATE TABLE notes (text)")
    conn.close()
    assert error_line(run("--store", "other.db", "show", "x")) == (
        "Error: other.db holds no session-memory tables: it is another program's SQLite database"
    )

    with Session("damaged.db").for_session("s") as session:
        session.append_messages([msg(f"m{i}", "some text " * 50) for i in range(200)])
    with sqlite3.connect("damaged.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(Path("damaged.db").read_bytes())
    data[8192:11192] = b"\xff" * 3000  # a page of the tables, overwritten
    Path("damaged.db").write_bytes(bytes(data))
    damaged = run("--store", "damaged.db", "show", "s")
    assert damaged.exit_code == 1
    assert error_line(damaged) == (
        "Error: damaged.db: database disk image is malformed (the file is damaged: restore it from a backup)"
    )

    Path("random.db").write_bytes(bytes(range(256)) * 64)  # what an encrypted file looks like
    assert error_line(run("--store", "random.db", "list")) == (
        "Error: random.db: this database is encrypted: set SESSIONS_KEY to its key"
    )

    with Session("old.db").for_session("s") as session:
        session.append_message(msg("m1", "hello"))
    with sqlite3.connect("old.db") as conn:
        conn.execute("PRAGMA user_version = 3")
    conn.close()
    old = run("--store", "old.db", "list")
    assert old.exit_code == 1
    assert re.fullmatch(
        r"Error: old\.db has schema version 3, older than this version's \d+: run `sessions migrate` on it to"
        r" upgrade it \(a read command never changes the file\)",
        error_line(old),
    )
    for result in (damaged, old, run("--store", "empty.db", "list")):
        assert "SqliteStore(" not in result.stderr and "read_only" not in result.stderr


def test_migrate_help_says_read_commands_never_upgrade():
    text = " ".join(run("migrate", "--help").stdout.split())
    assert "Any command upgrades" not in text
    assert (
        "The commands that only read (list, show, search, export, blocks, stats, recall backlog, prune --dry-run)"
        " never upgrade a store: on an older one they stop and say to run this." in text
    )


def test_a_line_that_is_not_json_names_the_place_once(tmp_path):
    dump = tmp_path / "cut.jsonl"
    dump.write_text('{"kind": "message", "session_id": "s", "message": {"id": "m1", "text": "abc')
    result = run("--store", str(tmp_path / "new.db"), "import", str(dump))
    assert result.exit_code == 2
    assert error_line(result) == (f"Error: {dump} line 1: not valid JSON: Unterminated string starting at character 72")


def test_import_refuses_a_message_stored_with_other_content(db, tmp_path):
    path, _ = db
    lines = run("--store", path, "export", SESSION).stdout.splitlines()
    changed = []
    for line in lines:
        record = json.loads(line)
        if record["kind"] == "message" and record["id"] in ("u1", "a1"):
            record["message"]["parts"] = [{"type": "text", "text": f"rewritten {record['id']}"}]
        changed.append(json.dumps(record))
    changed.append(
        json.dumps(
            {
                "kind": "message",
                "session_id": SESSION,
                "id": "u9",
                "parent_id": "u1",
                "created_at": "2026-01-01T00:00:00Z",
                "message": {"id": "u9", "role": "user", "parts": [{"type": "text", "text": "a new question"}]},
            }
        )
    )
    dump = tmp_path / "changed.jsonl"
    dump.write_text("\n".join(changed) + "\n")
    before = snapshot(SqliteStore(path), SESSION)

    expected = (
        f"Error: 2 messages of the input are stored already with other content ('{SESSION}': 'u1', 'a1');"
        " nothing was imported (--skip-conflicts keeps the stored ones and imports the rest)"
    )
    refused = run("--store", path, "import", str(dump))
    assert refused.exit_code == 1 and error_line(refused) == expected
    assert error_line(run("--store", path, "import", "--dry-run", str(dump))) == expected
    assert snapshot(SqliteStore(path), SESSION) == before  # nothing written

    kept = run("--store", path, "import", "--skip-conflicts", str(dump))
    assert kept.exit_code == 0, kept.stderr
    assert kept.stdout.strip().endswith("; kept as stored, with other content in the file: 2 messages ('u1', 'a1').")
    assert "stored 1 message" in kept.stdout
    with Session(path).for_session(SESSION) as session:
        assert session.get_message("u1").text == "Plan a trip to Lisbon in May"  # the stored one stays
        assert session.get_message("u9").text == "a new question"


def test_import_records_reports_conflicts(tmp_path):
    from sessions_core import ConflictError
    from sessions_core.transfer import export_lines, import_records

    store = SqliteStore(tmp_path / "a.db")
    Session(store).for_session("s").append_message(msg("m1", "original"))
    lines = list(export_lines(store, "s"))
    assert import_records(store, lines).conflicts == ()  # the same content: present, no conflict
    edited = [line.replace("original", "edited") for line in lines]
    with pytest.raises(ConflictError) as raised:
        import_records(store, edited)
    assert raised.value.conflicts == (("s", "m1"),)  # type: ignore[attr-defined]
    assert str(raised.value) == (
        "1 message of the input is stored already with other content ('s': 'm1'); nothing was imported"
        " (skip_conflicts=True keeps the stored ones and imports the rest)"
    )
    report = import_records(store, edited, skip_conflicts=True)
    assert report.conflicts == (("s", "m1"),) and report.present == {} and report.stored == {}
    store.close()


def test_an_import_removes_what_killed_imports_left_and_spares_a_running_one(db, tmp_path):
    """A killed ``sessions import`` leaves ``.NAME.*.importing`` with ``-wal``/``-shm``; the next
    import into that path deletes them, but not the file of an import still running (it holds a
    ``flock``) nor one written in the last minute."""
    import fcntl

    path, _ = db
    dump = tmp_path / "chat.jsonl"
    dump.write_text(run("--store", path, "export", SESSION).stdout)
    dead, running, recent = (tmp_path / f".fresh.db.{name}.importing" for name in ("dead1", "live1", "new1"))
    for leftover in (dead, running, recent):
        for end in ("", "-wal", "-shm"):
            Path(f"{leftover}{end}").write_bytes(b"x" * 1000)
    an_hour_ago = time.time() - 3600
    for leftover in (dead, running):
        os.utime(leftover, (an_hour_ago, an_hour_ago))
    held = os.open(running, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert run("--store", str(tmp_path / "fresh.db"), "import", str(dump)).exit_code == 0
    finally:
        os.close(held)
    left = sorted(p.name for p in tmp_path.glob(".fresh.db.*"))
    expected = [f"{leftover.name}{end}" for leftover in (running, recent) for end in ("", "-shm", "-wal")]
    assert left == sorted(expected)
    assert [m.id for m in Session(tmp_path / "fresh.db").for_session(SESSION).get_history()]
