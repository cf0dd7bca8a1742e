"""Batched append (``append_messages`` / ``Store.insert_messages``): one transaction for a chain
of messages, on every backend and mode."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sessions_core import LATEST, MessageValidationError, SessionMessage, TextPart
from sessions_core.stores.base import MessageRecord

from .builders import ids, msg
from .harness import skip_where_unsupported


def _session(s):
    return s.session if hasattr(s, "_loop") else s


def test_a_batch_is_stored_as_a_chain_under_the_latest_leaf(make_session):
    s = make_session()
    s.append_message(msg("m0"))
    results = s.append_messages([msg("m1"), msg("m2", role="assistant"), msg("m3")])
    assert [(r.inserted, r.message.id) for r in results] == [(True, "m1"), (True, "m2"), (True, "m3")]
    assert all(r.message.created_at is not None and r.message.created_at.tzinfo is not None for r in results)
    assert ids(s.get_history()) == ["m0", "m1", "m2", "m3"]
    assert s.get_latest_leaf().id == "m3"
    assert ids(s.get_branches("m0")) == ["m1"] and ids(s.get_branches("m1")) == ["m2"]
    assert s.get_path_length() == 4
    assert [r.message for r in results] == s.get_history()[1:]


def test_the_batch_keeps_depth_and_path_totals(make_session):
    one, batch = make_session("one"), make_session("batch")
    messages = [msg(f"m{i}", "word " * (i + 1)) for i in range(6)]
    for message in messages:
        one.append_message(message)
    batch.append_messages(messages)
    assert batch.get_path_length() == one.get_path_length() == 6
    for leaf in ("m2", "m5"):
        assert batch.get_token_estimate(leaf) == one.get_token_estimate(leaf)
        assert batch.get_recent_history(10**6, leaf_id=leaf).total_content_bytes == (
            one.get_recent_history(10**6, leaf_id=leaf).total_content_bytes
        )
    assert ids(batch.get_recent_history(1, min_recent_messages=2).messages) == ["m4", "m5"]


def test_parent_none_starts_a_new_root_and_an_explicit_parent_branches(make_session):
    s = make_session()
    s.append_messages([msg("a0"), msg("a1"), msg("a2")])
    s.append_messages([msg("b0"), msg("b1")], None)
    assert ids(s.get_history()) == ["b0", "b1"]
    assert ids(s.get_history("a2")) == ["a0", "a1", "a2"]
    s.append_messages([msg("c0"), msg("c1")], parent_id="a1")
    assert ids(s.get_history("c1")) == ["a0", "a1", "c0", "c1"]
    assert ids(s.get_branches("a1")) == ["a2", "c0"]
    assert s.get_latest_leaf().id == "c1"


def test_the_first_batch_of_an_empty_session_is_a_root(make_session):
    s = make_session()
    results = s.append_messages([msg("m0"), msg("m1")], LATEST)
    assert [r.inserted for r in results] == [True, True]
    assert ids(s.get_history()) == ["m0", "m1"]


def test_existing_ids_are_skipped_and_the_chain_continues_from_them(make_session):
    s = make_session()
    s.append_messages([msg("m0"), msg("m1"), msg("m2")])
    results = s.append_messages([msg("m1", "changed"), msg("n0"), msg("n0", "again"), msg("n1")], parent_id="m0")
    assert [(r.inserted, r.message.id) for r in results] == [(False, "m1"), (True, "n0"), (False, "n0"), (True, "n1")]
    assert results[0].message.text == "message m1" and results[0].message == s.get_message("m1")
    assert results[2].message.text == "message n0"
    assert ids(s.get_history("n1")) == ["m0", "m1", "n0", "n1"]
    assert ids(s.get_branches("m1")) == ["m2", "n0"]
    assert s.get_path_length("n1") == 4


def test_stored_skip_leaves_stored_ids_out_of_the_chain(make_session):
    s = make_session()
    s.append_messages([msg("m0"), msg("m1"), msg("m2")])
    results = s.append_messages(
        [msg("m1", "changed"), msg("n0"), msg("m0"), msg("n0", "again"), msg("n1")], stored="skip"
    )
    assert [(r.inserted, r.message.id) for r in results] == [
        (False, "m1"),
        (True, "n0"),
        (False, "m0"),
        (False, "n0"),
        (True, "n1"),
    ]
    assert results[0].message == s.get_message("m1") and results[3].message.text == "message n0"
    assert ids(s.get_history()) == ["m0", "m1", "m2", "n0", "n1"]  # under the latest leaf, not m1
    assert ids(s.get_branches("m1")) == ["m2"]
    assert s.get_latest_leaf().id == "n1" and s.get_path_length() == 5


def test_stored_skip_stores_what_appending_one_by_one_stores(make_session):
    one, batch = make_session("one"), make_session("batch")
    for s in (one, batch):
        s.append_messages([msg("a0"), msg("a1")])
        s.append_messages([msg("b0")], None)  # a new root: the latest leaf moves away from a1
    again = [msg("a0"), msg("a1"), msg("c0"), msg("a1"), msg("c1")]
    for message in again:
        one.append_message(message)
    results = batch.append_messages(again, stored="skip")
    assert [r.inserted for r in results] == [False, False, True, False, True]
    assert ids(batch.get_history()) == ids(one.get_history()) == ["b0", "c0", "c1"]
    assert ids(batch.get_history("a1")) == ["a0", "a1"]
    only_stored = batch.append_messages([msg("a0"), msg("c1")], stored="skip")
    assert [r.inserted for r in only_stored] == [False, False]
    assert ids(batch.get_history()) == ["b0", "c0", "c1"]
    under = batch.append_messages([msg("c0"), msg("d0")], parent_id="a0", stored="skip")
    assert [r.inserted for r in under] == [False, True]
    assert ids(batch.get_history("d0")) == ["a0", "d0"]
    with pytest.raises(ValueError, match="stored"):
        batch.append_messages([msg("e0")], stored="replace")  # type: ignore[arg-type]
    assert batch.get_message("e0") is None


def test_a_malformed_message_in_the_middle_stores_nothing(make_session):
    s = make_session()
    s.append_message(msg("m0"))
    events = []
    _session(s).subscribe(events.append)
    bad = {"id": "bad", "role": "robot", "parts": []}
    with pytest.raises(MessageValidationError, match="bad"):
        s.append_messages([msg("m1"), msg("m2"), bad, msg("m3")])
    with pytest.raises(MessageValidationError, match=r"messages\[1\]"):
        s.append_messages([msg("m1"), {"role": "user", "parts": []}])
    assert ids(s.get_history()) == ["m0"]
    assert all(s.get_message(name) is None for name in ("m1", "m2", "m3"))
    assert events == []


def test_compaction_ids_are_skipped(make_session):
    s = make_session()
    s.append_message(msg("m0"))
    results = s.append_messages([msg("m1"), msg("compaction_x", role="assistant"), msg("m2")])
    assert [(r.inserted, r.message.id) for r in results] == [(True, "m1"), (False, "compaction_x"), (True, "m2")]
    assert ids(s.get_history()) == ["m0", "m1", "m2"]
    assert s.get_message("compaction_x") is None
    only = s.append_messages([msg("compaction_y", role="assistant")])
    assert [(r.inserted, r.message.id) for r in only] == [(False, "compaction_y")]
    assert ids(s.get_history()) == ["m0", "m1", "m2"]


def test_results_equal_what_the_history_reads(make_session):
    s = make_session()
    earlier = datetime.now(timezone.utc) - timedelta(minutes=5)
    given = SessionMessage(id="m1", role="assistant", parts=[TextPart(text="hi")])
    results = s.append_messages(
        [
            msg("m0", createdAt=earlier.isoformat()),
            given,
            {
                "id": "m2",
                "role": "tool",
                "parts": [{"type": "tool-result", "toolCallId": "c", "toolName": "t", "output": 1}],
            },
        ]
    )
    assert [r.message for r in results] == s.get_history()
    assert results[0].message.created_at == earlier
    assert given.created_at is None  # the caller's object is not changed
    assert results[1].message.created_at >= results[0].message.created_at


def test_subscribers_get_one_event_per_message(make_session):
    s = make_session("feed")
    s.append_message(msg("m0"))
    events = []
    _session(s).subscribe(events.append)
    s.append_messages([msg("m1"), msg("m0"), msg("m2"), msg("compaction_z", role="assistant")])
    assert [(e.type, e.message.id, e.inserted) for e in events] == [
        ("append", "m1", True),
        ("append", "m0", False),
        ("append", "m2", True),
    ]
    assert {e.session_id for e in events} == {"feed"}
    assert [e.parent_id for e in events if e.inserted] == ["m0", "m0"]


def test_a_mirror_follows_a_batch(make_session):
    s = make_session()
    s.append_message(msg("m0"))
    mirrored: list[SessionMessage] = []

    def put(messages):
        mirrored[:] = messages

    _session(s).mirror(lambda: list(mirrored), put)
    s.append_messages([msg("m1"), msg("m2")])
    assert mirrored == s.get_history()


def test_an_empty_batch_is_a_no_op(make_session):
    s = make_session()
    s.append_message(msg("m0"))
    events = []
    _session(s).subscribe(events.append)
    assert s.append_messages([]) == []
    assert ids(s.get_history()) == ["m0"] and events == []


def test_automatic_compaction_is_checked_once_after_the_batch(make_session):
    s = make_session()
    calls = []

    def compact(messages, context):
        calls.append(ids(messages))
        return None

    _session(s).on_compaction(compact).compact_after(1)
    s.append_messages([msg(f"m{i}") for i in range(5)])
    assert calls == [["m0", "m1", "m2", "m3", "m4"]]
    s.append_messages([msg("m0"), msg("compaction_q", role="assistant")])  # nothing inserted: no check
    assert len(calls) == 1


def test_the_estimate_tracks_the_batch(make_session):
    s = make_session()
    _session(s).on_compaction(lambda messages, context: None).compact_after(10**6, token_counter=lambda m: 10 * len(m))
    s.append_message(msg("m0"))
    s.append_messages([msg("m1"), msg("m2"), msg("m3")])
    assert s.get_token_estimate() == 40
    s.append_messages([msg("b0"), msg("b1")], parent_id="m1")
    assert s.get_token_estimate("b1") == 40 and s.get_token_estimate("m3") == 40


def test_the_store_stores_nothing_when_a_record_fails(backend):
    store = backend.open()

    def record(name: str, role: Any = "user") -> MessageRecord:  # role=None: a row the store refuses
        return MessageRecord(name, role, f'{{"id":"{name}"}}', name, 1, 1_000 + len(name))

    [first] = store.insert_messages("s", [record("m0")], LATEST)
    assert first is not None and first.parent_id is None and first.totals.depth == 1
    with pytest.raises(Exception):  # noqa: B017  (whatever the store raises)
        store.insert_messages("s", [record("m1"), record("m2"), record("bad", None), record("m3")], "m0")
    assert store.get_message("s", "m1") is None and store.get_message("s", "m2") is None
    assert [entry.id for entry in store.path("s", "m0")] == ["m0"]
    results = store.insert_messages("s", [record("m0"), record("m1"), record("m2")], LATEST)
    assert results[0] is None
    assert [(r.parent_id, r.totals.depth, r.totals.tokens) for r in results[1:]] == [("m0", 2, 2), ("m1", 3, 3)]
    assert store.insert_messages("s", [], LATEST) == []
    store.close()


skip_where_unsupported(globals())
