"""History contract: append, tree shape, reads, writes, streaming, byte budgets."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sessions_core import InvalidParentError, MessageValidationError, SessionMessage, TextPart

from .builders import ids, msg
from .harness import skip_where_unsupported


def chain(session, *names: str) -> None:
    for name in names:
        session.append_message(msg(name))


# -- append and idempotency ----------------------------------------------------------------


def test_append_returns_the_stored_message(make_session):
    s = make_session()
    result = s.append_message(msg("m0", "hello"))
    assert result.inserted is True
    assert isinstance(result.message, SessionMessage)
    assert result.message.id == "m0" and result.message.text == "hello"
    assert result.message.created_at is not None and result.message.created_at.tzinfo is not None
    assert s.get_message("m0") == result.message


def test_append_is_idempotent_by_id(make_session):
    s = make_session()
    chain(s, "m0", "m1")
    again = s.append_message(msg("m0", "changed"), parent_id="m1")
    assert again.inserted is False
    assert again.message.text == "message m0"
    assert s.get_message("m0").text == "message m0"
    assert ids(s.get_history()) == ["m0", "m1"]
    assert s.get_path_length() == 2


def test_append_accepts_models_and_camel_case(make_session):
    s = make_session()
    s.append_message(SessionMessage(id="a", role="user", parts=[TextPart(text="hi")]))
    s.append_message(
        {
            "id": "b",
            "role": "assistant",
            "parts": [
                {"type": "tool-call", "toolCallId": "c1", "toolName": "weather", "input": {"city": "Paris"}},
                {"type": "tool-weather", "toolCallId": "c1", "state": "output-available", "output": "sun"},
                {"type": "step-start"},
            ],
            "metadata": {"model": "x"},
            "custom": [1, 2],
        }
    )
    stored = s.get_message("b")
    assert stored.parts[0].tool_call_id == "c1" and stored.parts[0].input == {"city": "Paris"}
    assert stored.parts[1].type == "tool-weather" and stored.parts[1].output == "sun"
    assert stored.metadata == {"model": "x"}
    dumped = stored.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert dumped["parts"][0] == {
        "type": "tool-call",
        "toolCallId": "c1",
        "toolName": "weather",
        "input": {"city": "Paris"},
    }
    assert dumped["parts"][2] == {"type": "step-start"}
    assert dumped["custom"] == [1, 2]


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"role": "user", "parts": []}, "id"),
        ({"id": "x", "role": "robot", "parts": []}, "role"),
        ({"id": "x", "role": "user", "parts": "hello"}, "parts"),
        ({"id": "x", "role": "user", "parts": [{"text": "no type"}]}, "parts.0"),
        ({"id": "x", "role": "user", "parts": [{"type": "text"}]}, "parts.0.text"),
        ({"id": "x", "role": "user", "parts": [{"type": "tool-call", "toolName": "f"}]}, "parts.0.toolCallId"),
        ({"id": "", "role": "user", "parts": []}, "id"),
    ],
)
def test_malformed_messages_raise_and_store_nothing(make_session, bad, field):
    s = make_session()
    s.append_message(msg("ok"))
    with pytest.raises(MessageValidationError) as error:
        s.append_message(bad)
    assert field in str(error.value)
    assert ids(s.get_history()) == ["ok"]
    assert s.get_path_length() == 1


def test_compaction_ids_are_never_stored(make_session):
    s = make_session()
    chain(s, "m0")
    result = s.append_message(msg("compaction_abc", "echoed summary", role="assistant"))
    assert result.inserted is False
    assert s.get_message("compaction_abc") is None
    assert ids(s.get_history()) == ["m0"]


# -- tree shape ----------------------------------------------------------------------------


def test_default_parent_is_the_latest_leaf(make_session):
    s = make_session()
    chain(s, "m0", "m1", "m2")
    assert ids(s.get_history()) == ["m0", "m1", "m2"]
    assert s.get_latest_leaf().id == "m2"
    assert s.get_path_length() == 3


def test_parent_none_starts_a_new_root(make_session):
    s = make_session()
    chain(s, "m0", "m1")
    s.append_message(msg("r"), parent_id=None)
    assert ids(s.get_history()) == ["r"]
    s.append_message(msg("r1"))
    assert ids(s.get_history()) == ["r", "r1"]
    assert ids(s.get_history("m1")) == ["m0", "m1"]


def test_an_unknown_parent_is_refused_naming_it(make_session):
    """The reference stores the message as a new root, silently; a typo'd parent is refused."""
    s = make_session()
    chain(s, "m0")
    with pytest.raises(InvalidParentError, match="'nope'"):
        s.append_message(msg("x"), parent_id="nope")
    with pytest.raises(InvalidParentError, match="'nope'"):
        s.append_messages([msg("y"), msg("z")], parent_id="nope")
    assert s.get_message("x") is None and s.get_message("y") is None
    assert ids(s.get_history()) == ["m0"]
    s.append_message(msg("m0"), parent_id="nope")  # a stored message: the re-append stores nothing
    s.append_message(msg("r"), parent_id=None)  # None still starts a new root
    assert ids(s.get_history()) == ["r"]


def test_a_parent_in_another_session_is_refused(make_session):
    a = make_session("a")
    b = make_session("b", store=a.session.store if hasattr(a, "_loop") else a.store)
    a.append_message(msg("pa"))
    with pytest.raises(InvalidParentError, match="'pa'"):
        b.append_message(msg("child"), parent_id="pa")
    assert b.get_history() == []


def test_a_compaction_of_ids_of_another_session_is_refused(make_session):
    a = make_session("a")
    b = make_session("b", store=a.session.store if hasattr(a, "_loop") else a.store)
    chain(a, "a0", "a1")
    chain(b, "b0")
    with pytest.raises(InvalidParentError, match="from_message_id 'a0'"):
        b.add_compaction("summary", "a0", "b0")
    with pytest.raises(InvalidParentError, match="to_message_id 'a1'"):
        b.add_compaction("summary", "b0", "a1")
    assert b.get_compactions() == []


def test_branches_and_reading_a_branch(make_session):
    s = make_session()
    chain(s, "m0", "m1")
    s.append_message(msg("m1b"), parent_id="m0")
    assert sorted(ids(s.get_branches("m0"))) == ["m1", "m1b"]
    assert ids(s.get_branches("m0")) == ["m1", "m1b"]  # oldest first
    assert s.get_latest_leaf().id == "m1b"
    assert ids(s.get_history()) == ["m0", "m1b"]
    assert ids(s.get_history("m1")) == ["m0", "m1"]
    s.append_message(msg("m2"), parent_id="m1")
    assert ids(s.get_history()) == ["m0", "m1", "m2"]
    assert s.get_branches("m2") == []
    assert s.get_branches("unknown") == []


def test_latest_leaf_ties_go_to_the_latest_insert(make_session):
    s = make_session()
    moment = datetime(2025, 1, 1, tzinfo=timezone.utc)
    s.import_message(msg("root"), parent_id=None, created_at=moment)
    s.import_message(msg("a"), parent_id="root", created_at=moment)
    s.import_message(msg("b"), parent_id="root", created_at=moment)
    assert s.get_latest_leaf().id == "b"
    s.import_message(msg("older"), parent_id="root", created_at=moment - timedelta(seconds=1))
    assert s.get_latest_leaf().id == "b"


def test_the_latest_leaf_is_read_with_its_totals_and_its_path(make_session):
    s = make_session()
    raw = getattr(s, "session", s)  # the store's answer, under either mode's session
    store, key = raw.store, raw.session_id
    assert store.latest_leaf_totals(key) is None and not store.short_latest_path_contents(key, 10)
    assert s.get_path_length() == 0 and s.get_token_estimate() == 0
    chain(s, "m0", "m1", "m2")
    s.append_message(msg("b1", "a longer branch message"), parent_id="m0")
    leaf, totals = store.latest_leaf_totals(key)
    assert leaf == s.get_latest_leaf().id == "b1"
    assert totals == store.path_totals(key, "b1") and totals.depth == 2
    latest_path = store.short_latest_path_contents(key, 10)
    assert latest_path == store.short_path_contents(key, "b1", 10) and len(latest_path) == 2
    assert store.short_latest_path_contents(key, 1) is None  # longer than the limit
    assert s.get_path_length() == 2 and s.get_token_estimate() == s.get_token_estimate("b1") == totals.tokens
    s.delete_messages(["b1"])
    assert store.latest_leaf_totals(key)[0] == "m2"
    assert s.get_path_length() == 3 and s.get_token_estimate() == store.path_totals(key, "m2").tokens


def test_the_overlays_are_read_with_a_leaf_and_its_totals(make_session):
    """``overlays_and_totals``: the overlays, and the leaf (given, or the latest) with the totals
    of its path; ``None`` for no such leaf."""
    s = make_session()
    raw = getattr(s, "session", s)
    store, key = raw.store, raw.session_id
    assert store.overlays_and_totals(key, None) == ([], None)
    chain(s, "m0", "m1", "m2", "m3")
    assert store.overlays_and_totals(key, None) == ([], ("m3", store.path_totals(key, "m3")))
    assert store.overlays_and_totals(key, "m1") == ([], ("m1", store.path_totals(key, "m1")))
    assert store.overlays_and_totals(key, "missing") == ([], None)
    s.add_compaction("summary", "m1", "m2")
    overlays, leaf = store.overlays_and_totals(key, None)
    assert [o.compaction.summary for o in overlays] == ["summary"] and leaf == ("m3", store.path_totals(key, "m3"))


def test_the_overlays_are_read_with_a_short_path(make_session):
    """``overlays_and_short_path``: no overlays and the path's contents (of the latest leaf or
    a given one; ``None`` when longer than the limit); with overlays, them and no path."""
    s = make_session()
    raw = getattr(s, "session", s)
    store, key = raw.store, raw.session_id
    assert store.overlays_and_short_path(key, None, 10)[0] == [] and not store.overlays_and_short_path(key, None, 10)[1]
    chain(s, "m0", "m1", "m2", "m3")
    assert store.overlays_and_short_path(key, None, 10) == ([], store.short_path_contents(key, "m3", 10))
    assert store.overlays_and_short_path(key, "m1", 10) == ([], store.short_path_contents(key, "m1", 10))
    assert store.overlays_and_short_path(key, None, 3) == ([], None)
    missing = store.overlays_and_short_path(key, "missing", 10)
    assert missing[0] == [] and not missing[1]  # no rows, or None: get_history("missing") reads on
    s.add_compaction("summary", "m1", "m2")
    overlays, path = store.overlays_and_short_path(key, None, 10)
    assert [o.compaction.summary for o in overlays] == ["summary"] and path is None
    assert [m.id for m in s.get_history()][0] == "m0" and len(s.get_history()) == 3


def test_import_keeps_the_given_time(make_session):
    s = make_session()
    moment = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
    result = s.import_message(msg("old"), parent_id=None, created_at=moment)
    assert result.inserted and result.message.created_at == moment
    assert s.get_message("old").created_at == moment


def test_given_created_at_is_kept_exactly(make_session):
    s = make_session()
    moment = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
    s.append_message(msg("m", createdAt=moment.isoformat()))
    assert s.get_message("m").created_at == moment


def test_interior_leaf_gives_the_path_to_it(make_session):
    s = make_session()
    chain(s, "m0", "m1", "m2", "m3")
    assert ids(s.get_history("m1")) == ["m0", "m1"]
    assert s.get_path_length("m2") == 3


def test_unknown_leaf_and_empty_session(make_session):
    s = make_session()
    assert s.get_history() == []
    assert s.get_latest_leaf() is None
    assert s.get_path_length() == 0
    assert s.get_message("nope") is None
    chain(s, "m0")
    assert s.get_history("nope") == []
    assert s.get_path_length("nope") == 0
    assert s.get_history("") == s.get_history()


# -- update, delete, clear -----------------------------------------------------------------


def test_update_replaces_content_and_keeps_parent_and_time(make_session):
    s = make_session()
    chain(s, "m0", "m1", "m2")
    before = s.get_message("m1")
    assert s.update_message(msg("m1", "rewritten text", role="assistant")) is True
    after = s.get_message("m1")
    assert after.text == "rewritten text" and after.role == "assistant"
    assert after.created_at == before.created_at
    assert ids(s.get_history()) == ["m0", "m1", "m2"]
    assert ids(s.search("rewritten")) == ["m1"]
    assert s.search("message m1", match="all") == []


def _large_text(marker: str) -> str:
    """Over 1 MiB of JSON (what SQLite writes in place), with words, CJK, escapes and an emoji."""
    return f'{marker} 東京 "quoted" \\ tab\t 🙂 ' + " ".join(f"word{i}" for i in range(150_000)) + " closing"


def test_a_message_over_a_mebibyte_reads_back_exactly_everywhere(make_session):
    s = make_session()
    large = _large_text("opening")
    s.append_messages([msg("m0"), msg("large", large, metadata={"k": "v"}), msg("m2")])
    stored = s.get_message("large")
    assert stored.text == large and stored.metadata == {"k": "v"}
    assert s.get_history()[1] == stored
    assert [m.id for m in s.history(newest_first=True)] == ["m2", "large", "m0"]
    assert s.get_recent_history(10 << 20, min_recent_messages=3).messages[1] == stored
    assert s.get_branches("m0") == [stored]
    [hit] = s.search("opening")
    assert (hit.id, hit.content) == ("large", large)
    # Rewritten small, then large again: each read sees the newest text only.
    assert s.update_message(msg("large", "now small"))
    assert s.get_message("large").text == "now small" and ids(s.search("opening")) == []
    other = _large_text("reopened")
    assert s.update_message(msg("large", other))
    assert s.get_history()[1].text == other and ids(s.search("reopened")) == ["large"]
    assert s.delete_messages(["large"]) == ["large"]
    assert s.get_message("large") is None and s.search("reopened") == []


def test_messages_over_a_mebibyte_in_one_batch_keep_their_order(make_session):
    s = make_session()
    first, second = _large_text("first"), _large_text("second")
    s.append_messages([msg("m0"), msg("a", first), msg("b", second), msg("m3"), msg("c", first + "!")])
    assert [(m.id, m.text) for m in s.get_history()] == [
        ("m0", "message m0"),
        ("a", first),
        ("b", second),
        ("m3", "message m3"),
        ("c", first + "!"),
    ]
    assert ids(s.search("second")) == ["b"]


def test_update_of_a_missing_id_changes_nothing(make_session):
    s = make_session()
    chain(s, "m0")
    assert s.update_message(msg("ghost", "phantom words")) is False
    assert s.get_message("ghost") is None
    assert s.search("phantom") == []
    assert ids(s.get_history()) == ["m0"]


@pytest.mark.parametrize(
    "deleted, expected",
    [(["m1"], ["m2"]), (["m0"], ["m1", "m2"]), (["m2"], ["m0", "m1"]), (["zz"], ["m0", "m1", "m2"])],
)
def test_delete_does_not_reparent(make_session, deleted, expected):
    s = make_session()
    chain(s, "m0", "m1", "m2")
    s.delete_messages(deleted)
    assert ids(s.get_history()) == expected
    assert s.get_path_length() == len(expected)
    for gone in deleted:
        assert s.get_message(gone) is None


def test_delete_returns_the_ids_deleted_and_updates_search(make_session):
    s = make_session()
    s.append_message(msg("m0", "alpha"))
    s.append_message(msg("m1", "beta"))
    assert s.delete_messages(["m1", "nope"]) == ["m1"]
    assert s.search("beta") == []
    assert ids(s.search("alpha")) == ["m0"]


def test_reusing_a_deleted_id_does_not_reconnect_orphans(make_session):
    s = make_session()
    chain(s, "m0", "m1", "m2")
    s.delete_messages(["m1"])
    s.append_message(msg("m1"))
    assert ids(s.get_history()) == ["m2", "m1"]
    assert s.get_path_length() == 2


def test_clear_removes_messages_and_compactions_of_this_session_only(make_session):
    a = make_session("a")
    store = a.session.store if hasattr(a, "_loop") else a.store
    b = make_session("b", store=store)
    chain(a, "m0", "m1")
    chain(b, "m0", "n1")
    a.add_compaction("summary", "m0", "m1")
    a.clear_messages()
    assert a.get_history() == [] and a.get_compactions() == [] and a.search("message") == []
    assert ids(b.get_history()) == ["m0", "n1"]
    assert len(b.search("message")) == 2
    chain(a, "fresh")
    assert ids(a.get_history()) == ["fresh"]


def test_the_same_id_in_two_sessions(make_session):
    a = make_session("a")
    store = a.session.store if hasattr(a, "_loop") else a.store
    b = make_session("b", store=store)
    assert a.append_message(msg("same", "from a")).inserted
    assert b.append_message(msg("same", "from b")).inserted
    assert a.get_message("same").text == "from a"
    assert b.get_message("same").text == "from b"
    a.delete_messages(["same"])
    assert b.get_message("same").text == "from b"


# -- streaming reads -----------------------------------------------------------------------


def test_history_streams_the_path_in_both_directions(make_session):
    s = make_session()
    names = [f"m{i}" for i in range(450)]  # more than two fetch chunks
    chain(s, *names)
    s.append_message(msg("side"), parent_id="m10")
    assert ids(s.history("m449")) == names
    assert ids(s.history("m449", newest_first=True)) == names[::-1]
    assert ids(s.history()) == names[:11] + ["side"]


def test_history_reads_the_same_either_side_of_one_fetch(make_session):
    """A path of up to one fetch chunk is read in one statement, a longer one in chunks: both
    give the whole path, root first, file payloads put back."""
    s = make_session()
    limit = (s.session if hasattr(s, "_loop") else s).store.fetch_chunk_rows
    s.append_message({"id": "m0", "role": "user", "parts": [{"type": "file", "mediaType": "x/y", "data": b"\x00\x01"}]})
    chain(s, *[f"m{i}" for i in range(1, limit - 1)])
    for n in (limit - 1, limit, limit + 1, limit + 2):
        names = [f"m{i}" for i in range(n)]
        history = s.get_history()
        assert ids(history) == names == ids(s.history()) == ids(s.get_history(raw=True))
        assert history[0].parts[0].data == b"\x00\x01"
        assert ids(s.get_history(f"m{n - 2}")) == names[:-1]
        s.append_message(msg(f"m{n}"))
    assert s.get_history("missing") == []


def test_history_early_break(make_session):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(300)])
    seen = []
    for message in s.history(newest_first=True):
        seen.append(message.id)
        if len(seen) == 3:
            break
    assert seen == ["m299", "m298", "m297"]
    assert s.get_path_length() == 300  # the store is still usable


# -- byte budget ---------------------------------------------------------------------------


def _sizes(s, names):
    return {
        n: len(s.session.store.get_message(s.session.session_id, n).content.encode())
        if hasattr(s, "_loop")
        else len(s.store.get_message(s.session_id, n).content.encode())
        for n in names
    }


def test_recent_history_byte_budget(make_session):
    s = make_session()
    names = [f"m{i}" for i in range(6)]
    for n in names:
        s.append_message(msg(n, "x" * 50))
    size = _sizes(s, names)["m0"]
    total = size * 6
    recent = s.get_recent_history(size * 2)
    assert ids(recent.messages) == ["m4", "m5"] and recent.truncated is True
    assert recent.total_content_bytes == total
    whole = s.get_recent_history(total)
    assert ids(whole.messages) == names and whole.truncated is False
    assert ids(s.get_recent_history(0).messages) == ["m5"]
    assert ids(s.get_recent_history(0, min_recent_messages=3).messages) == ["m3", "m4", "m5"]
    assert ids(s.get_recent_history(size * 2 + 1, leaf_id="m2").messages) == ["m1", "m2"]


def test_recent_history_stops_at_the_first_row_that_does_not_fit(make_session):
    s = make_session()
    s.append_message(msg("small0", "a"))
    s.append_message(msg("big", "b" * 500))
    s.append_message(msg("small1", "c"))
    s.append_message(msg("small2", "d"))
    small = _sizes(s, ["small2"])["small2"]
    recent = s.get_recent_history(small * 3)
    assert ids(recent.messages) == ["small1", "small2"]


def test_recent_history_of_an_empty_session(make_session):
    s = make_session()
    recent = s.get_recent_history(1000)
    assert recent.messages == [] and recent.truncated is False and recent.total_content_bytes == 0


# -- persistence ---------------------------------------------------------------------------


@pytest.mark.usefixtures("persistent_backend")
def test_a_new_store_on_the_same_database_sees_everything(make_session):
    s = make_session("p")
    chain(s, "m0", "m1")
    s.append_message(msg("m1b"), parent_id="m0")
    again = make_session("p")
    assert ids(again.get_history()) == ["m0", "m1b"]
    assert ids(again.get_history("m1")) == ["m0", "m1"]
    again.append_message(msg("m2"))
    assert ids(s.get_history()) == ["m0", "m1b", "m2"]


skip_where_unsupported(globals())
