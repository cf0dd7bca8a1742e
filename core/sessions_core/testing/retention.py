"""Retention and erasure contract: ``prune`` removes exactly the sessions last active before the
cut, with every trace of them (registry row, messages, overlays, blocks and versions, search
entries, cached prompt, payloads no other session shares, vectors), and leaves the others
exactly as they were; ``dry_run`` changes nothing; every kind of activity keeps a session;
``retention=`` prunes on its own, once an hour per store; ``erase`` counts what it removes.

Old activity is made through the public API: an export whose times are moved back a year is
imported under new ids (``import_records`` keeps the times of messages, overlays, block versions,
blocks, search entries and registry rows), and ``import_message`` stores a message with an old
``created_at``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from sessions_core import StoreSearchContext
from sessions_core.transfer import export_session, import_records

from . import recall
from .builders import msg
from .harness import short_lists, skip_where_unsupported
from .recall import MIN_SCORE

make_index = recall.make_index
"""The recall suite's fixture: a new, empty vector index of each kind."""

YEAR = timedelta(days=365)
LONG_AGO = datetime(2001, 2, 3, 4, 5, 6, tzinfo=timezone.utc)
PAYLOAD = bytes(range(256)) * 12
"""The attachment every session of the setup shares (so it outlives the pruned ones)."""
OWN_PAYLOAD = b"only the old sessions hold this" * 40
SHARED_OLD_PAYLOAD = b"both old sessions hold this one" * 40


def raw(obj: Any) -> Any:
    """The object behind an async driver (the object itself in sync mode)."""
    return getattr(obj, "target", obj)


def _file(message_id: str, data: bytes) -> dict[str, Any]:
    return {
        "id": message_id,
        "role": "user",
        "parts": [
            {"type": "text", "text": f"attached {message_id}"},
            {"type": "file", "mediaType": "image/png", "data": data},
        ],
    }


def _full(session: Any) -> None:
    """A session with every kind of row: messages with a tool call, its result and an
    attachment, an overlay, block versions, search entries and a cached prompt."""
    session.with_context("memory").with_context("notes", provider=StoreSearchContext()).with_cached_prompt()
    session.append_message(msg("u1", "We agreed on the automobile lease for three years"))
    session.append_message(
        {
            "id": "a1",
            "role": "assistant",
            "parts": [{"type": "tool-call", "toolCallId": "c1", "toolName": "look", "input": {"q": "lease"}}],
        }
    )
    session.append_message(
        {
            "id": "t1",
            "role": "tool",
            "parts": [{"type": "tool-result", "toolCallId": "c1", "toolName": "look", "output": {"years": 3}}],
        }
    )
    session.append_message(_file("f1", PAYLOAD))
    session.append_message(msg("a2", "Noted, three years.", role="assistant"))
    session.add_compaction("The user leased a car.", "u1", "t1")
    session.replace_context_block("memory", "Leases a car.")
    session.replace_context_block("memory", "Leases a car for three years.")
    tools = {tool.name: tool for tool in session.tools()}
    tools["set_context"].invoke({"label": "notes", "content": "The lease ends in three years."})
    session.freeze_system_prompt()


def _shifted(value: Any, delta: timedelta) -> Any:
    """An export record (or part of one) with every time moved by ``delta``; message bodies
    are kept as they are."""
    if isinstance(value, dict):
        return {
            key: (
                (datetime.fromisoformat(item) + delta).isoformat()
                if key in ("created_at", "updated_at", "exported_at") and isinstance(item, str)
                else item
                if key == "message"
                else _shifted(item, delta)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_shifted(item, delta) for item in value]
    return value


def _copy_back_in_time(store: Any, source: str, targets: Iterable[str], *, register: bool = False) -> None:
    """Import ``source``'s export under each target id with its times a year earlier (no
    cached prompt: an import stores one with the current time); ``register``: with a registry
    row last updated long ago."""
    records = [_shifted(r, -YEAR) for r in export_session(store, source) if r["kind"] != "prompt"]
    for target in targets:
        if register:
            row = {"name": target, "created_at": LONG_AGO.isoformat(), "updated_at": LONG_AGO.isoformat()}
            records = [{**r, "registry": row} if r["kind"] == "session" else r for r in records]
        import_records(store, records, into=target)


def _snapshot(store: Any, storage_id: str) -> list[dict[str, Any]]:
    """Every row of a session as its export gives it, without the export's own time."""
    return [{k: v for k, v in r.items() if k != "exported_at"} for r in export_session(store, storage_id)]


def _setup(m: Any, new_index: Callable[[], Any] | None = None) -> dict[str, Any]:
    """A manager's store holding two fresh sessions (one registered, one only written to) and
    two old ones, one of them holding a payload of its own; with recall when asked."""
    if new_index is not None:
        m.with_semantic_recall(new_index(), background=False, min_score=MIN_SCORE)
    store = raw(m).store
    keeper = m.create("keeper").id
    _full(m.get_session(keeper))
    m.append("unregistered", msg("x1", "written without create"))
    _copy_back_in_time(store, raw(m).storage_id(keeper), [raw(m).storage_id(s) for s in ("old-one", "old-two")])
    m.get_session("old-one").import_message(_file("own", OWN_PAYLOAD), parent_id="a2", created_at=LONG_AGO)
    if new_index is not None:
        m.drain_recall()
    return {"store": store, "keeper": keeper, "fresh": [keeper, "unregistered"], "old": ["old-one", "old-two"]}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_prune_removes_exactly_the_sessions_past_the_cut_with_every_trace(make_manager, make_index):
    m = make_manager()
    seeded = _setup(m, make_index)
    store, manager = seeded["store"], raw(m)
    before = {s: _snapshot(store, manager.storage_id(s)) for s in seeded["fresh"]}
    recall = manager.recall
    assert all(recall.store.recall_vectors(manager.storage_id(s)) for s in seeded["old"])
    assert store.get_blobs([_sha(OWN_PAYLOAD)])

    result = m.prune(timedelta(days=30))

    assert sorted(result.session_ids) == seeded["old"] and not result.dry_run
    assert sorted(result.storage_ids) == [manager.storage_id(s) for s in seeded["old"]]
    counts = result.counts
    assert (counts.registry, counts.messages, counts.compactions) == (2, 11, 2)
    assert (counts.blocks, counts.block_versions, counts.search_entries, counts.prompts) == (2, 6, 2, 0)
    assert counts.blobs == 1 and counts.vectors > 0
    assert datetime.now(timezone.utc) - timedelta(days=31) < result.cutoff < datetime.now(timezone.utc)
    for old in seeded["old"]:
        storage_id = manager.storage_id(old)
        assert m.get(old) is None and m.get_history(old) == []
        assert store.session_summaries([storage_id]) == []
        assert store.get_blocks(storage_id, ["memory"]) == {}
    assert store.get_blobs([_sha(OWN_PAYLOAD)]) == {}
    assert store.get_blobs([_sha(PAYLOAD)]) == {_sha(PAYLOAD): PAYLOAD}  # the keeper still refers to it
    m.drain_recall()  # the vectors leave through the outbox
    for old in seeded["old"]:
        storage_id = manager.storage_id(old)
        assert recall.store.recall_vectors(storage_id) == []
        assert recall.index.search("automobile lease", 50, {"session_id": storage_id}) == []
    assert recall.store.recall_vectors(manager.storage_id(seeded["keeper"]))
    assert {s: _snapshot(store, manager.storage_id(s)) for s in seeded["fresh"]} == before
    assert m.prune(timedelta(days=30)).session_ids == ()


def test_a_dry_run_reports_what_would_go_and_changes_nothing(make_manager):
    m = make_manager()
    seeded = _setup(m)
    store, manager = seeded["store"], raw(m)
    every = [*seeded["fresh"], *seeded["old"]]
    before = {s: _snapshot(store, manager.storage_id(s)) for s in every}
    stats = store.stats()

    dry = m.prune(timedelta(days=30), dry_run=True)

    assert dry.dry_run and sorted(dry.session_ids) == seeded["old"]
    assert {s: _snapshot(store, manager.storage_id(s)) for s in every} == before
    assert store.stats() == stats
    assert m.prune(timedelta(days=30)).counts == dry.counts


def test_a_dry_run_counts_a_payload_shared_across_listed_chunks_once(make_manager):
    """A store that lists ids a chunk at a time (``max_list``) still counts a payload held only
    by pruned sessions of two chunks once, as the prune removes it."""
    m = make_manager()
    seeded = _setup(m)
    store = raw(seeded["store"])
    for name in seeded["old"]:
        m.get_session(name).import_message(_file("both", SHARED_OLD_PAYLOAD), parent_id="a2", created_at=LONG_AGO)
    with short_lists(store, 1):
        dry = m.prune(timedelta(days=30), dry_run=True)
        assert dry.counts.blobs == 2  # the old sessions' own payload and the one they share
        assert m.prune(timedelta(days=30)).counts == dry.counts


def test_prune_keeps_a_session_with_any_recent_activity(make_manager):
    m = make_manager("kinds")
    store, manager = raw(m).store, raw(m)

    def old_session(name: str) -> Any:
        session = m.get_session(name).with_context("memory").with_context("notes", provider=StoreSearchContext())
        session.import_message(msg("m", "long ago"), parent_id=None, created_at=LONG_AGO)
        return session

    old_session("idle")
    old_session("message").append_message(msg("n", "just now"))
    old_session("overlay").add_compaction("summary written now", "m", "m")
    old_session("block").replace_context_block("memory", "written now")
    tools = {tool.name: tool for tool in old_session("entry").tools()}
    tools["set_context"].invoke({"label": "notes", "content": "an entry written now"})
    old_session("prompt").with_cached_prompt().freeze_system_prompt()
    names = ["registered", "registered-idle"]
    _copy_back_in_time(store, manager.storage_id("idle"), map(manager.storage_id, names), register=True)
    assert m.get("registered").updated_at == LONG_AGO
    m.rename("registered", "touched now")  # the registry row's updated_at

    result = m.prune(timedelta(days=30))

    assert sorted(result.session_ids) == ["idle", "registered-idle"] and result.counts.registry == 1
    for kept in ("message", "overlay", "block", "entry", "prompt", "registered"):
        assert store.session_summaries([manager.storage_id(kept)]), kept


def test_prune_stays_in_its_namespace_unless_told(make_manager):
    m = make_manager("north")
    other = make_manager("south", store=raw(m).store)
    for manager in (m, other):
        manager.get_session("old").import_message(msg("m", "long ago"), parent_id=None, created_at=LONG_AGO)
    assert m.prune(timedelta(days=30)).session_ids == ("old",)
    assert other.get_history("old") != []
    assert m.prune(timedelta(days=30), namespace="south").storage_ids == ("south:old",)
    assert other.get_history("old") == []


def test_a_pruned_session_loses_its_cached_prompt_and_a_bad_duration_is_refused(make_manager):
    m = make_manager("prompts")
    session = m.get_session(m.create("chat").id).with_context("memory").with_cached_prompt()
    session.append_message(msg("m", "hello"))
    session.replace_context_block("memory", "a fact")
    session.freeze_system_prompt()
    time.sleep(0.05)
    result = m.prune(timedelta(milliseconds=10))
    assert result.counts.prompts == 1 and result.counts.registry == 1 and result.counts.block_versions == 1
    assert raw(m).store.get_cached_prompt(session.session_id) is None
    for bad in (timedelta(0), timedelta(days=-1), 30):
        try:
            m.prune(bad)
        except ValueError:
            continue
        raise AssertionError(f"prune({bad!r}) was accepted")


def test_retention_prunes_on_its_own_at_most_once_an_hour(make_session, make_manager):
    first = make_session("writer", retention=timedelta(days=30))
    store = raw(first).store
    m = make_manager(store=store)
    for name in ("old-a", "ns:old-b"):
        m.get_session(name).import_message(msg("m", "long ago"), parent_id=None, created_at=LONG_AGO)
    first.append_message(msg("w1", "a write prunes the default namespace"))
    assert m.get_history("old-a") == [] and m.get_history("ns:old-b") == []
    m.get_session("old-c").import_message(msg("m", "long ago"), parent_id=None, created_at=LONG_AGO)
    later = make_session("another", store=store, retention=timedelta(days=30))
    later.append_message(msg("w2", "within the hour: no prune"))
    assert m.get_history("old-c") != []
    assert first.get_history() != [] and later.get_history() != []
    team = make_manager("team", store=store, retention=timedelta(days=30))
    team.get_session("stale").import_message(msg("m", "long ago"), parent_id=None, created_at=LONG_AGO)
    team.append("active", msg("t1", "a manager's write prunes its namespace"))
    assert team.get_history("stale") == [] and team.get_history("active") != []


def test_erase_counts_what_it_removes(make_manager, make_index):
    m = make_manager("gone")
    seeded = _setup(m, make_index)
    store, manager = seeded["store"], raw(m)
    recall = manager.recall
    keeper_id = manager.storage_id(seeded["keeper"])
    vectors = len(recall.store.recall_vectors(keeper_id))
    assert vectors

    result = m.erase(seeded["keeper"])

    assert result.session_ids == (seeded["keeper"],) and result.vectors_pending == 0 and not result.vacuumed
    counts = result.counts
    assert (counts.registry, counts.messages, counts.compactions, counts.prompts) == (1, 5, 1, 1)
    assert (counts.blocks, counts.block_versions, counts.search_entries, counts.blobs) == (1, 3, 1, 0)
    assert counts.vectors == vectors
    assert recall.store.recall_vectors(keeper_id) == []  # now, not through the outbox
    assert recall.index.search("automobile lease", 50, {"session_id": keeper_id}) == []
    assert recall.backlog().pending == 0
    assert store.session_summaries([keeper_id]) == []
    assert m.erase(seeded["keeper"]).session_ids == ()

    alone = m.get_session("old-two")
    assert alone.erase().counts.messages == 5
    everything = m.erase_namespace("gone")
    assert sorted(everything.session_ids) == ["old-one", "unregistered"]
    assert everything.counts.blobs == 2 and everything.counts.messages == 7
    assert m.list_sessions() == [] and store.get_blobs([_sha(PAYLOAD), _sha(OWN_PAYLOAD)]) == {}


def test_erase_messages_removes_them_the_overlays_made_from_them_and_their_own_payloads(make_manager, make_index):
    m = make_manager("gone")
    seeded = _setup(m, make_index)
    store, manager = seeded["store"], raw(m)
    recall = manager.recall
    keeper = seeded["keeper"]
    keeper_id = manager.storage_id(keeper)
    session = m.get_session(keeper)
    session.append_message(_file("own2", OWN_PAYLOAD * 2))
    session.add_compaction("Later: the file.", "a2", "own2")
    m.drain_recall()
    vectors = len(recall.store.recall_vectors(keeper_id, "message", ["t1", "own2"]))
    assert vectors

    result = m.erase_messages(keeper, ["t1", "own2", "never-written", "t1"])

    assert result.session_ids == (keeper,) and result.vectors_pending == 0 and not result.vacuumed
    counts = result.counts
    assert (counts.messages, counts.compactions, counts.blobs, counts.vectors) == (2, 2, 1, vectors)
    assert (counts.registry, counts.blocks, counts.search_entries, counts.prompts) == (0, 0, 0, 0)
    assert recall.store.recall_vectors(keeper_id, "message", ["t1", "own2"]) == []  # now, not through the outbox
    assert recall.backlog().pending == 0
    assert store.get_blobs([_sha(OWN_PAYLOAD * 2)]) == {}
    assert store.get_blobs([_sha(PAYLOAD)]) != {}  # the other sessions' copy of the shared one stays
    assert session.get_message("t1") is None and session.get_message("f1") is not None  # a root now
    assert [c.summary for c in session.get_compactions()] == []
    assert [message.id for message in session.get_history()] == ["f1", "a2"]  # f1 a root now, a2 the latest leaf
    assert session.search("lease") and not any(hit.id == "t1" for hit in session.search("years"))
    assert session.get_context_block("memory").content == "Leases a car for three years."
    assert m.erase_messages(keeper, ["t1"]).session_ids == ()
    other = m.get_session("old-one")
    assert other.get_message("t1") is not None and other.get_compactions()  # another session's copy stays


def test_erase_context_removes_a_block_or_an_entry_with_every_version_and_the_cached_prompt(make_manager, make_index):
    m = make_manager("gone")
    seeded = _setup(m, make_index)
    manager = raw(m)
    recall = manager.recall
    keeper = seeded["keeper"]
    keeper_id = manager.storage_id(keeper)
    session = m.get_session(keeper)
    tools = {tool.name: tool for tool in session.tools()}
    tools["set_context"].invoke({"label": "notes", "content": "The garage is on Elm Street."})
    m.drain_recall()
    entries = [row for row in recall.store.recall_vectors(keeper_id, "entry")]
    assert len({row.ref for row in entries}) == 2
    first = sorted({row.ref for row in entries})[0].split("\x1f", 1)[1]
    assert "Leases a car for three years." in session.freeze_system_prompt()

    one = m.erase_context(keeper, "notes", key=first)

    assert one.session_ids == (keeper,) and one.vectors_pending == 0
    counts = one.counts
    assert (counts.blocks, counts.block_versions, counts.search_entries, counts.prompts) == (0, 1, 1, 1)
    assert counts.vectors == sum(1 for row in entries if row.ref.endswith(first))
    assert len(recall.store.recall_vectors(keeper_id, "entry")) == len(entries) - counts.vectors
    assert session.get_context_history("notes", key=first) == []

    block = m.erase_context(keeper, "memory")

    counts = block.counts
    assert (counts.blocks, counts.block_versions, counts.search_entries, counts.vectors) == (1, 2, 0, 0)
    assert session.get_context_block("memory").content == "" and session.get_context_history("memory") == []
    assert "Leases a car" not in session.freeze_system_prompt()  # rendered anew
    everything = m.erase_context(keeper, "notes")
    assert (everything.counts.search_entries, everything.counts.block_versions) == (1, 1)
    assert recall.store.recall_vectors(keeper_id, "entry") == [] and recall.backlog().pending == 0
    assert m.erase_context(keeper, "notes").session_ids == () == m.erase_context(keeper, "never").session_ids
    assert [msg.id for msg in session.get_history()][-1] == "a2"  # the messages stay
    other = m.get_session("old-one").with_context("memory")
    assert other.get_context_block("memory").content == "Leases a car for three years."  # another session's


skip_where_unsupported(globals())
