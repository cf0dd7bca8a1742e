"""SessionManager contract: registry, ordering, message conveniences, fork and split, usage,
cross-session search and ``session_search``, builder propagation, persistence and isolation
(between the sessions of one manager, and between namespaces sharing a store).

One module over 500 lines because it is one contract: its tests share the seeded sessions and
the helpers above them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from sessions_core import (
    CompactResult,
    SessionInfo,
    StaticContext,
    StoreSearchContext,
)

from .builders import ids, msg, plain_hits, untimed
from .harness import skip_where_unsupported

SPLIT_PREFIX = "[Context from previous session]\n\n"
SESSION_SEARCH_DESCRIPTION = "Search past conversations for relevant context. Searches across all sessions."
SESSION_SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "Search query"}},
    "required": ["query"],
}


def raw(obj: Any) -> Any:
    """The object behind an async driver (the object itself in sync mode)."""
    return getattr(obj, "target", obj)


def key(manager: Any, session_id: str) -> str:
    """The id a manager's session is stored under."""
    return raw(manager).get_session(session_id).session_id


def texts(messages: Any) -> list[str]:
    return [m.text for m in messages]


def summarize_all_but_last(messages, context):
    """A compaction function: one summary over every stored message but the last."""
    stored = [m for m in messages if not m.id.startswith("compaction_")]
    if len(stored) < 3:
        return None
    return CompactResult(f"summary of {len(stored) - 1}", stored[0].id, stored[-2].id)


class SkillBook:
    """A skill collection held in memory (``get``/``load``/``set``)."""

    def __init__(self, skills: dict[str, str] | None = None) -> None:
        self.skills = dict(skills or {})

    def get(self) -> str | None:
        return "\n".join(f"- {k}" for k in sorted(self.skills)) or None

    def load(self, key: str) -> str | None:
        return self.skills.get(key)

    def set(self, key: str, content: str, description: str | None = None) -> None:
        self.skills[key] = content


# -- lifecycle -----------------------------------------------------------------------------


def test_create_returns_the_registered_session(make_manager):
    m = make_manager()
    info = m.create("Chat", model="gpt-x", source="web")
    assert isinstance(info, SessionInfo)
    assert (info.name, info.model, info.source, info.parent_session_id) == ("Chat", "gpt-x", "web", None)
    assert (info.input_tokens, info.output_tokens, info.estimated_cost, info.end_reason) == (0, 0, 0.0, None)
    assert info.created_at.tzinfo is not None and info.created_at == info.updated_at
    assert m.get(info.id) == info
    plain = m.create("Plain")
    assert (plain.model, plain.source, plain.parent_session_id) == (None, None, None)
    assert plain.id != info.id
    assert m.create("Chat").id not in (info.id, plain.id)
    assert m.get("no-such-session") is None
    assert m.get_history(info.id) == [] and m.get_message_count(info.id) == 0


def test_list_returns_every_session(make_manager):
    m = make_manager()
    assert m.list_sessions() == []
    made = [m.create(f"s{i}") for i in range(3)]
    listed = m.list_sessions()
    assert {s.id for s in listed} == {s.id for s in made}
    assert all(isinstance(s, SessionInfo) for s in listed)


def test_rename(make_manager):
    m = make_manager()
    info = m.create("old")
    renamed = m.rename(info.id, "new")
    assert renamed.name == "new" and m.get(info.id).name == "new"
    assert renamed.updated_at > info.updated_at and renamed.created_at == info.created_at
    assert m.rename("missing", "x") is None
    assert m.get("missing") is None and len(m.list_sessions()) == 1


def test_delete_removes_the_session_and_everything_it_stored(make_manager):
    m = make_manager().with_context("memory").with_context("notes", provider=StoreSearchContext()).with_cached_prompt()
    gone, kept = m.create("gone").id, m.create("kept").id
    for sid, word in ((gone, "walrus"), (kept, "otter")):
        m.append(sid, msg("m0", f"{word} hello"))
        m.append(sid, msg("m1", f"{word} reply", role="assistant"))
        m.add_compaction(sid, f"{word} summary", "m0", "m1")
        s = m.get_session(sid)
        s.replace_context_block("memory", f"{word} fact")
        tools = {t.name: t for t in s.tools()}
        assert tools["set_context"].invoke({"label": "notes", "content": f"{word} note"}).startswith("Indexed")
        s.freeze_system_prompt()
        m.add_usage(sid, 5, 5, 0.1)
    store, gone_key = raw(m).store, key(m, gone)
    before = raw(m).get_session(gone)
    assert store.get_cached_prompt(gone_key) is not None and store.count_search_entries(gone_key, "notes") == 1

    assert m.delete(gone) is True
    assert m.get(gone) is None and [s.id for s in m.list_sessions()] == [kept]
    assert store.get_message(gone_key, "m0") is None and store.get_message(gone_key, "m1") is None
    assert store.get_compactions(gone_key) == []
    assert store.get_block(gone_key, "memory") is None
    assert store.get_cached_prompt(gone_key) is None
    assert store.count_search_entries(gone_key, "notes") == 0
    assert store.search_entries(gone_key, "notes", "walrus", 10) == []
    assert m.search("walrus") == []
    assert m.get_history(gone) == [] and m.get_compactions(gone) == []
    again = m.get_session(gone)
    assert raw(again) is not before
    assert again.get_context_block("memory").content == ""
    assert again.get_context_block("notes").content == ""
    assert m.delete(gone) is False

    assert texts(m.get_history(kept)) == ["otter summary"]
    assert m.get_session(kept).get_context_block("memory").content == "otter fact"
    assert [h.session_id for h in m.search("otter")] == [kept, kept]
    assert m.get(kept).input_tokens == 5


def test_get_session_is_cached_per_id(make_manager):
    m = make_manager()
    a, b = m.create("a").id, m.create("b").id
    assert raw(m.get_session(a)) is raw(m.get_session(a))
    assert raw(m.get_session(a)) is not raw(m.get_session(b))
    # Like the reference, get_session does not require a registered session.
    loose = m.get_session("never-created")
    loose.append_message(msg("x"))
    assert ids(m.get_history("never-created")) == ["x"]
    assert m.get("never-created") is None


# -- ordering and touching -----------------------------------------------------------------

TOUCHING = {
    "append": lambda m, s: m.append(s, msg("t1")),
    "upsert an existing message": lambda m, s: m.upsert(s, msg("m0", "changed")),
    "upsert a new message": lambda m, s: m.upsert(s, msg("t1")),
    "append_all": lambda m, s: m.append_all(s, [msg("t1"), msg("t2")]),
    "append_all of nothing": lambda m, s: m.append_all(s, []),
    "clear_messages": lambda m, s: m.clear_messages(s),
    "delete_messages": lambda m, s: m.delete_messages(s, ["m0"]),
    "rename": lambda m, s: m.rename(s, "renamed"),
    "add_usage": lambda m, s: m.add_usage(s, 1, 1, 0.01),
}

NOT_TOUCHING = {
    "get": lambda m, s: m.get(s),
    "list_sessions": lambda m, s: m.list_sessions(),
    "get_session": lambda m, s: m.get_session(s),
    "get_history": lambda m, s: m.get_history(s),
    "get_history at a leaf": lambda m, s: m.get_history(s, "m0"),
    "get_message_count": lambda m, s: m.get_message_count(s),
    "get_branches": lambda m, s: m.get_branches(s, "m0"),
    "add_compaction": lambda m, s: m.add_compaction(s, "sum", "m0", "m0"),
    "get_compactions": lambda m, s: m.get_compactions(s),
    "search": lambda m, s: m.search("message"),
}


def _three_sessions(m):
    oldest = m.create("oldest").id
    m.append(oldest, msg("m0"))
    middle, newest = m.create("middle").id, m.create("newest").id
    assert [s.id for s in m.list_sessions()] == [newest, middle, oldest]
    return oldest, middle, newest


@pytest.mark.parametrize("operation", list(TOUCHING))
def test_writes_touch_the_session(make_manager, operation):
    m = make_manager()
    oldest, middle, newest = _three_sessions(m)
    before = m.get(oldest)
    TOUCHING[operation](m, oldest)
    after = m.get(oldest)
    assert after.updated_at > before.updated_at and after.created_at == before.created_at
    assert [s.id for s in m.list_sessions()] == [oldest, newest, middle]


@pytest.mark.parametrize("operation", list(NOT_TOUCHING))
def test_reads_do_not_touch_the_session(make_manager, operation):
    m = make_manager()
    oldest, middle, newest = _three_sessions(m)
    before = m.list_sessions()
    NOT_TOUCHING[operation](m, oldest)
    assert m.list_sessions() == before


def test_list_is_most_recently_updated_first(make_manager):
    m = make_manager()
    a, b, c = (m.create(n).id for n in "abc")
    assert [s.id for s in m.list_sessions()] == [c, b, a]
    m.append(a, msg("x"))
    assert [s.id for s in m.list_sessions()] == [a, c, b]
    m.rename(b, "b2")
    assert [s.id for s in m.list_sessions()] == [b, a, c]
    m.get_history(c)
    m.get_message_count(c)
    assert [s.id for s in m.list_sessions()] == [b, a, c]
    listed = m.list_sessions()
    assert all(x.updated_at >= y.updated_at for x, y in zip(listed, listed[1:], strict=False))


# -- message conveniences ------------------------------------------------------------------


def test_append_attaches_to_the_latest_leaf_or_the_given_parent(make_manager):
    m = make_manager()
    s = m.create("s").id
    assert m.append(s, msg("m0")) == "m0"
    assert m.append(s, msg("m1")) == "m1"
    assert m.append(s, msg("b1"), "m0") == "b1"
    assert ids(m.get_history(s)) == ["m0", "b1"]
    assert m.append(s, msg("r"), None) == "r"
    assert ids(m.get_history(s)) == ["r"]
    assert m.append(s, msg("m0", "again"), "r") == "m0"
    assert m.get_session(s).get_message("m0").text == "message m0"
    assert [ids(m.get_branches(s, "m0"))] == [["m1", "b1"]]


def test_append_all_without_parent_starts_a_new_root(make_manager):
    m = make_manager()
    s = m.create("s").id
    m.append(s, msg("m0"))
    m.append(s, msg("m1"))
    assert m.append_all(s, [msg("a"), msg("b"), msg("c")]) == "c"
    assert ids(m.get_history(s)) == ["a", "b", "c"]
    assert ids(m.get_history(s, "m1")) == ["m0", "m1"]


def test_append_all_under_a_parent(make_manager):
    m = make_manager()
    s = m.create("s").id
    m.append_all(s, [msg("m0"), msg("m1"), msg("m2")])
    assert m.append_all(s, [msg("x"), msg("y")], parent_id="m1") == "y"
    assert ids(m.get_history(s)) == ["m0", "m1", "x", "y"]
    assert ids(m.get_branches(s, "m1")) == ["m2", "x"]


def test_append_all_chain_advances_through_duplicates(make_manager):
    m = make_manager()
    s = m.create("s").id
    m.append_all(s, [msg("a"), msg("b")])
    # "a" is already stored (as a root): not stored again, but the chain continues from it.
    assert m.append_all(s, [msg("a", "changed"), msg("c")]) == "c"
    assert ids(m.get_history(s, "c")) == ["a", "c"]
    assert m.get_session(s).get_message("a").text == "message a"
    # A duplicate in the middle: "b" keeps its parent, and "d" goes under "b".
    assert m.append_all(s, [msg("x"), msg("b"), msg("d")], parent_id="c") == "d"
    assert ids(m.get_history(s, "d")) == ["a", "b", "d"]
    assert ids(m.get_history(s, "x")) == ["a", "c", "x"]
    assert m.append_all(s, [msg("a")]) == "a"


def test_append_all_of_nothing_returns_the_parent(make_manager):
    m = make_manager()
    s = m.create("s").id
    m.append(s, msg("m0"))
    assert m.append_all(s, []) is None
    assert m.append_all(s, [], parent_id="m0") == "m0"
    assert ids(m.get_history(s)) == ["m0"]


def test_upsert_updates_or_appends(make_manager):
    m = make_manager()
    s = m.create("s").id
    m.append_all(s, [msg("m0"), msg("m1"), msg("m2")])
    assert m.upsert(s, msg("m1", "edited", role="assistant")) == "m1"
    assert ids(m.get_history(s)) == ["m0", "m1", "m2"]
    assert m.get_session(s).get_message("m1").text == "edited"
    assert m.get_session(s).get_message("m1").role == "assistant"
    # An existing message keeps its parent, whatever parent is given.
    assert m.upsert(s, msg("m2", "edited again"), parent_id="m0") == "m2"
    assert ids(m.get_history(s)) == ["m0", "m1", "m2"]
    assert m.upsert(s, msg("m3")) == "m3"
    assert ids(m.get_history(s)) == ["m0", "m1", "m2", "m3"]
    assert m.upsert(s, msg("b1"), parent_id="m0") == "b1"
    assert ids(m.get_history(s)) == ["m0", "b1"]
    assert m.upsert(s, msg("r"), parent_id=None) == "r"
    assert ids(m.get_history(s)) == ["r"]


def test_message_count_is_the_active_path_length(make_manager):
    m = make_manager()
    s = m.create("s").id
    assert m.get_message_count(s) == 0
    m.append_all(s, [msg("m0"), msg("m1"), msg("m2"), msg("m3")])
    assert m.get_message_count(s) == 4
    m.append(s, msg("b1"), "m0")
    assert m.get_message_count(s) == 2
    m.add_compaction(s, "summary", "m0", "m1")
    m.append(s, msg("m4"), "m3")
    assert m.get_message_count(s) == 5
    assert len(m.get_history(s)) == 4


def test_clear_and_delete_messages_affect_only_that_session(make_manager):
    m = make_manager()
    a, b = m.create("a").id, m.create("b").id
    for sid in (a, b):
        m.append_all(sid, [msg("m0"), msg("m1"), msg("m2")])
        m.add_compaction(sid, "summary", "m0", "m1")
    assert m.delete_messages(a, ["m2", "nope"]) == ["m2"]
    assert ids(m.get_history(a)) == ["compaction_" + m.get_compactions(a)[0].id]
    assert ids(m.get_history(b, "m2"))[-1] == "m2"
    m.clear_messages(a)
    assert m.get_history(a) == [] and m.get_compactions(a) == [] and m.get_message_count(a) == 0
    assert m.get_message_count(b) == 3 and len(m.get_compactions(b)) == 1


# -- fork ----------------------------------------------------------------------------------


def _normalized(messages):
    """A history with the ids of synthetic summaries blanked (overlay ids are per overlay row)."""
    return [
        ("<summary>" if m.id.startswith("compaction_") else m.id, m.role, m.parts, m.created_at, m.metadata)
        for m in messages
    ]


def test_fork_copies_a_message_over_a_mebibyte_exactly(make_manager):
    m = make_manager()
    src = m.create("source").id
    large = "opening " + " ".join(f"word{i}" for i in range(150_000))
    m.append_all(src, [msg("m0"), msg("large", large), msg("m2")])
    fork = m.fork(src, "m2", "forked")
    assert [x.text for x in m.get_history(fork.id)] == ["message m0", large, "message m2"]
    assert {(r.session_id, r.id) for r in m.search("opening")} == {(src, "large"), (fork.id, "large")}
    m.delete(src)
    assert m.get_history(fork.id)[1].text == large


def test_fork_reads_exactly_as_the_original_did_at_that_message(make_manager):
    m = make_manager()
    src = m.create("source", model="gpt-x", source="web").id
    m.append_all(src, [msg("m0"), msg("m1", role="assistant"), msg("m2"), msg("m3", role="assistant"), msg("m4")])
    m.append(src, msg("m5", role="assistant"), "m4")
    m.append_all(src, [msg("b1"), msg("b2", role="assistant")], parent_id="m2")
    m.add_compaction(src, "on the path", "m1", "m2")
    m.add_compaction(src, "off the path", "b1", "b2")
    m.add_compaction(src, "reaches past the fork point", "m3", "m5")
    original = m.get_history(src, "m4")
    assert [m_.text for m_ in original] == ["message m0", "on the path", "message m3", "message m4"]
    source_before = (m.get_history(src), m.get_history(src, "m5"), m.get_compactions(src), m.get(src))

    fork = m.fork(src, "m4", "forked")
    assert isinstance(fork, SessionInfo) and fork.id != src
    assert (fork.name, fork.parent_session_id, fork.model, fork.source) == ("forked", src, None, None)
    assert (fork.input_tokens, fork.output_tokens, fork.estimated_cost, fork.end_reason) == (0, 0, 0.0, None)
    assert m.get(fork.id) == fork and fork.id in {s.id for s in m.list_sessions()}

    forked = m.get_history(fork.id)
    assert _normalized(forked) == _normalized(original)
    assert ids(forked)[0] == "m0" and ids(forked)[2:] == ["m3", "m4"]
    [overlay] = m.get_compactions(fork.id)
    assert (overlay.summary, overlay.from_message_id, overlay.to_message_id) == ("on the path", "m1", "m2")
    assert forked[1].id == "compaction_" + overlay.id
    # The raw messages under the overlay are copied with their ids; nothing off the path is.
    assert m.get_message_count(fork.id) == 5
    fs = m.get_session(fork.id)
    assert fs.get_message("m1").created_at == m.get_session(src).get_message("m1").created_at
    assert fs.get_message("m5") is None and fs.get_message("b1") is None
    assert ids(fs.get_history("m2")) == ["m0", "compaction_" + overlay.id]

    # The fork goes its own way; the source is untouched.
    m.append(fork.id, msg("f5"))
    assert ids(m.get_history(fork.id))[-2:] == ["m4", "f5"]
    assert (m.get_history(src), m.get_history(src, "m5"), m.get_compactions(src), m.get(src)) == source_before
    hits = m.search("m3")
    assert sorted(h.session_id for h in hits) == sorted([src, fork.id])


def test_fork_at_an_unknown_message_is_empty(make_manager):
    m = make_manager()
    src = m.create("source").id
    other = m.create("other").id
    m.append_all(src, [msg("m0"), msg("m1")])
    m.append(other, msg("elsewhere"))
    m.add_compaction(src, "summary", "m0", "m1")
    for at in ("nope", "elsewhere"):
        fork = m.fork(src, at, f"fork at {at}")
        assert fork.parent_session_id == src
        assert m.get_history(fork.id) == [] and m.get_compactions(fork.id) == []
        assert m.get_message_count(fork.id) == 0
    assert ids(m.get_history(src)) == ["compaction_" + m.get_compactions(src)[0].id]


def test_fork_of_a_fork(make_manager):
    m = make_manager()
    src = m.create("source").id
    m.append_all(src, [msg("m0"), msg("m1"), msg("m2"), msg("m3")])
    m.add_compaction(src, "summary", "m0", "m1")
    first = m.fork(src, "m3", "first")
    second = m.fork(first.id, "m2", "second")
    assert second.parent_session_id == first.id
    assert _normalized(m.get_history(second.id)) == _normalized(m.get_history(src, "m2"))


# -- compact_and_split ---------------------------------------------------------------------


def test_compact_and_split(make_manager):
    m = make_manager()
    old = m.create("Long chat", model="gpt-x", source="slack")
    m.append_all(old.id, [msg("m0"), msg("m1", role="assistant")])
    m.add_compaction(old.id, "inner", "m0", "m0")
    history_before, compactions_before = m.get_history(old.id), m.get_compactions(old.id)

    new = m.compact_and_split(old.id, "We discussed X.", "Part 2")
    assert (new.name, new.parent_session_id, new.model, new.source) == ("Part 2", old.id, "gpt-x", "slack")
    assert new.end_reason is None
    ended = m.get(old.id)
    assert ended.end_reason == "compaction" and ended.updated_at > old.updated_at
    [carried] = m.get_history(new.id)
    assert carried.role == "assistant"
    assert [p.model_dump() for p in carried.parts] == [{"type": "text", "text": SPLIT_PREFIX + "We discussed X."}]
    assert carried.id not in ("m0", "m1")
    assert m.get_history(old.id) == history_before and m.get_compactions(old.id) == compactions_before
    assert [s.id for s in m.list_sessions()][0] == new.id
    assert [h.session_id for h in m.search("discussed")] == [new.id]


def test_compact_and_split_names(make_manager):
    m = make_manager()
    old = m.create("Original")
    assert m.compact_and_split(old.id, "s").name == "Original"
    orphan = m.compact_and_split("unknown", "s")
    assert (orphan.name, orphan.parent_session_id, orphan.model) == ("Compacted", "unknown", None)


def test_add_compaction_and_compact_delegate(make_manager):
    m = make_manager().on_compaction(summarize_all_but_last)
    s = m.create("s").id
    m.append_all(s, [msg("m0"), msg("m1"), msg("m2"), msg("m3")])
    made = m.add_compaction(s, "manual", "m0", "m0")
    assert m.get_compactions(s) == [made]
    result = m.compact(s)
    assert (result.from_message_id, result.to_message_id) == ("m0", "m2")
    assert texts(m.get_history(s)) == ["summary of 2", "message m3"]


# -- usage ---------------------------------------------------------------------------------


def test_add_usage_adds_to_the_counters(make_manager):
    m = make_manager()
    a, b = m.create("a").id, m.create("b").id
    assert m.add_usage(a, 100, 20, 0.25) is None
    m.add_usage(a, 50, 5, 0.5)
    m.add_usage(a, output_tokens=1)
    info = m.get(a)
    assert (info.input_tokens, info.output_tokens) == (150, 26)
    assert info.estimated_cost == pytest.approx(0.75)
    assert (m.get(b).input_tokens, m.get(b).output_tokens, m.get(b).estimated_cost) == (0, 0, 0.0)
    m.add_usage("unknown", 1, 1, 1.0)
    assert m.get("unknown") is None and len(m.list_sessions()) == 2


# -- search and session_search -------------------------------------------------------------


def _searchable(m):
    a, b = m.create("a").id, m.create("b").id
    m.append(a, msg("a1", "We are deploying to production today"))
    m.append(a, msg("a2", "lunch plans", role="assistant"))
    m.append(b, msg("b1", "The production deploy failed", role="assistant"))
    m.append(b, msg("b2", "deploy to staging"))
    return a, b


def test_search_spans_sessions_and_names_them(make_manager):
    m = make_manager()
    a, b = _searchable(m)
    hits = m.search("deploy production", match="all")
    assert {(h.session_id, h.id, h.role, h.content) for h in hits} == {
        (a, "a1", "user", "We are deploying to production today"),
        (b, "b1", "assistant", "The production deploy failed"),
    }
    for hit in hits:
        assert hit.created_at == m.get_session(hit.session_id).get_message(hit.id).created_at
    assert {h.id for h in m.search("production deploys", match="all")} == {"a1", "b1"}
    assert {h.id for h in m.search("production deploys")[:2]} == {"a1", "b1"}
    assert {h.id for h in m.search("deployed")} == {"a1", "b1", "b2"}


def test_search_with_match_all_needs_every_word(make_manager):
    m = make_manager()
    _searchable(m)
    assert ids(m.search("staging deploy", match="all")) == ["b2"]
    assert m.search("deploy kubernetes", match="all") == []
    assert m.search("") == [] and m.search("   ") == [] and m.search("!!") == []
    assert {h.id for h in m.search('deploy" OR "lunch', match="all")} == set()
    assert ids(m.search("lunch*")) == ids(m.search("lunch*", match="all")) == ["a2"]


def test_search_ranks_every_word_first_across_sessions(make_manager):
    m = make_manager()
    _searchable(m)
    assert ids(m.search("staging deploy"))[0] == "b2"
    assert {h.id for h in m.search("deploy kubernetes")} == {"a1", "b1", "b2"}
    assert {h.id for h in m.search('deploy" OR "lunch')} == {"a1", "a2", "b1", "b2"}
    assert m.search("what was it about", limit=5) == []


def test_search_limit(make_manager):
    m = make_manager()
    s = m.create("s").id
    m.append_all(s, [msg(f"m{i}", f"kiwi number {i}") for i in range(25)])
    assert len(m.search("kiwi")) == 20
    assert len(m.search("kiwi", limit=3)) == 3
    assert m.search("kiwi", limit=0) == []


def test_tools_is_session_search_alone(make_manager):
    m = make_manager()
    tools = m.tools()
    assert [t.name for t in tools] == ["session_search"]
    [tool] = tools
    assert tool.description == SESSION_SEARCH_DESCRIPTION
    assert tool.parameters == SESSION_SEARCH_SCHEMA
    assert raw(tool).to_openai()["function"] == {
        "name": "session_search",
        "description": SESSION_SEARCH_DESCRIPTION,
        "parameters": SESSION_SEARCH_SCHEMA,
    }


def test_session_search_results(make_manager):
    m = make_manager()
    a, b = _searchable(m)
    [tool] = m.tools()
    assert tool.invoke({"query": "kangaroo"}) == "No results found."
    assert tool.invoke({"query": ""}) == "No results found."
    assert tool.invoke({"query": "what was it"}) == "No results found."
    assert plain_hits(tool.invoke({"query": "lunch"})) == ["[assistant] lunch plans"]
    assert plain_hits(tool.invoke('{"query": "staging"}')) == ["[user] deploy to staging"]
    entries = plain_hits(tool.invoke({"query": "production deploy"}))
    assert sorted(entries[:2]) == [
        "[assistant] The production deploy failed",
        "[user] We are deploying to production today",
    ]
    m.append_all(a, [msg(f"k{i}", f"kiwi {i}") for i in range(12)])
    assert len(plain_hits(tool.invoke({"query": "kiwi"}))) == 10
    assert tool.invoke({}).startswith("Error: ")


def test_session_search_says_when_where_and_what_answered(make_manager):
    m = make_manager()
    trip = m.create("Trip planning").id
    unnamed = m.create("").id
    m.append(trip, msg("q", "When does the car lease start?"))
    m.append(trip, msg("r", "It starts on the first of March.", role="assistant"))
    m.append(trip, msg("q2", "Thanks. And the insurance?"))
    m.append(unnamed, msg("u", "Insurance renews in June", role="assistant"))
    when = m.get_session(trip).get_message("q").created_at.strftime("%Y-%m-%d %H:%M")
    [tool] = m.tools()
    assert tool.invoke({"query": "When is the car lease?"}) == (
        f'[{when} UTC | session "Trip planning" | user] When does the car lease start?\n'
        "  reply (assistant): It starts on the first of March."
    )
    answer = tool.invoke({"query": "the first of March"})
    assert answer.startswith(f'[{when} UTC | session "Trip planning" | assistant] It starts on the first of March.')
    assert answer.endswith("\n  asked (user): When does the car lease start?")
    insurance = tool.invoke({"query": "insurance"}).split("\n---\n")
    assert {entry.split(" | ")[1] for entry in insurance} == {f"session {unnamed}", 'session "Trip planning"'}
    # A neighbour that is itself a hit is shown once, as a hit.
    both = tool.invoke({"query": "car lease March"})
    assert both.count("When does the car lease start?") == 1 and both.count("first of March") == 1


def test_session_search_output_is_bounded(make_manager):
    m = make_manager()
    s = m.create("long").id
    m.append(s, msg("q", "zebra " + "word " * 5_000))
    m.append(s, msg("r", "answer " * 5_000, role="assistant"))
    [tool] = m.tools()
    out = tool.invoke({"query": "zebra"})
    assert len(out) < 4_000 + 400 + 200 and out.count("…") == 2


def test_session_search_finds_every_language_and_code(make_manager):
    m = make_manager()
    a, b = m.create("a").id, m.create("b").id
    m.append(a, msg("zh", "我们周五部署新版本到生产环境"))
    m.append(b, msg("ja", "東京でラーメンを食べました", role="assistant"))
    m.append(b, msg("code", "the fix is in user_service.py"))
    [tool] = m.tools()
    assert plain_hits(tool.invoke({"query": "部署"})) == ["[user] 我们周五部署新版本到生产环境"]
    assert plain_hits(tool.invoke({"query": "ラーメン"})) == ["[assistant] 東京でラーメンを食べました"]
    assert plain_hits(tool.invoke({"query": "user_service.py"})) == ["[user] the fix is in user_service.py"]
    assert {(h.session_id, h.id) for h in m.search("周五")} == {(a, "zh")}


def test_session_search_reports_errors_as_strings(make_manager):
    m = make_manager()
    [tool] = m.tools()

    def broken(query, **options):
        raise RuntimeError("index unavailable")

    raw(m).search = broken
    assert tool.invoke({"query": "x"}) == "Error: index unavailable"


def test_session_tools_are_not_merged_with_session_search(make_manager):
    m = make_manager().with_context("memory")
    s = m.create("s").id
    assert [t.name for t in m.get_session(s).tools()] == ["set_context"]
    assert [t.name for t in m.session_tools(s)] == ["set_context", "session_search"]


# -- with_searchable_history ---------------------------------------------------------------


def test_searchable_history_block(make_manager):
    m = make_manager().with_context("memory").with_searchable_history("past")
    assert m.get_session("loose").get_context_block("past").content == ""
    a = m.create("a").id
    block = m.get_session(a).get_context_block("past")
    assert block.content == "1 session available for search."
    assert block.description == "Cross-session conversation history"
    assert (block.writable, block.is_searchable, block.is_skill) == (False, True, False)
    b = m.create("b").id
    assert m.get_session(b).get_context_block("past").content == "2 sessions available for search."
    assert [x.label for x in m.get_session(b).get_context_blocks()] == ["memory", "past"]
    tools = {t.name: t for t in m.get_session(b).tools()}
    assert set(tools) == {"set_context", "search_context"}
    assert tools["search_context"].parameters["properties"]["label"]["enum"] == ["past"]
    assert tools["set_context"].parameters["properties"]["label"]["enum"] == ["memory"]


def test_search_context_through_a_session_finds_other_sessions(make_manager):
    m = make_manager().with_searchable_history("past")
    a, b = m.create("a").id, m.create("b").id
    m.append(a, msg("a1", "the secret ingredient is saffron", role="assistant"))
    m.append(a, msg("a2", "saffron is expensive"))
    tools = {t.name: t for t in m.get_session(b).tools()}
    assert list(tools) == ["search_context"]
    search = tools["search_context"]
    assert plain_hits(search.invoke({"label": "past", "query": "secret ingredient"})) == [
        "[assistant] the secret ingredient is saffron"
    ]
    assert sorted(plain_hits(search.invoke({"label": "past", "query": "saffron"}))) == [
        "[assistant] the secret ingredient is saffron",
        "[user] saffron is expensive",
    ]
    assert search.invoke({"label": "past", "query": "truffle"}) == "No results found."
    m.append_all(b, [msg(f"k{i}", f"kiwi {i}") for i in range(12)])
    assert len(search.invoke({"label": "past", "query": "kiwi"}).split("\n---\n")) == 10
    assert m.get_session(b).get_context_block("past").content == "2 sessions available for search."


# -- builder propagation -------------------------------------------------------------------


def test_builder_calls_configure_every_session_even_earlier_ones(make_manager):
    m = make_manager()
    a, b = m.create("a").id, m.create("b").id
    early = m.get_session(a)
    early.append_message(msg("e0"))
    compacted = []

    def compact(messages, context):
        compacted.append(messages[-1].id)
        return summarize_all_but_last(messages, context)

    m.with_context("memory", description="Facts", max_tokens=50).with_context(
        "soul", provider=StaticContext("Be kind.")
    ).with_cached_prompt().on_compaction(compact).compact_after(1)
    late = m.get_session(b)
    store = raw(m).store
    for session, sid in ((early, a), (late, b)):
        assert [x.label for x in session.get_context_blocks()] == ["memory", "soul"]
        memory = session.get_context_block("memory")
        assert (memory.description, memory.max_tokens, memory.writable) == ("Facts", 50, True)
        assert session.get_context_block("soul").content == "Be kind."
        session.replace_context_block("memory", f"fact of {sid}")
        prompt = session.freeze_system_prompt()
        assert f"fact of {sid}" in prompt
        assert store.get_cached_prompt(key(m, sid)) == prompt
        for i in range(3):
            session.append_message(msg(f"{sid}-{i}"))
        assert m.get_compactions(sid), "compact_after and on_compaction reach every session"
    assert m.get_session(a).get_context_block("memory").content == f"fact of {a}"
    assert m.get_session(b).get_context_block("memory").content == f"fact of {b}"
    assert compacted


def test_on_compaction_error_propagates(make_manager):
    m = make_manager()
    a = m.create("a").id
    early = m.get_session(a)
    errors = []

    def failing(messages, context):
        raise RuntimeError("model down")

    m.on_compaction(failing).compact_after(1).on_compaction_error(errors.append)
    early.append_message(msg("x"))
    late = m.get_session(m.create("b").id)
    late.append_message(msg("y"))
    assert len(errors) == 2 and all("model down" in str(e) for e in errors)


# -- persistence ---------------------------------------------------------------------------


def populate(m):
    """Two sessions with blocks, a cached prompt, an overlay, usage, a split and a fork; returns
    the first id and its frozen prompt."""
    m.with_context("memory").with_context("notes", provider=StoreSearchContext()).with_cached_prompt()
    a = m.create("first", model="gpt-x", source="web").id
    m.append_all(a, [msg("m0", "remember the walrus"), msg("m1", "noted", role="assistant"), msg("m2")])
    m.add_compaction(a, "walrus talk", "m0", "m1")
    m.add_usage(a, 100, 50, 1.25)
    s = m.get_session(a)
    s.replace_context_block("memory", "likes walruses")
    tools = {t.name: t for t in s.tools()}
    tools["set_context"].invoke({"label": "notes", "content": "walrus facts", "metadata": {"title": "Walrus"}})
    prompt = s.freeze_system_prompt()
    b = m.create("second").id
    m.append(b, msg("x0", "otters too"))
    m.rename(b, "second, renamed")
    m.compact_and_split(b, "otter summary", "third")
    m.fork(a, "m1", "fork")
    return a, prompt


@pytest.mark.usefixtures("persistent_backend")
def test_a_new_store_on_the_same_database_sees_every_session(make_manager):
    first = make_manager("team")
    a, prompt = populate(first)
    again = make_manager("team").with_context("memory").with_context("notes", provider=StoreSearchContext())
    again.with_cached_prompt()
    assert again.list_sessions() == first.list_sessions() and len(again.list_sessions()) == 4
    for info in again.list_sessions():
        assert again.get_history(info.id) == first.get_history(info.id)
        assert again.get_compactions(info.id) == first.get_compactions(info.id)
    assert again.get(a).input_tokens == 100 and again.get(a).estimated_cost == pytest.approx(1.25)
    s = again.get_session(a)
    assert s.get_context_block("memory").content == "likes walruses"
    assert s.get_context_block("notes").content == "1 entries indexed."
    assert s.freeze_system_prompt() == prompt
    search = {t.name: t for t in s.tools()}["search_context"]
    assert untimed(search.invoke({"label": "notes", "query": "walrus"})) == "[walrus]\nwalrus facts"
    assert {h.session_id for h in again.search("walrus")} == {h.session_id for h in first.search("walrus")}
    assert len(again.search("walrus")) == 2  # the source and its fork
    assert make_manager().list_sessions() == []


# -- isolation -----------------------------------------------------------------------------

SEED_IDS = ("m0", "m1", "m2b", "m2", "m3", "m4", "m5")
ACTING_IDS = ("a5", "u1", "x1", "x2", "s1", "s2", "imp", "c9", "r9")
LABELS = ("memory", "notes", "skills", "history", "extra")
WORDS = (
    "yak",
    "zebra",
    "deploy",
    "production",
    "answer",
    "question",
    "reply",
    "branch",
    "summary",
    "fact",
    "note",
    "pirate",
    "arr",
    "load",
    "chained",
    "session",
    "shanty",
)


def _configured(manager):
    return (
        manager.with_context("memory", max_tokens=500)
        .with_context("notes", provider=StoreSearchContext())
        .with_cached_prompt()
        .with_searchable_history("history")
        .on_compaction(summarize_all_but_last)
    )


def _seed(m, sid, marker):
    """The same message ids, labels and keys in every session; only the marker word differs."""
    m.append(sid, msg("m0", f"{marker} deploy production"))
    m.append(sid, msg("m1", f"{marker} answer", role="assistant"))
    m.append(sid, msg("m2b", f"{marker} branch"))
    m.append(sid, msg("m2", f"{marker} question"), "m1")
    m.append(sid, msg("m3", f"{marker} reply", role="assistant"))
    m.append(
        sid,
        {
            "id": "m4",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-call",
                    "toolCallId": "c1",
                    "toolName": "load_context",
                    "input": {"label": "skills", "key": "pirate"},
                }
            ],
        },
    )
    m.append(
        sid,
        {
            "id": "m5",
            "role": "tool",
            "parts": [
                {"type": "tool-result", "toolCallId": "c1", "toolName": "load_context", "output": f"{marker} arr"}
            ],
        },
    )
    m.add_compaction(sid, f"{marker} summary", "m0", "m1")
    s = m.get_session(sid)
    s.replace_context_block("memory", f"{marker} fact")
    notes = {t.name: t for t in s.tools()}["set_context"]
    assert notes.invoke({"label": "notes", "content": f"{marker} note", "metadata": {"title": "note"}}) == (
        'Indexed "note" in notes.'
    )
    s.freeze_system_prompt()
    m.add_usage(sid, 1, 2, 0.5)


def _snapshot(m, sid):
    """Everything stored for a session, read through the store contract, plus what its cached
    ``Session`` holds in memory."""
    manager = raw(m)
    session = manager.get_session(sid)
    store, k = manager.store, session.session_id
    every = SEED_IDS + ACTING_IDS
    return {
        "row": manager.get(sid),
        "messages": {i: store.get_message(k, i) for i in every},
        "children": {i: store.children(k, i) for i in every},
        "paths": {i: store.path(k, i) for i in every},
        "totals": {i: store.path_totals(k, i) for i in every},
        "latest": store.latest_leaf(k),
        "compactions": store.get_compactions(k),
        "blocks": {label: store.get_block(k, label) for label in LABELS},
        "prompt": store.get_cached_prompt(k),
        "entries": {label: store.count_search_entries(k, label) for label in LABELS},
        "entry hits": {(label, w): store.search_entries(k, label, w, 100) for label in LABELS for w in WORDS},
        "message hits": {w: store.search_messages([k], w, 100) for w in WORDS},
        "history": session.get_history(),
        "loaded blocks": session.get_context_blocks(),
        "loaded skills": session.get_loaded_skills(),
    }


def _exercise(m, sid, seen, cross):
    """Drive every public method of SessionManager and Session, and every tool, on ``sid``.

    ``seen`` gets every result scoped to this session; ``cross`` the results of the features
    that search across the manager's sessions on purpose."""

    def keep(value):
        seen.append(value)
        return value

    keep(m.get(sid))
    keep(m.rename(sid, "renamed"))
    s = m.get_session(sid)

    # Blocks, skills and every tool (the skill block is this session's own).
    keep(s.get_context_block("memory"))
    keep(s.get_context_blocks())
    keep(s.replace_context_block("memory", "yak replaced"))
    keep(s.append_context_block("memory", "yak appended"))
    keep(s.add_context("skills", provider=SkillBook({"pirate": "yak arr arr"})))
    assert keep(s.get_loaded_skills()) == ["skills:pirate"]
    s.with_context("extra")
    keep(s.add_context("late", provider=StaticContext("yak static")))
    keep(s.freeze_system_prompt())
    keep(s.refresh_system_prompt())
    tools = {t.name: t for t in s.tools()}
    assert set(tools) == {"set_context", "load_context", "unload_context", "search_context"}
    keep(tools["set_context"].invoke({"label": "memory", "content": "yak by tool"}))
    keep(tools["set_context"].invoke({"label": "memory", "content": "yak more", "action": "append"}))
    keep(tools["set_context"].invoke({"label": "extra", "content": "yak extra"}))
    keep(tools["set_context"].invoke({"label": "notes", "content": "yak note", "metadata": {"title": "note"}}))
    keep(tools["set_context"].invoke({"label": "notes", "content": "yak other note"}))
    keep(tools["set_context"].invoke({"label": "skills", "content": "yak shanty", "metadata": {"title": "shanty"}}))
    assert keep(tools["load_context"].invoke({"label": "skills", "key": "shanty"})) == "yak shanty"
    assert keep(tools["unload_context"].invoke({"label": "skills", "key": "pirate"})).startswith("Unloaded")
    assert keep(s.get_message("m5")).parts[0].output == "[skill unloaded: pirate]"
    keep(tools["unload_context"].invoke({"label": "skills", "key": "shanty"}))
    keep(tools["search_context"].invoke({"label": "notes", "query": "note"}))
    assert keep(tools["search_context"].invoke({"label": "notes", "query": "zebra"})) == "No results found."
    cross.append(tools["search_context"].invoke({"label": "history", "query": "deploy"}))
    keep(s.remove_context("late"))

    # Manager message conveniences, with ids the other session also holds.
    keep(m.append(sid, msg("a5", "yak five")))
    keep(m.upsert(sid, msg("m1", "yak changed", role="assistant")))
    keep(m.upsert(sid, msg("u1", "yak upserted"), parent_id="m0"))
    keep(m.append_all(sid, [msg("m0", "duplicate"), msg("x1", "yak chained")]))
    keep(m.append_all(sid, [msg("x2", "yak under")], parent_id="m2"))
    keep(m.get_history(sid))
    keep(m.get_history(sid, "m2"))
    keep(m.get_message_count(sid))
    keep(m.get_branches(sid, "m1"))
    keep(m.delete_messages(sid, ["m2b"]))
    keep(m.add_compaction(sid, "yak manual summary", "m0", "m1"))
    keep(m.get_compactions(sid))
    keep(m.compact(sid))
    keep(m.add_usage(sid, 10, 20, 1.5))

    # Session history methods (automatic compaction on for this session object only).
    s.compact_after(1)
    keep(s.append_message(msg("s1", "yak session")))
    keep(s.append_message(msg("s2", "yak root"), parent_id=None))
    keep(
        s.import_message(
            msg("imp", "yak imported"), parent_id="m0", created_at=datetime(2020, 1, 1, tzinfo=timezone.utc)
        )
    )
    keep(s.update_message(msg("m0", "yak rewritten")))
    keep(s.update_message(msg("c9", "yak missing")))
    keep(s.delete_messages(["m3"]))
    keep(s.get_message("m0"))
    keep(s.get_latest_leaf())
    keep(s.get_branches("m0"))
    keep(s.get_path_length())
    keep(s.get_path_length("m2"))
    keep(s.get_history())
    keep(s.get_history("x2"))
    keep(list(s.history(newest_first=True)))
    keep(list(s.history("m2")))
    keep(s.get_recent_history(10_000))
    keep(s.get_recent_history(1, leaf_id="m2", min_recent_messages=2))
    keep(s.search("yak"))
    assert keep(s.search("zebra")) == []
    keep(s.add_compaction("yak session summary", "m0", "m1"))
    keep(s.compact())
    keep(s.get_token_estimate())
    keep(s.get_compactions())

    # Search and tools across the manager's sessions.
    cross.append(m.search("deploy"))
    cross.append(m.search("yak", limit=1))
    [session_search] = m.tools()
    cross.append(session_search.invoke({"query": "deploy production"}))
    cross.append([t.name for t in m.session_tools(sid)])
    cross.append(m.list_sessions())

    # Fork, split, clear, delete.
    keep(m.fork(sid, "m1", "fork"))
    keep(m.fork(sid, "r9", "empty fork"))
    keep(m.compact_and_split(sid, "yak split summary", "split"))
    keep(s.clear_messages())
    keep(m.clear_messages(sid))
    keep(s.close())
    assert keep(m.delete(sid)) is True


def test_sessions_of_one_manager_never_touch_each_other(make_manager):
    m = _configured(make_manager())
    acting, other = m.create("acting").id, m.create("other").id
    _seed(m, acting, "yak")
    _seed(m, other, "zebra")
    assert key(m, acting) != key(m, other)
    before = _snapshot(m, other)
    assert before["history"] and before["compactions"] and before["entries"]["notes"] == 1

    seen, cross = [], []
    _exercise(m, acting, seen, cross)

    assert _snapshot(m, other) == before
    assert "zebra" not in repr(seen) and other not in repr(seen)
    # The deliberate cross-session features do see the other session.
    assert "zebra deploy production" in repr(cross)


@pytest.mark.parametrize("namespaces", [("", "tenant"), ("tenant", ""), ("alpha", "beta")])
def test_namespaces_sharing_a_store_never_touch_each_other(make_manager, namespaces):
    mine, theirs = (_configured(make_manager(namespace)) for namespace in namespaces)
    acting = mine.create("acting").id
    other = theirs.create("other").id
    _seed(mine, acting, "yak")
    _seed(theirs, other, "zebra")
    before = _snapshot(theirs, other)
    their_list = theirs.list_sessions()

    seen = []
    _exercise(mine, acting, seen, seen)

    # Calls on the other namespace's session id reach nothing of it.
    forged = [other] + ([f"{namespaces[1]}:{other}"] if namespaces[0] == "" else [])
    for sid in forged:
        assert mine.get(sid) is None
        assert mine.get_history(sid) == [] and mine.get_message_count(sid) == 0
        assert mine.get_compactions(sid) == [] and mine.get_branches(sid, "m0") == []
        assert mine.get_session(sid).get_context_block("memory").content == ""
        assert mine.get_session(sid).get_context_block("notes").content == ""
        assert mine.get_session(sid).search("zebra") == []
        assert mine.rename(sid, "stolen") is None and mine.delete(sid) is False
        assert mine.fork(sid, "m3", "fork").parent_session_id == sid
        mine.add_usage(sid, 1000, 1000, 10.0)
        mine.append(sid, msg("m6", "yak forged"))
        mine.upsert(sid, msg("m0", "yak overwritten"))
        mine.append_all(sid, [msg("m1", "yak")], parent_id="m0")
        mine.delete_messages(sid, ["m1", "m2"])
        mine.add_compaction(sid, "yak", "m0", "m0")
        mine.get_session(sid).replace_context_block("memory", "yak overwritten")
        mine.get_session(sid).update_message(msg("m3", "yak overwritten"))
        mine.compact_and_split(sid, "yak", "split")
        mine.clear_messages(sid)
        seen.append(mine.get_session(sid).get_history())

    seen.append(mine.search("zebra"))
    [session_search] = mine.tools()
    assert session_search.invoke({"query": "zebra"}) == "No results found."
    probe = mine.get_session(mine.create("probe").id)
    assert probe.get_context_block("history").content.endswith("sessions available for search.")
    search = {t.name: t for t in probe.tools()}["search_context"]
    assert search.invoke({"label": "history", "query": "zebra"}) == "No results found."

    assert _snapshot(theirs, other) == before
    assert theirs.list_sessions() == their_list
    assert "zebra" not in repr(seen)
    assert other not in repr([x for x in seen if not isinstance(x, SessionInfo)])
    assert all(not (isinstance(x, SessionInfo) and x.id == other) for x in seen)
    assert other not in {s.id for s in mine.list_sessions()}


def test_the_same_session_id_in_two_namespaces(make_manager):
    first, second = make_manager("one").with_context("memory"), make_manager("two").with_context("memory")
    for manager, word in ((first, "yak"), (second, "zebra")):
        manager.append_all("chat-1", [msg("m0", f"{word} hello"), msg("m1", f"{word} again")])
        manager.get_session("chat-1").replace_context_block("memory", f"{word} fact")
    before = _snapshot(second, "chat-1")
    first.upsert("chat-1", msg("m0", "yak changed"))
    first.delete_messages("chat-1", ["m1"])
    first.get_session("chat-1").replace_context_block("memory", "yak changed")
    first.clear_messages("chat-1")
    assert first.get_history("chat-1") == []
    assert _snapshot(second, "chat-1") == before
    assert texts(second.get_history("chat-1")) == ["zebra hello", "zebra again"]


def test_an_id_holding_a_colon_stays_in_its_namespace(make_manager):
    default, user = make_manager(), make_manager("user")
    default.append("user:42", msg("d", "from the default namespace"))
    user.append("42", msg("u", "from the user namespace"))
    assert ids(default.get_history("user:42")) == ["d"]
    assert ids(user.get_history("42")) == ["u"]
    assert ids(default.get_history("42")) == [] and ids(user.get_history("user:42")) == []


skip_where_unsupported(globals())
