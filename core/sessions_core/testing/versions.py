"""Context-block versions contract: every write of a store-backed block (and of a searchable
block's entries) is kept as a version with its source; restore, retention, isolation, the change
feed, and failed writes recording nothing. A store that keeps no versions (the ``Store``
defaults) skips it."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_core import ContextError, InvalidTextError, StoreSearchContext
from sessions_core.provenance import writing_as
from sessions_core.stores.base import BlockVersions, supports
from sessions_core.transfer import export_lines, import_records

from .harness import AsyncDriver, skip_where_unsupported


def _session(s: Any) -> Any:
    return s.session if isinstance(s, AsyncDriver) else s


def _versions(s: Any, label: str = "memory", key: str | None = None) -> list[tuple[int, str, str, str | None]]:
    return [(v.version, v.content, v.source, v.tool_call_id) for v in s.get_context_history(label, key)]


def _keeps_versions(s: Any) -> None:
    if not supports(_session(s).store, BlockVersions):
        pytest.skip("this store keeps no block versions (optional BlockVersions)")


def test_every_write_is_a_version_with_where_it_came_from(make_session):
    s = make_session(session_id="v1").with_context("memory", description="Facts", max_tokens=200)
    s.with_context("kb", provider=StoreSearchContext())
    _keeps_versions(s)
    s.replace_context_block("memory", "likes tea")
    s.append_context_block("memory", "lives in Lisbon")
    tools = {tool.name: tool for tool in _session(s).tools()}
    assert (
        tools["set_context"]
        .invoke({"label": "memory", "content": "likes coffee"}, tool_call_id="call_7")
        .startswith("Written to memory.")
    )
    with writing_as("tool", "call_8"):  # what an adapter sets around a tool it runs
        tools["set_context"].invoke({"label": "memory", "content": "also likes jazz", "action": "append"})
    assert _versions(s) == [
        (4, "likes coffee\nalso likes jazz", "tool", "call_8"),
        (3, "likes coffee", "tool", "call_7"),
        (2, "likes tea\nlives in Lisbon", "code", None),
        (1, "likes tea", "code", None),
    ]
    assert [v.version for v in s.get_context_history("memory", limit=2)] == [4, 3]
    history = s.get_context_history("memory")
    assert all(later.created_at >= earlier.created_at for later, earlier in zip(history, history[1:]))
    assert s.get_context_block("memory").content == "likes coffee\nalso likes jazz"
    # A searchable block's entries have versions of their own, by key.
    tools["set_context"].invoke({"label": "kb", "content": "Paris is in France", "metadata": {"title": "paris"}})
    tools["set_context"].invoke({"label": "kb", "content": "Paris: 2.1M people", "metadata": {"title": "paris"}})
    assert [(v.version, v.content, v.source) for v in s.get_context_history("kb", "paris")] == [
        (2, "Paris: 2.1M people", "tool"),
        (1, "Paris is in France", "tool"),
    ]
    assert s.get_context_history("kb", "nope") == [] and s.get_context_history("kb") == []
    with pytest.raises(ContextError, match='Block "ghost" not found'):
        s.get_context_history("ghost")


def test_restore_makes_an_old_version_current_as_a_new_one(make_session):
    s = make_session(session_id="v2").with_context("memory", description="Facts", max_tokens=20)
    _keeps_versions(s)
    s.replace_context_block("memory", "the user is Ada")
    s.replace_context_block("memory", "hallucinated")
    restored = s.restore_context("memory", 1)
    assert (restored.version, restored.content, restored.source) == (3, "the user is Ada", "code")
    assert s.get_context_block("memory").content == "the user is Ada"
    assert [v for v, *_ in _versions(s)] == [3, 2, 1]  # history is never rewritten
    with pytest.raises(ContextError, match="has no version 9"):
        s.restore_context("memory", 9)
    # A restore is a write like any other: over max_tokens it is refused and records nothing.
    s.replace_context_block("memory", "short")
    long_text = "word " * 30
    _session(s).store.write_block(_session(s).session_id, "memory", long_text)  # stored around the limit
    assert s.get_context_history("memory", limit=1)[0].content == long_text
    before = _versions(s)
    with pytest.raises(ContextError, match="exceeds maxTokens"):
        s.restore_context("memory", before[0][0])
    assert _versions(s) == before


def test_keyed_entries_restore_by_key(make_session):
    s = make_session(session_id="v3").with_context("kb", provider=StoreSearchContext())
    _keeps_versions(s)
    store, sid = _session(s).store, _session(s).session_id
    set_context = {tool.name: tool for tool in _session(s).tools()}["set_context"]
    for text in ("Lisbon has trams", "Lisbon has no trams"):
        set_context.invoke({"label": "kb", "content": text, "metadata": {"title": "lisbon"}})
    restored = s.restore_context("kb", 1, "lisbon")
    assert (restored.version, restored.content) == (3, "Lisbon has trams")
    assert store.search_entries(sid, "kb", "trams", 5) == [("lisbon", "Lisbon has trams")]


def test_retention_keeps_the_newest_versions(make_session):
    s = make_session(session_id="v4").with_context("memory", description="Facts", keep_versions=2)
    _keeps_versions(s)
    for n in range(5):
        s.replace_context_block("memory", f"fact {n}")
    assert _versions(s) == [(5, "fact 4", "code", None), (4, "fact 3", "code", None)]
    with pytest.raises(ValueError, match="keep_versions"):
        s.with_context("other", keep_versions=0)


def test_failed_writes_record_no_version(make_session):
    s = make_session(session_id="v5").with_context("memory", description="Facts", max_tokens=5)
    _keeps_versions(s)
    s.replace_context_block("memory", "ok")
    with pytest.raises(ContextError, match="exceeds maxTokens"):
        s.replace_context_block("memory", "far too long for five tokens " * 3)
    with pytest.raises(InvalidTextError):
        s.replace_context_block("memory", "bad \ud800")
    set_context = {tool.name: tool for tool in _session(s).tools()}["set_context"]
    assert set_context.invoke({"label": "memory", "content": "x " * 40}).startswith("Error:")
    assert _versions(s) == [(1, "ok", "code", None)]


def test_versions_are_per_session_and_namespace_and_go_with_the_session(make_manager):
    alpha = make_manager(namespace="alpha")
    store = _session(alpha).store
    if not supports(store, BlockVersions):
        pytest.skip("this store keeps no block versions (optional BlockVersions)")
    beta = make_manager(namespace="beta", store=store)
    for manager in (alpha, beta):
        manager.with_context("memory", description="Facts")
    first, second, other = alpha.create("first"), alpha.create("second"), beta.create("first")
    alpha.get_session(first.id).replace_context_block("memory", "alpha first")
    alpha.get_session(second.id).replace_context_block("memory", "alpha second")
    beta.get_session(other.id).replace_context_block("memory", "beta first")

    def contents(manager: Any, session_id: str) -> list[str]:
        return [v.content for v in manager.get_session(session_id).get_context_history("memory")]

    assert contents(alpha, first.id) == ["alpha first"]
    assert contents(alpha, second.id) == ["alpha second"]
    assert contents(beta, other.id) == ["beta first"]
    alpha.delete(first.id)
    assert store.block_versions(_session(alpha).storage_id(first.id), "memory") == []
    assert contents(beta, other.id) == ["beta first"] and contents(alpha, second.id) == ["alpha second"]


def test_block_events_carry_the_version(make_session):
    s = make_session(session_id="v6").with_context("memory", description="Facts")
    _keeps_versions(s)
    events: list[Any] = []
    _session(s).subscribe(events.append)
    s.replace_context_block("memory", "one")
    s.replace_context_block("memory", "two")
    s.restore_context("memory", 1)
    assert [(e.type, e.label, e.version) for e in events] == [
        ("block", "memory", 1),
        ("block", "memory", 2),
        ("block", "memory", 3),
    ]


def test_export_and_import_carry_the_versions(make_session):
    s = make_session(session_id="v7").with_context("memory", description="Facts")
    s.with_context("kb", provider=StoreSearchContext())
    _keeps_versions(s)
    s.replace_context_block("memory", "first fact")
    {tool.name: tool for tool in _session(s).tools()}["set_context"].invoke(
        {"label": "memory", "content": "second fact"}, tool_call_id="call_2"
    )
    {tool.name: tool for tool in _session(s).tools()}["set_context"].invoke(
        {"label": "kb", "content": "an entry", "metadata": {"title": "e"}}
    )
    store = _session(s).store
    lines = list(export_lines(store, "v7"))
    import_records(store, lines, into="v7-copy")

    def kept(session_id: str, label: str, key: str | None = None) -> list[tuple[Any, ...]]:
        return [
            (v.version, v.content, v.created_at_us, v.source, v.tool_call_id)
            for v in store.block_versions(session_id, label, key)
        ]

    assert kept("v7-copy", "memory") == kept("v7", "memory") and len(kept("v7", "memory")) == 2
    assert kept("v7-copy", "kb", "e") == kept("v7", "kb", "e") and len(kept("v7", "kb", "e")) == 1
    assert store.get_block("v7-copy", "memory") == "second fact"
    assert store.search_entries("v7-copy", "kb", "entry", 5) == [("e", "an entry")]
    report = import_records(store, lines, into="v7-copy")  # again: nothing new
    assert report.stored == {} and report.present["block_version"] == 3
    assert kept("v7-copy", "memory") == kept("v7", "memory")
    # The next write goes on from the imported versions.
    copy = type(_session(s))(store).for_session("v7-copy").with_context("memory", description="Facts")
    copy.replace_context_block("memory", "third fact")
    assert [v.version for v in copy.get_context_history("memory")] == [3, 2, 1]


skip_where_unsupported(globals())
