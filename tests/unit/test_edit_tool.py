"""``edit_context`` (``with_edit_tool()``): one exact occurrence replaced, every refusal an
``Error: ...`` string that says which and changes nothing (issue 21)."""

from __future__ import annotations

import pytest

from sessions_core import Session, SessionManager, StaticContext, StoreSearchContext, to_openai_tools


@pytest.fixture
def session():
    with (
        Session(":memory:")
        .for_session("s")
        .with_context("memory", description="Facts", max_tokens=30)
        .with_context("kb", provider=StoreSearchContext())
        .with_context("rules", provider=StaticContext("Be kind."))
        .with_edit_tool() as session
    ):
        yield session


def tool(session, name="edit_context"):
    return {t.name: t for t in session.tools()}[name]


def test_the_tool_is_there_only_when_asked_for():
    plain = Session(":memory:").for_session("s").with_context("memory", description="Facts")
    assert [t.name for t in plain.tools()] == ["set_context"]
    assert [t.name for t in plain.with_edit_tool().tools()] == ["set_context", "edit_context"]
    assert [t.name for t in plain.declared_tools()] == ["set_context", "edit_context"]
    assert "edit_context" in [t["function"]["name"] for t in to_openai_tools(plain.tools())]
    manager = SessionManager(":memory:").with_context("memory", description="Facts")
    assert "edit_context" not in [t.name for t in manager.session_tools("a")]
    manager.with_edit_tool()
    assert [t.name for t in manager.session_tools("a")] == ["set_context", "edit_context", "session_search"]
    read_only = Session(":memory:").with_context("rules", provider=StaticContext("x")).with_edit_tool()
    assert read_only.tools() == []  # no writable block: neither write tool


def test_schema(session):
    edit = tool(session)
    assert edit.parameters["required"] == ["label", "old_text", "new_text"]
    assert edit.parameters["properties"]["label"]["enum"] == ["memory", "kb"]
    assert set(edit.parameters["properties"]) == {"label", "old_text", "new_text", "key"}


def test_one_occurrence_is_replaced_and_kept_as_a_version(session):
    session.replace_context_block("memory", "User likes tea. User lives in Porto.")
    result = tool(session).invoke({"label": "memory", "old_text": "Porto", "new_text": "Lisbon"}, tool_call_id="c1")
    assert result == "Edited memory. Usage: 33% (10/30 tokens)"
    assert session.get_context_block("memory").content == "User likes tea. User lives in Lisbon."
    latest = session.get_context_history("memory", limit=1)[0]
    assert (latest.version, latest.source, latest.tool_call_id) == (2, "tool", "c1")
    tool(session).invoke({"label": "memory", "old_text": " User lives in Lisbon.", "new_text": ""})
    assert session.get_context_block("memory").content == "User likes tea."


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            {"label": "memory", "old_text": "User", "new_text": "U"},
            'Error: old_text occurs 2 times in block "memory"; nothing changed'
            " (pass a longer old_text, one that occurs once)",
        ),
        (
            {"label": "memory", "old_text": "Madrid", "new_text": "x"},
            'Error: old_text does not occur in block "memory"; nothing changed',
        ),
        ({"label": "memory", "old_text": "", "new_text": "x"}, "Error: old_text must not be empty"),
        (
            {"label": "memory", "old_text": "tea", "new_text": "tea " * 40},
            'Error: the edit would take block "memory" to 62 tokens, over its limit of 30; nothing changed',
        ),
        ({"label": "rules", "old_text": "kind", "new_text": "rude"}, 'Error: block "rules" is read-only'),
        ({"label": "nope", "old_text": "a", "new_text": "b"}, 'Error: block "nope" not found'),
        (
            {"label": "kb", "old_text": "a", "new_text": "b"},
            'Error: block "kb" holds keyed entries: pass the key of the entry to edit',
        ),
        ({"label": "kb", "old_text": "a", "new_text": "b", "key": "ghost"}, 'Error: no entry "ghost" in block "kb"'),
    ],
)
def test_each_refusal_says_which_and_changes_nothing(session, args, expected):
    session.replace_context_block("memory", "User likes tea. User lives in Porto.")
    before = [v.version for v in session.get_context_history("memory")]
    assert tool(session).invoke(args) == expected
    assert session.get_context_block("memory").content == "User likes tea. User lives in Porto."
    assert session.get_context_block("rules").content == "Be kind."
    assert [v.version for v in session.get_context_history("memory")] == before


def test_an_entry_of_a_searchable_block_is_edited_by_key(session):
    set_context = tool(session, "set_context")
    set_context.invoke({"label": "kb", "content": "Paris is in France", "metadata": {"title": "paris"}})
    assert tool(session).invoke({"label": "kb", "key": "paris", "old_text": "France", "new_text": "the EU"}) == (
        'Edited "paris" in kb.'
    )
    assert [v.content for v in session.get_context_history("kb", "paris")] == [
        "Paris is in the EU",
        "Paris is in France",
    ]
    assert session.store.search_entries("s", "kb", "EU", 5) == [("paris", "Paris is in the EU")]
    assert tool(session).invoke({"label": "kb", "key": "paris", "old_text": "France", "new_text": "x"}) == (
        'Error: old_text does not occur in entry "paris" of block "kb"; nothing changed'
    )
