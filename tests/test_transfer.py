"""The export/import library API (``sessions_core.transfer``) over SQLite and Postgres."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from sessions_core import Session, SessionManager, SqliteStore, StaticContext, Store, StoreError, StoreSearchContext
from sessions_core.errors import InvalidRecordError, SessionNotFoundError
from sessions_core.transfer import (
    EXPORT_FORMAT,
    FileLines,
    ImportReport,
    export_lines,
    export_session,
    import_into_new,
    import_records,
    record_line,
)

from .helpers import CoreOnlyStore, msg
from .postgres import postgres_url, require_postgres, temporary_schema

SESSION = "chat"


@pytest.fixture(params=["sqlite", "postgres"])
def new_store(request, tmp_path: Path) -> Callable[[], Store]:
    """Makes empty stores of one backend (each its own file or schema), closed afterwards."""
    if request.param == "postgres":
        require_postgres()
    made = 0
    with ExitStack() as stack:

        def make() -> Store:
            nonlocal made
            made += 1
            if request.param == "sqlite":
                store: Store = SqliteStore(tmp_path / f"store-{made}.db")
            else:
                from sessions_core.stores.postgres import PostgresStore

                schema = stack.enter_context(temporary_schema())
                store = PostgresStore(postgres_url(), schema=schema, max_size=2)
            stack.callback(store.close)
            return store

        yield make


def populate(store: Store) -> str:
    """A branched session with a compaction, a block, search entries and a cached prompt, and a
    manager session; the manager session's storage id."""
    session = (
        Session(store)
        .for_session(SESSION)
        .with_context("soul", provider=StaticContext("You are terse."))
        .with_context("memory", max_tokens=500)
        .with_context("knowledge", provider=StoreSearchContext())
        .with_cached_prompt()
    )
    session.append_message(msg("u1", "Plan a trip to Lisbon"))
    session.append_message(msg("a1", "Lisbon is lovely.", role="assistant"))
    session.append_message(msg("u2", "And the weather?"))
    session.append_message(msg("a2", "Warm.", role="assistant"))
    session.append_message(msg("a1b", "Porto, maybe?", role="assistant"), parent_id="u1")
    session.add_compaction("The user plans a trip.", "a1", "u2")
    session.replace_context_block("memory", "Likes coffee.")
    tools = {tool.name: tool for tool in session.tools()}
    tools["set_context"].invoke({"label": "knowledge", "key": "trams", "content": "Trams are yellow."})
    session.freeze_system_prompt()
    manager = SessionManager(store, namespace="team")
    info = manager.create("Trip planning", model="gpt-4o")
    manager.append(info.id, msg("x1", "hello team"))
    return f"team:{info.id}"


def contents(store: Any, session_id: str) -> dict[str, Any]:
    """What a round trip keeps of a session."""
    rows, after = [], 0
    while page := store.message_rows(session_id, after, 100):
        rows += [(row.id, row.parent_id, row.role, row.created_at_us, json.loads(row.content)) for _, row in page]
        after = page[-1][0]
    entries, after = [], 0
    while page := store.search_entry_rows(session_id, after, 100):
        entries += [(e.label, e.key, e.content) for e in page]
        after = page[-1].seq
    return {
        "messages": rows,
        "compactions": [tuple(c)[1:] for c in store.get_compactions(session_id)],
        "blocks": [(b.label, b.content) for b in store.list_blocks(session_id)],
        "prompt": store.get_cached_prompt(session_id),
        "entries": entries,
        "history": [m.id for m in Session(store).for_session(session_id).get_history()],
    }


def test_round_trip_into_another_store(new_store):
    source, target = new_store(), new_store()
    team = populate(source)
    report = import_records(target, export_session(source, SESSION))
    assert report == ImportReport(
        records=12,
        sessions=(SESSION,),
        stored={"message": 5, "compaction": 1, "block_version": 2, "block": 1, "prompt": 1, "search_entry": 1},
    )
    assert contents(target, SESSION) == contents(source, SESSION)
    assert [c.id for c in target.get_compactions(SESSION)] == [c.id for c in source.get_compactions(SESSION)]

    # A manager session keeps its registry row; lines (str or bytes) import like records.
    lines = list(export_lines(source, team))
    assert import_records(target, lines).stored == {"session": 1, "message": 1}
    [info] = SessionManager(target, namespace="team").list_sessions()
    assert (info.name, info.model) == ("Trip planning", "gpt-4o")
    again = import_records(target, [line.encode() for line in lines])
    assert again.stored == {} and again.present == {"session": 1, "message": 1}


def test_a_round_trip_reads_back_equal_bytes_and_times_included(new_store):
    source, target = new_store(), new_store()
    populate(source)
    image = bytes(range(256)) * 4
    Session(source).for_session(SESSION).append_message(
        {
            "id": "f1",
            "role": "user",
            "parts": [
                {"type": "file", "mediaType": "image/png", "data": image},
                {"type": "file", "mediaType": "text/plain", "data": "aGVsbG8="},
            ],
        }
    )
    import_records(target, export_lines(source, SESSION))
    stored = Session(target).for_session(SESSION).get_message("f1")
    assert stored.parts[0].data == image and stored.parts[1].data == "aGVsbG8="  # bytes stay bytes, str stays str
    assert contents(target, SESSION) == contents(source, SESSION)
    assert [(b.label, b.updated_at_us) for b in target.list_blocks(SESSION)] == [
        (b.label, b.updated_at_us) for b in source.list_blocks(SESSION)
    ]
    times = lambda store: [(e.key, e.created_at_us, e.updated_at_us) for e in store.search_entry_rows(SESSION)]  # noqa: E731
    assert times(target) == times(source)

    def without_export_time(store):
        return [{k: v for k, v in r.items() if k != "exported_at"} for r in export_session(store, SESSION)]

    assert without_export_time(target) == without_export_time(source)


def test_binary_parts_are_checked(new_store):
    store = new_store()
    record = {
        "kind": "message",
        "session_id": "s",
        "created_at": "2026-01-01T00:00:00+00:00",
        "message": {"id": "m", "role": "user", "parts": [{"type": "text", "text": "x"}]},
    }
    for binary, why in [([0], "not a file part"), ("0", "list of part indexes"), ([3], "not a file part")]:
        with pytest.raises(InvalidRecordError, match=why):
            import_records(store, [{**record, "binary_parts": binary}])


def test_importing_twice_stores_nothing_twice(new_store, tmp_path):
    source, target = new_store(), new_store()
    populate(source)
    dump = tmp_path / "chat.jsonl"
    dump.write_text("".join(export_lines(source, SESSION)), encoding="utf-8")
    first = import_records(target, FileLines(dump))
    second = import_records(target, FileLines(dump))
    assert second.stored == {} and second.present == first.stored
    assert contents(target, SESSION) == contents(source, SESSION)


def test_import_into_another_session_of_the_same_store(new_store):
    store = new_store()
    populate(store)
    records = list(export_session(store, SESSION))
    report = import_records(store, records, into="copy")
    assert report.sessions == ("copy",) and report.stored["message"] == 5
    copy, original = contents(store, "copy"), contents(store, SESSION)
    assert copy["messages"] == original["messages"] and copy["entries"] == original["entries"]
    assert copy["compactions"] == original["compactions"]
    # Compaction ids are unique in a store: the copy's overlay has its own id, the same every time.
    [copy_row], [original_row] = store.get_compactions("copy"), store.get_compactions(SESSION)
    assert copy_row.id != original_row.id
    assert import_records(store, records, into="copy").stored == {}
    assert [c.id for c in store.get_compactions("copy")] == [copy_row.id]


def test_a_dry_run_checks_and_writes_nothing(new_store):
    source, target = new_store(), new_store()
    populate(source)
    report = import_records(target, export_session(source, SESSION), dry_run=True)
    assert report == ImportReport(records=12, sessions=(SESSION,), dry_run=True)
    assert target.stats().sessions == 0


def test_a_bad_record_is_named_and_nothing_is_written(new_store):
    source, target = new_store(), new_store()
    populate(source)
    lines = list(export_lines(source, SESSION))
    for number, corrupt, reason in [
        (3, lambda r: {**r, "message": {**r["message"], "role": "robot"}}, "invalid message 'a1': role"),
        (4, lambda r: {**r, "parent_id": "ghost"}, "has parent 'ghost'"),
        (8, lambda r: {**r, "kind": "wat"}, "unknown kind 'wat'"),
    ]:
        bad = list(lines)
        bad[number - 1] = record_line(corrupt(json.loads(bad[number - 1])))
        with pytest.raises(InvalidRecordError) as caught:
            import_records(target, bad)
        assert caught.value.line == number and reason in caught.value.reason
        assert str(caught.value).startswith(f"line {number}: ")
    truncated = lines[:5] + ["\n", lines[5][:-9] + "\n"]  # a blank line counts as a line
    with pytest.raises(InvalidRecordError, match=r"^line 7: not valid JSON"):
        import_records(target, truncated)
    with pytest.raises(InvalidRecordError, match=r"^line 1: not UTF-8"):
        import_records(target, [b"\xff\n"])
    assert target.stats().sessions == 0


def test_import_into_a_new_store_in_one_pass(new_store):
    source, two_passes, one_pass = new_store(), new_store(), new_store()
    populate(source)
    lines = list(export_lines(source, SESSION))
    assert import_into_new(one_pass, lines) == import_records(two_passes, lines)
    assert contents(one_pass, SESSION) == contents(two_passes, SESSION) == contents(source, SESSION)
    bad = [*lines[:3], record_line({**json.loads(lines[3]), "parent_id": "ghost"}), *lines[4:]]
    with pytest.raises(InvalidRecordError, match="^line 4: .*has parent 'ghost'"):
        import_into_new(new_store(), bad)  # the records before it may be written: the store is dropped
    with pytest.raises(ValueError, match="non-empty"):
        import_into_new(one_pass, [], into="")
    with pytest.raises(TypeError, match="not one string"):
        import_into_new(one_pass, lines[0])


def test_export_records_and_lines(new_store):
    store = new_store()
    populate(store)
    records = list(export_session(store, SESSION))
    assert [r["kind"] for r in records] == ["session"] + ["message"] * 5 + [
        "compaction",
        "block_version",
        "block_version",
        "block",
        "prompt",
        "search_entry",
    ]
    assert records[0]["format"] == EXPORT_FORMAT and records[0]["registry"] is None
    lines = list(export_lines(store, SESSION))
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    assert [json.loads(line) for line in lines[1:]] == records[1:]  # the header's time differs
    assert lines[1] == json.dumps(records[1], ensure_ascii=False, separators=(",", ":")) + "\n"
    with pytest.raises(SessionNotFoundError, match="unknown session 'nope'"):
        export_session(store, "nope")  # at once, not when iterated


def test_a_store_without_inspection_raises_store_error():
    store = CoreOnlyStore()
    Session(store).for_session(SESSION).append_message(msg("u1"))  # a working store otherwise
    with pytest.raises(StoreError, match="InspectableStore"):
        export_session(store, SESSION)
    with pytest.raises(StoreError, match="InspectableStore"):
        import_records(store, [])
    store.close()


def test_into_must_name_a_session_and_lines_are_not_one_string():
    store = SqliteStore(":memory:")
    with pytest.raises(ValueError, match="non-empty"):
        import_records(store, [], into="")
    with pytest.raises(TypeError, match="not one string"):
        import_records(store, record_line({"kind": "prompt", "session_id": "x", "prompt": "p"}))
    store.close()
