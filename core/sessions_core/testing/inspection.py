"""The optional ``InspectableStore`` contract (what the CLI and export need): listing sessions,
paging through messages and search entries, importing overlays, counting rows. Each test asks
for ``inspectable_store``, so it runs only where the store implements ``InspectableStore``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from sessions_core import Session, SessionManager, StaticContext, StoreSearchContext
from sessions_core.stores.base import CompactionRow

from .builders import msg
from .harness import skip_where_unsupported

SESSION = "chat"


def _tool_pair(call_id: str, result_id: str) -> list[dict[str, Any]]:
    call = {"type": "tool-call", "toolCallId": "c1", "toolName": "weather", "input": {"city": "Lisbon"}}
    result = {"type": "tool-result", "toolCallId": "c1", "toolName": "weather", "output": {"temp": 22}}
    return [
        {"id": call_id, "role": "assistant", "parts": [call]},
        {"id": result_id, "role": "tool", "parts": [result]},
    ]


def populate(store: Any) -> dict[str, str]:
    """A branched session with an overlay, store-backed blocks, two search entries and a cached
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
    for message in _tool_pair("a2", "t1"):
        session.append_message(message)
    session.append_message(msg("a3", "About 22 degrees and sunny.", role="assistant"))
    session.append_message(msg("a1b", "Porto might suit you better.", role="assistant"), parent_id="u1")
    session.append_message(msg("u3b", "Tell me more about Porto"))
    session.append_message(msg("a3c", "Regenerated: warm, 22 degrees.", role="assistant"), parent_id="t1")
    session.add_compaction("The user plans a Lisbon trip and asked about the weather.", "a1", "t1")
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
    return {"manager_session": manager.storage_id(info.id)}


def test_sessions_are_listed_with_their_summaries(inspectable_store):
    store = inspectable_store
    facts = populate(store)
    summaries = {s.session_id: s for s in store.session_summaries()}
    assert set(summaries) == {SESSION, facts["manager_session"], "blocks-only"}
    assert summaries[SESSION].message_count == 9 and summaries[SESSION].registry is None
    assert summaries[facts["manager_session"]].registry.name == "Trip planning"
    assert summaries["blocks-only"].message_count == 0 and summaries["blocks-only"].last_created_at_us is None
    assert [s.session_id for s in store.session_summaries([SESSION, "nope"])] == [SESSION]
    assert store.session_summaries(["nope"]) == []


def test_messages_blocks_and_search_entries_are_paged(inspectable_store):
    store = inspectable_store
    populate(store)
    seen, after = [], 0
    while page := store.message_rows(SESSION, after, 2):
        assert len(page) <= 2
        seen += [row.id for _seq, row in page]
        after = page[-1][0]
    assert seen == ["u1", "a1", "u2", "a2", "t1", "a3", "a1b", "u3b", "a3c"]

    assert [(b.label, b.content) for b in store.list_blocks(SESSION)] == [("memory", "User likes coffee.")]
    assert store.search_entry_counts(SESSION) == [("knowledge", 2)]
    keys, after = [], 0
    while page := store.search_entry_rows(SESSION, after, 1):
        keys += [e.key for e in page]
        after = page[-1].seq
    assert [key.split("-")[0] for key in keys] == ["lisbon", "porto"]  # keys are slugs of the content


def test_message_rows_page_by_time_and_keep_every_row(inspectable_store):
    store = inspectable_store
    session = Session(store).for_session("s")
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    session.import_message(msg("late-parent"), parent_id=None, created_at=base + timedelta(hours=1))
    session.import_message(msg("early-child"), parent_id="late-parent", created_at=base)
    for i in range(5):  # equal times: insertion order breaks the tie
        session.import_message(msg(f"same-{i}"), parent_id=None, created_at=base + timedelta(hours=2))
    seen, after = [], 0
    while page := store.message_rows("s", after, 2):
        seen += [row.id for _seq, row in page]
        after = page[-1][0]
    assert seen == ["early-child", "late-parent"] + [f"same-{i}" for i in range(5)]


def test_an_imported_overlay_keeps_its_id_once_in_the_store(inspectable_store):
    store = inspectable_store
    populate(store)
    row = CompactionRow("imported-1", "summary", "u1", "a1", 42)
    assert store.import_compaction(SESSION, row) is True
    assert store.import_compaction(SESSION, row) is False
    assert store.import_compaction("other", row) is False  # ids are unique in the store
    assert [c for c in store.get_compactions(SESSION) if c.id == "imported-1"] == [row]


def test_the_message_tree_is_every_row_without_its_content(inspectable_store):
    store = inspectable_store
    populate(store)
    rows, after = [], 0
    while page := store.message_rows(SESSION, after, 3):
        rows += [(row.id, row.parent_id, row.role, row.created_at_us) for _, row in page]
        after = page[-1][0]
    assert store.message_tree(SESSION) == rows and len(rows) > 3
    assert store.message_tree("nobody") == []


def test_imported_blocks_and_entries_keep_their_times(inspectable_store):
    store = inspectable_store
    store.import_block(SESSION, "memory", "Likes tea.", 1_000)
    blocks = [(b.label, b.content, b.updated_at_us) for b in store.list_blocks(SESSION)]
    assert blocks == [("memory", "Likes tea.", 1_000)]
    store.import_search_entry(SESSION, "kb", "tea", "Green tea", 2_000, 3_000)
    store.import_search_entry(SESSION, "kb", "tea", "Black tea", 5_000, 6_000)  # stored already: keeps its creation
    [entry] = store.search_entry_rows(SESSION)
    assert (entry.content, entry.created_at_us, entry.updated_at_us) == ("Black tea", 2_000, 6_000)
    assert store.search_entries(SESSION, "kb", "black", 10) == [("tea", "Black tea")]


def test_stats_count_every_kind_of_row(inspectable_store):
    store = inspectable_store
    populate(store)
    store.import_compaction(SESSION, CompactionRow("imported-1", "summary", "u1", "a1", 42))
    stats = store.stats()
    assert (stats.sessions, stats.registered_sessions, stats.messages) == (3, 1, 10)
    assert (stats.compactions, stats.blocks, stats.cached_prompts, stats.search_entries) == (2, 2, 1, 2)
    assert stats.schema_version >= 1 and stats.size_bytes > 0


skip_where_unsupported(globals())
