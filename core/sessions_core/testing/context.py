"""Context contract through a Session over real stores: the rendered prompt, the memory tools,
persistence across processes, the frozen-prompt lifecycle, session isolation and bad input.

The pure pieces (rendering rules, keys, schemas in isolation, file skills) have unit tests in
``tests/unit``; here every block lives in the store (or a skill folder) and is read back fresh.
One module over 500 lines because it is one contract: its tests share the configured session,
the skill folder and the tool helpers above them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions_core import (
    ContextError,
    FileSkillProvider,
    StaticContext,
    StoreContext,
    StoreSearchContext,
    Tool,
    estimate_tokens,
)
from sessions_core.context import context_entry_key

from .builders import msg, untimed
from .harness import AsyncDriver, skip_where_unsupported, unsupported_skips

SEP = "═" * 46
SQL_SKILL = "---\ndescription: SQL guide\n---\nUse indexes.\n"
REVIEW_SKILL = "---\nname: code-review\ndescription: Code review\n---\nReview carefully.\n"
METADATA_HINT = (
    "\n\nFor keyed blocks (skill collections / searchable), pass `metadata: { title, description }` — title "
    "stabilises updates, description helps the model pick entries. Metadata is optional; short content rarely "
    "needs it, long loadable entries benefit most."
)


# -- helpers -----------------------------------------------------------------------------------


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "skills"
    (folder / "code-review").mkdir(parents=True)
    (folder / "code-review" / "SKILL.md").write_text(REVIEW_SKILL, encoding="utf-8")
    (folder / "sql-query.md").write_text(SQL_SKILL, encoding="utf-8")
    return folder


def session_of(s: Any) -> Any:
    return s.session if isinstance(s, AsyncDriver) else s


def tools_of(s: Any) -> dict[str, Tool]:
    return {tool.name: tool for tool in s.tools()}


def invoke(s: Any, tool: Tool, args: Any) -> str:
    """``tool.invoke`` in sync mode, ``await tool.ainvoke`` on the driver's loop in async mode."""
    if isinstance(s, AsyncDriver):
        return s._loop.run_until_complete(tool.ainvoke(args))
    return tool.invoke(args)


def call_tool(s: Any, name: str, args: Any) -> str:
    return invoke(s, tools_of(s)[name], args)


@pytest.fixture
def stored(backend: Any) -> Iterator[Any]:
    """A store of its own on the test's database (in memory: the sessions' one), to read what
    was really stored, past any session's in-memory state."""
    store = backend.open()
    yield store
    if backend.persistent:
        store.close()


def configure(s: Any, skills_dir: Path, *, cached: bool = True, memory_max: int | None = 1100) -> Any:
    """The reference's worked-example blocks. Builder calls return the bare Session, so the
    (possibly async) driver ``s`` is configured in place and returned."""
    s.with_context("soul", description="Identity", provider=StaticContext("You are a helpful assistant."))
    s.with_context("memory", description="Learned facts", max_tokens=memory_max)
    s.with_context("skills", description="Project docs", provider=FileSkillProvider(skills_dir))
    s.with_context("knowledge", description="Searchable knowledge base", provider=StoreSearchContext())
    if cached:
        s.with_cached_prompt()
    return s


def block_text(header: str, content: str) -> str:
    return f"{SEP}\n{header}\n{SEP}\n{content}"


# -- golden prompts ------------------------------------------------------------------------------


def test_fresh_blocks_render_empty_writable_skill_and_search_blocks(make_session, stored, skills_dir):
    s = configure(make_session("u1"), skills_dir)
    s.with_context("empty", provider=StaticContext(""))  # empty read-only: never rendered
    expected = "\n\n".join(
        [
            block_text("SOUL (Identity) [readonly]", "You are a helpful assistant."),
            block_text("MEMORY (Learned facts) [0% — 0/1100 tokens] [writable]", ""),
            block_text("SKILLS (Project docs) [loadable]", "- code-review: Code review\n- sql-query: SQL guide"),
            block_text("KNOWLEDGE (Searchable knowledge base) [searchable]", ""),
        ]
    )
    assert s.freeze_system_prompt() == expected
    assert stored.get_cached_prompt("u1") == expected


def test_worked_example_through_a_session_over_the_store(make_session, skills_dir, stored):
    s = configure(make_session("u1"), skills_dir)
    s.with_context("notes", provider=StoreContext())  # writable, no description, no meter
    s.replace_context_block("memory", "User likes coffee.")
    s.append_context_block("memory", "User prefers dark roast.")
    s.replace_context_block("notes", "Metric units.")
    tools = tools_of(s)
    invoke(s, tools["set_context"], {"label": "knowledge", "content": "Deploys need approval"})
    invoke(s, tools["set_context"], {"label": "knowledge", "content": "Tea at four.", "metadata": {"title": "Tea"}})
    expected = "\n\n".join(
        [
            block_text("SOUL (Identity) [readonly]", "You are a helpful assistant."),
            block_text(
                "MEMORY (Learned facts) [1% — 11/1100 tokens] [writable]",
                "User likes coffee.\nUser prefers dark roast.",
            ),
            block_text("SKILLS (Project docs) [loadable]", "- code-review: Code review\n- sql-query: SQL guide"),
            block_text("KNOWLEDGE (Searchable knowledge base) [searchable]", "2 entries indexed."),
            block_text("NOTES [writable]", "Metric units."),
        ]
    )
    assert s.freeze_system_prompt() == expected
    assert stored.get_cached_prompt("u1") == expected
    assert stored.get_block("u1", "memory") == "User likes coffee.\nUser prefers dark roast."
    assert stored.get_block("u1", "notes") == "Metric units."
    assert stored.count_search_entries("u1", "knowledge") == 2
    blocks = s.get_context_blocks()
    assert [(b.label, b.writable, b.is_skill, b.is_searchable) for b in blocks] == [
        ("soul", False, False, False),
        ("memory", True, False, False),
        ("skills", True, True, False),
        ("knowledge", True, False, True),
        ("notes", True, False, False),
    ]
    assert all(b.tokens == estimate_tokens(b.content) for b in blocks)
    assert [b.max_tokens for b in blocks] == [None, 1100, None, None, None]


def test_meter_follows_the_stored_content(make_session, skills_dir):
    s = make_session("m")
    s.with_context("memory", description="Learned facts", max_tokens=10)
    s.replace_context_block("memory", "word " * 3)  # 4 tokens of 10
    assert s.refresh_system_prompt() == block_text(
        "MEMORY (Learned facts) [40% — 4/10 tokens] [writable]", "word word word "
    )
    s.with_context("zero", max_tokens=0)  # 0 is no meter, and rejects any content
    assert block_text("ZERO [writable]", "") in s.refresh_system_prompt()
    with pytest.raises(ContextError, match=r'^Block "zero" exceeds maxTokens: 2 > 0$'):
        s.replace_context_block("zero", "x")


# -- tools: presence, schemas, results -----------------------------------------------------------


def _providers(kind: str, folder: Path) -> list[tuple[str, Any]]:
    return {
        "none": [],
        "static": [("soul", StaticContext("x"))],
        "empty static": [("soul", StaticContext(""))],
        "store": [("memory", None)],
        "read-only skills": [("skills", FileSkillProvider(folder, writable=False))],
        "writable skills": [("skills", FileSkillProvider(folder))],
        "search": [("knowledge", StoreSearchContext())],
        "all": [
            ("knowledge", StoreSearchContext()),
            ("skills", FileSkillProvider(folder, writable=False)),
            ("soul", StaticContext("x")),
            ("memory", None),
        ],
    }[kind]


@pytest.mark.parametrize(
    "kind, names",
    [
        ("none", []),
        ("static", []),
        ("empty static", []),
        ("store", ["set_context"]),
        ("read-only skills", ["load_context", "unload_context"]),
        ("writable skills", ["set_context", "load_context", "unload_context"]),
        ("search", ["set_context", "search_context"]),
        ("all", ["set_context", "load_context", "unload_context", "search_context"]),
    ],
)
def test_which_tools_exist_for_which_blocks(make_session, skills_dir, kind, names):
    s = make_session()
    for label, provider in _providers(kind, skills_dir):
        s.with_context(label, provider=provider)
    assert [tool.name for tool in s.tools()] == names
    assert "session_search" not in names


def test_tool_descriptions_and_exact_schemas(make_session, skills_dir):
    s = configure(make_session("u1"), skills_dir)
    s.with_context("manual", description="Read-only docs", provider=FileSkillProvider(skills_dir, writable=False))
    tools = tools_of(s)
    assert list(tools) == ["set_context", "load_context", "unload_context", "search_context"]

    set_context = tools["set_context"]
    assert set_context.description == (
        "Write to a context block. Available blocks:\n"
        '- "memory" (writable): Learned facts\n'
        '- "skills" (skill collection, keyed entries): Project docs\n'
        '- "knowledge" (searchable, keyed entries): Searchable knowledge base\n'
        "\nWrites are durable and persist across sessions." + METADATA_HINT
    )
    assert set_context.parameters == {
        "type": "object",
        "properties": {
            "label": {
                "type": "string",
                "enum": ["memory", "skills", "knowledge"],
                "description": "Block label to write to",
            },
            "content": {"type": "string", "description": "The main content to write to the block."},
            "action": {"type": "string", "enum": ["replace", "append"], "description": "replace (default) or append"},
            "metadata": {
                "type": "object",
                "description": (
                    'Optional metadata for keyed entries (skill collections, searchable blocks: "skills", '
                    '"knowledge"). Short content doesn\'t need metadata; longer loadable entries (skills) benefit '
                    "from a title and description so the model can pick the right one without loading it."
                ),
                "properties": {
                    "title": {
                        "type": "string",
                        "description": "Short title. Used as a stable identifier — entries with the same title "
                        "are updated in place, different titles create new entries.",
                    },
                    "description": {
                        "type": "string",
                        "description": "One-line summary shown alongside the title in the system prompt so the "
                        "model can decide when to load the entry.",
                    },
                },
            },
        },
        "required": ["label", "content"],
    }
    assert tools["load_context"].description == (
        'Load a document from a skill block by key. Available skill blocks: "skills", "manual". '
        "Check the system prompt for available keys."
    )
    label = {"type": "string", "enum": ["skills", "manual"], "description": "Skill block label"}
    assert tools["load_context"].parameters == {
        "type": "object",
        "properties": {"label": label, "key": {"type": "string", "description": "Skill key to load"}},
        "required": ["label", "key"],
    }
    assert tools["unload_context"].description == (
        "Unload a previously loaded skill to free context space. The skill remains available for re-loading."
        " No skills currently loaded."
    )
    assert tools["unload_context"].parameters == {
        "type": "object",
        "properties": {"label": label, "key": {"type": "string", "description": "Skill key to unload"}},
        "required": ["label", "key"],
    }
    assert tools["search_context"].description == (
        "Search for information in a searchable context block. "
        'ONLY these blocks are searchable: "knowledge". Other blocks cannot be searched.'
    )
    assert tools["search_context"].parameters == {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["knowledge"], "description": "Searchable block label"},
            "query": {"type": "string", "description": "Search query"},
        },
        "required": ["label", "query"],
    }
    for tool in tools.values():
        assert tool.to_openai() == {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        }


def test_set_context_without_keyed_blocks_has_no_metadata(make_session):
    s = make_session()
    s.with_context("memory")
    s.with_context("soul", description="Identity", provider=StaticContext("x"))
    tool = tools_of(s)["set_context"]
    assert tool.description == (
        'Write to a context block. Available blocks:\n- "memory" (writable): no description\n'
        "\nWrites are durable and persist across sessions."
    )
    assert list(tool.parameters["properties"]) == ["label", "content", "action"]


def test_set_context_plain_writes_with_and_without_meter(make_session, stored):
    s = make_session("w")
    s.with_context("memory", description="Learned facts", max_tokens=1100)
    s.with_context("notes")
    tools = tools_of(s)
    set_context = tools["set_context"]
    assert invoke(s, set_context, {"label": "memory", "content": "User likes coffee."}) == (
        "Written to memory. Usage: 0% (5/1100 tokens)"
    )
    assert invoke(s, set_context, '{"label": "memory", "content": "User prefers dark roast.", "action": "append"}') == (
        "Written to memory. Usage: 1% (11/1100 tokens)"
    )
    assert stored.get_block("w", "memory") == "User likes coffee.\nUser prefers dark roast."
    assert invoke(s, set_context, {"label": "memory", "content": "Starts over.", "action": "replace"}) == (
        "Written to memory. Usage: 0% (3/1100 tokens)"
    )
    assert invoke(s, set_context, json.dumps({"label": "notes", "content": "one", "action": None, "key": "x"})) == (
        "Written to notes. Usage: 2 tokens"
    )
    assert invoke(s, set_context, {"label": "notes", "content": "\ntwo", "action": "append"}) == (
        "Written to notes. Usage: 3 tokens"
    )
    assert stored.get_block("w", "memory") == "Starts over."
    assert stored.get_block("w", "notes") == "one\ntwo"
    assert s.get_context_block("notes").content == "one\ntwo"


def test_keyed_writes_through_set_context(make_session, stored, skills_dir):
    s = configure(make_session("k"), skills_dir)
    set_context = tools_of(s)["set_context"]
    # a skill: a file in the folder, listed with its description; the title doubles as it
    assert (
        invoke(
            s,
            set_context,
            {
                "label": "skills",
                "content": "Be formal.",
                "metadata": {"title": "Formal style", "description": "Formal tone"},
            },
        )
        == 'Indexed "formal-style" in skills.'
    )
    assert invoke(s, set_context, {"label": "skills", "content": "Arr.", "metadata": {"title": "Pirate"}}) == (
        'Indexed "pirate" in skills.'
    )
    assert "Be formal." in (skills_dir / "formal-style" / "SKILL.md").read_text(encoding="utf-8")
    assert s.get_context_block("skills").content == (
        "- code-review: Code review\n- formal-style: Formal tone\n- pirate: Pirate\n- sql-query: SQL guide"
    )
    # a search entry: no title gives a content key; the same title upserts
    assert invoke(s, set_context, '{"label": "knowledge", "content": "no key", "action": "append"}') == (
        'Indexed "no-key-1nprufp" in knowledge.'
    )
    assert invoke(
        s, set_context, {"label": "knowledge", "content": "Deploys need approval", "metadata": {"title": "Deploys"}}
    ) == ('Indexed "deploys" in knowledge.')
    assert invoke(
        s, set_context, {"label": "knowledge", "content": "Deploys are automatic", "metadata": {"title": "Deploys"}}
    ) == ('Indexed "deploys" in knowledge.')
    assert stored.count_search_entries("k", "knowledge") == 2
    assert stored.search_entries("k", "knowledge", "deploys", 10) == [("deploys", "Deploys are automatic")]
    assert s.get_context_block("knowledge").content == "2 entries indexed."
    search = tools_of(s)["search_context"]
    assert invoke(s, search, {"label": "knowledge", "query": "approval"}) == "No results found."
    assert untimed(invoke(s, search, '{"label": "knowledge", "query": "deploy"}')) == "[deploys]\nDeploys are automatic"
    assert invoke(s, search, {"label": "knowledge", "query": "!!!"}) == "No results found."


def test_load_and_unload_context_results(make_session, skills_dir):
    s = configure(make_session("l"), skills_dir)
    tools = tools_of(s)
    load, unload = tools["load_context"], tools["unload_context"]
    assert invoke(s, load, {"label": "skills", "key": "sql-query"}) == SQL_SKILL
    assert invoke(s, load, '{"label": "skills", "key": "code-review"}') == REVIEW_SKILL
    assert invoke(s, load, {"label": "skills", "key": "missing"}) == "Not found: missing"
    assert invoke(s, load, {"label": "skills", "key": "../skills/sql-query"}) == "Not found: ../skills/sql-query"
    assert s.get_loaded_skills() == ["skills:sql-query", "skills:code-review"]
    assert tools_of(s)["unload_context"].description.endswith(
        " Currently loaded: skills:sql-query, skills:code-review."
    )
    assert (
        invoke(s, unload, {"label": "skills", "key": "missing"})
        == 'Skill "missing" is not currently loaded in "skills".'
    )
    assert (
        invoke(s, unload, {"label": "skills", "key": "sql-query"})
        == 'Unloaded "sql-query" from skills. Context reclaimed.'
    )
    assert invoke(s, unload, {"label": "skills", "key": "sql-query"}) == (
        'Skill "sql-query" is not currently loaded in "skills".'
    )
    assert s.get_loaded_skills() == ["skills:code-review"]
    # skill bodies never reach the system prompt
    assert "Use indexes." not in s.freeze_system_prompt()


def _load_pair(call_id: str, key: str, output: str, label: str = "skills") -> list[dict[str, Any]]:
    return [
        {
            "id": f"a-{call_id}",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-call",
                    "toolCallId": call_id,
                    "toolName": "load_context",
                    "input": {"label": label, "key": key},
                }
            ],
        },
        {
            "id": f"t-{call_id}",
            "role": "tool",
            "parts": [{"type": "tool-result", "toolCallId": call_id, "toolName": "load_context", "output": output}],
        },
    ]


def test_unload_rewrites_the_newest_stored_load_result(make_session, skills_dir):
    s = configure(make_session("r"), skills_dir)
    s.append_message(msg("u1", "Help with SQL"))
    for message in _load_pair("c1", "sql-query", call_tool(s, "load_context", {"label": "skills", "key": "sql-query"})):
        s.append_message(message)
    for message in _load_pair("c2", "sql-query", call_tool(s, "load_context", {"label": "skills", "key": "sql-query"})):
        s.append_message(message)
    assert call_tool(s, "unload_context", {"label": "skills", "key": "sql-query"}) == (
        'Unloaded "sql-query" from skills. Context reclaimed.'
    )
    again = make_session("r")
    assert again.get_message("t-c2").model_dump(by_alias=True, exclude_unset=True, mode="json")["parts"] == [
        {"type": "tool-result", "toolCallId": "c2", "toolName": "load_context", "output": "[skill unloaded: sql-query]"}
    ]
    assert again.get_message("t-c1").parts[0].output == SQL_SKILL  # only the newest is rewritten
    assert again.get_message("a-c2").parts[0].input == {"label": "skills", "key": "sql-query"}
    assert s.get_loaded_skills() == []


# -- persistence across processes --------------------------------------------------------------


@pytest.mark.usefixtures("persistent_backend")
def test_a_new_process_sees_blocks_cached_prompt_and_loaded_skills(make_session, stored, skills_dir):
    old = configure(make_session("p"), skills_dir)
    old.replace_context_block("memory", "User likes coffee.")
    call_tool(
        old, "set_context", {"label": "knowledge", "content": "Deploys need approval", "metadata": {"title": "Deploys"}}
    )
    frozen = old.freeze_system_prompt()
    assert "User likes coffee." in frozen and "1 entries indexed." in frozen
    old.append_message(msg("u1", "How do I write SQL?"))
    output = call_tool(old, "load_context", {"label": "skills", "key": "sql-query"})
    for message in _load_pair("call_1", "sql-query", output):
        old.append_message(message)
    old.append_message(msg("a2", "Use indexes.", role="assistant"))
    # blocks change after the freeze: the cached prompt does not
    call_tool(old, "set_context", {"label": "memory", "content": "User prefers tea.", "action": "append"})
    assert old.freeze_system_prompt() == frozen
    session_of(old).store.close()

    new = configure(make_session("p"), skills_dir)
    assert new.get_context_block("memory").content == "User likes coffee.\nUser prefers tea."
    assert new.get_context_block("knowledge").content == "1 entries indexed."
    assert untimed(call_tool(new, "search_context", {"label": "knowledge", "query": "approval"})) == (
        "[deploys]\nDeploys need approval"
    )
    assert new.freeze_system_prompt() == frozen
    assert new.get_loaded_skills() == ["skills:sql-query"]
    unload = tools_of(new)["unload_context"]
    assert unload.description.endswith(" Currently loaded: skills:sql-query.")
    assert invoke(new, unload, {"label": "skills", "key": "sql-query"}) == (
        'Unloaded "sql-query" from skills. Context reclaimed.'
    )
    assert new.get_loaded_skills() == []

    third = configure(make_session("p"), skills_dir)
    assert third.get_message("t-call_1").parts[0].output == "[skill unloaded: sql-query]"
    assert third.get_loaded_skills() == []
    assert third.freeze_system_prompt() == frozen
    refreshed = new.refresh_system_prompt()
    assert "User likes coffee.\nUser prefers tea." in refreshed and refreshed != frozen
    assert configure(make_session("p"), skills_dir).freeze_system_prompt() == refreshed
    assert stored.get_cached_prompt("p") == refreshed


def test_an_explicit_unload_call_in_history_is_restored_as_unloaded(make_session, skills_dir):
    s = configure(make_session("h"), skills_dir)
    s.append_message(msg("u1"))
    for message in _load_pair("c1", "sql-query", SQL_SKILL) + _load_pair("c2", "code-review", REVIEW_SKILL):
        s.append_message(message)
    s.append_message(
        {
            "id": "a3",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-unload_context",
                    "toolCallId": "c3",
                    "toolName": "unload_context",
                    "state": "output-available",
                    "input": {"label": "skills", "key": "sql-query"},
                    "output": 'Unloaded "sql-query" from skills. Context reclaimed.',
                }
            ],
        }
    )
    assert configure(make_session("h"), skills_dir).get_loaded_skills() == ["skills:code-review"]


# -- the frozen prompt lifecycle ---------------------------------------------------------------


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "in-memory"])
def test_writes_do_not_change_the_frozen_prompt_until_refresh(make_session, stored, skills_dir, cached):
    s = configure(make_session("f"), skills_dir, cached=cached)
    frozen = s.freeze_system_prompt()
    s.replace_context_block("memory", "Fact one.")
    s.append_context_block("memory", "Fact two.")
    call_tool(s, "set_context", {"label": "memory", "content": "Fact three.", "action": "append"})
    call_tool(s, "set_context", {"label": "knowledge", "content": "Entry."})
    call_tool(s, "set_context", {"label": "skills", "content": "Body.", "metadata": {"title": "New skill"}})
    assert s.get_context_block("memory").content == "Fact one.\nFact two.\nFact three."
    assert s.get_context_block("knowledge").content == "1 entries indexed."
    assert "- new-skill: New skill" in s.get_context_block("skills").content
    assert s.freeze_system_prompt() == frozen
    assert stored.get_cached_prompt("f") == (frozen if cached else None)

    refreshed = s.refresh_system_prompt()
    assert "Fact one.\nFact two.\nFact three." in refreshed
    assert "1 entries indexed." in refreshed and "- new-skill: New skill" in refreshed
    assert s.freeze_system_prompt() == refreshed
    assert stored.get_cached_prompt("f") == (refreshed if cached else None)

    # clear_messages refreshes the prompt and forgets loaded skills (their results are gone)
    s.append_message(msg("u1"))
    call_tool(s, "load_context", {"label": "skills", "key": "sql-query"})
    s.replace_context_block("memory", "After clear.")
    assert s.freeze_system_prompt() == refreshed
    s.clear_messages()
    assert s.get_loaded_skills() == []
    assert s.get_history() == []
    cleared = s.freeze_system_prompt()
    assert "After clear." in cleared and "Fact one." not in cleared
    assert stored.get_cached_prompt("f") == (cleared if cached else None)
    assert stored.get_block("f", "memory") == "After clear."  # blocks outlive a clear


def test_refresh_rereads_the_providers(make_session, skills_dir):
    s = configure(make_session("x"), skills_dir)
    frozen = s.freeze_system_prompt()
    (skills_dir / "zeta.md").write_text("---\ndescription: Added on disk\n---\nZ.\n", encoding="utf-8")
    other = configure(make_session("x"), skills_dir)  # another writer on the same store
    other.replace_context_block("memory", "Written elsewhere.")
    assert s.freeze_system_prompt() == frozen
    refreshed = s.refresh_system_prompt()
    assert "- zeta: Added on disk" in refreshed and "Written elsewhere." in refreshed


# -- runtime blocks ----------------------------------------------------------------------------


def test_add_and_remove_context_at_runtime(make_session, stored, skills_dir):
    s = make_session("rt")
    s.with_context("memory", description="Learned facts")
    s.with_cached_prompt()
    frozen = s.freeze_system_prompt()
    block = s.add_context("notes", description="Scratch")
    assert (block.label, block.content, block.writable) == ("notes", "", True)
    assert [b.label for b in s.get_context_blocks()] == ["memory", "notes"]
    assert s.freeze_system_prompt() == frozen
    assert tools_of(s)["set_context"].parameters["properties"]["label"]["enum"] == ["memory", "notes"]
    assert call_tool(s, "set_context", {"label": "notes", "content": "n"}) == "Written to notes. Usage: 2 tokens"
    assert stored.get_block("rt", "notes") == "n"
    with pytest.raises(ContextError, match='^Block "notes" already exists$'):
        s.add_context("notes")

    # a skill block added later restores the skills loaded in history
    s.append_message(msg("u1"))
    for message in _load_pair("c1", "sql-query", SQL_SKILL):
        s.append_message(message)
    skills = s.add_context("skills", provider=FileSkillProvider(skills_dir))
    assert skills.is_skill and skills.content == "- code-review: Code review\n- sql-query: SQL guide"
    assert s.get_loaded_skills() == ["skills:sql-query"]
    assert [t.name for t in s.tools()] == ["set_context", "load_context", "unload_context"]

    assert s.remove_context("skills") is True
    assert s.get_loaded_skills() == []
    assert [t.name for t in s.tools()] == ["set_context"]
    assert s.remove_context("skills") is False
    assert s.get_message("t-c1").parts[0].output == SQL_SKILL  # no history rewrite
    assert s.freeze_system_prompt() == frozen
    assert "NOTES (Scratch) [writable]" in s.refresh_system_prompt()


def test_remove_context_before_first_use(make_session):
    s = make_session()
    s.with_context("memory")
    s.with_context("soul", provider=StaticContext("x"))
    assert s.remove_context("memory") is True
    assert s.remove_context("memory") is False
    assert [b.label for b in s.get_context_blocks()] == ["soul"]
    assert s.tools() == []


# -- isolation ---------------------------------------------------------------------------------


def test_sessions_on_one_store_never_see_each_others_blocks(make_session, stored, skills_dir):
    alice = configure(make_session("alice"), skills_dir)
    bob = configure(make_session("bob"), skills_dir)
    nobody = configure(make_session(""), skills_dir)
    call_tool(alice, "set_context", {"label": "memory", "content": "Alice likes coffee."})
    call_tool(alice, "set_context", {"label": "knowledge", "content": "Alice deploys on Fridays"})
    alice.append_message(msg("u1"))
    for message in _load_pair(
        "c1", "sql-query", call_tool(alice, "load_context", {"label": "skills", "key": "sql-query"})
    ):
        alice.append_message(message)
    alice_prompt = alice.refresh_system_prompt()

    for other in (bob, nobody):
        assert other.get_context_block("memory").content == ""
        assert other.get_context_block("knowledge").content == ""
        assert call_tool(other, "search_context", {"label": "knowledge", "query": "Fridays"}) == "No results found."
        assert other.get_loaded_skills() == []
        assert "Alice" not in other.freeze_system_prompt()

    call_tool(bob, "set_context", {"label": "memory", "content": "Bob likes tea."})
    call_tool(bob, "set_context", {"label": "knowledge", "content": "Bob deploys on Mondays"})
    bob_prompt = bob.refresh_system_prompt()
    assert "Bob likes tea." in bob_prompt and "Alice" not in bob_prompt
    assert untimed(call_tool(alice, "search_context", {"label": "knowledge", "query": "deploys"})) == (
        f"[{context_entry_key(None, 'Alice deploys on Fridays')}]\nAlice deploys on Fridays"
    )
    assert call_tool(bob, "search_context", {"label": "knowledge", "query": "Fridays"}) == "No results found."
    assert alice.freeze_system_prompt() == alice_prompt

    again = configure(make_session("alice"), skills_dir)
    assert again.get_context_block("memory").content == "Alice likes coffee."
    assert again.freeze_system_prompt() == alice_prompt
    assert again.get_loaded_skills() == ["skills:sql-query"]
    assert stored.get_block("bob", "memory") == "Bob likes tea."
    assert stored.get_block("", "memory") is None
    assert stored.count_search_entries("alice", "knowledge") == 1
    assert stored.count_search_entries("bob", "knowledge") == 1
    assert stored.get_cached_prompt("bob") == bob_prompt


# -- bad input ---------------------------------------------------------------------------------


class FlakyStoreContext(StoreContext):
    """A store-backed block whose writes fail while ``failing`` is set."""

    failing = False

    def set(self, content: str) -> None:
        if FlakyStoreContext.failing:
            raise OSError("disk full")
        super().set(content)


class FailingSearch(StoreSearchContext):
    def search(self, query: str) -> str | None:
        raise RuntimeError("index offline")


class AsyncFailingWrites:
    def __init__(self) -> None:
        self.content = "Async kept."

    async def get(self) -> str:
        return self.content

    async def set(self, content: str) -> None:
        raise ValueError("quota exceeded")


class FailingSkills:
    def get(self) -> str:
        return "- broken"

    def load(self, key: str) -> str:
        raise ConnectionError("bucket unavailable")


@pytest.fixture
def guarded(make_session, skills_dir):
    """A session whose blocks are set up with known content, and a check that nothing changed."""
    FlakyStoreContext.failing = False
    s = make_session("bad")
    with unsupported_skips():
        s.with_context("soul", provider=StaticContext("Be kind."))
        s.with_context("memory", description="Learned facts", max_tokens=10)
        s.with_context("flaky", provider=FlakyStoreContext())
        s.with_context("knowledge", provider=FailingSearch())
        s.with_context("manual", provider=FileSkillProvider(skills_dir, writable=False))
        s.with_context("broken", provider=FailingSkills())
        s.with_context("remote", provider=AsyncFailingWrites())
        s.with_cached_prompt()
        s.replace_context_block("memory", "Keep me.")
        s.replace_context_block("flaky", "Flaky kept.")
        call_tool(s, "set_context", {"label": "knowledge", "content": "Old entry", "metadata": {"title": "old"}})
        s.freeze_system_prompt()
    FlakyStoreContext.failing = True
    yield s
    FlakyStoreContext.failing = False


def assert_unchanged(s: Any, stored: Any) -> None:
    assert stored.get_block("bad", "memory") == "Keep me."
    assert stored.get_block("bad", "flaky") == "Flaky kept."
    assert stored.count_search_entries("bad", "knowledge") == 1
    assert stored.search_entries("bad", "knowledge", "entry", 10) == [("old", "Old entry")]
    assert s.get_context_block("memory").content == "Keep me."
    assert s.get_context_block("flaky").content == "Flaky kept."
    assert s.get_context_block("remote").content == "Async kept."
    assert s.get_context_block("soul").content == "Be kind."
    assert s.get_loaded_skills() == []
    prompt = s.refresh_system_prompt()
    assert "Keep me." in prompt and "Flaky kept." in prompt and "1 entries indexed." in prompt


INVALID = "Error: invalid arguments for "

BAD_CALLS: dict[str, list[tuple[str, Any, str | None]]] = {
    "refused writes": [
        ("set_context", {"label": "nope", "content": "x"}, 'Error: block "nope" not found'),
        ("set_context", {"label": "soul", "content": "x"}, 'Error: Block "soul" is readonly'),
        (
            "set_context",
            {"label": "memory", "content": "word " * 50},
            'Error: Block "memory" exceeds maxTokens: 65 > 10',
        ),
        (
            "set_context",
            {"label": "memory", "content": "word word word word word word word", "action": "append"},
            'Error: Block "memory" exceeds maxTokens: 12 > 10',
        ),
        ("set_context", {"label": "manual", "content": "x"}, 'Error: Block "manual" does not support writes'),
    ],
    "providers that raise": [
        ("set_context", {"label": "flaky", "content": "new"}, "Error: disk full"),
        ("set_context", {"label": "flaky", "content": "new", "action": "append"}, "Error: disk full"),
        ("set_context", {"label": "remote", "content": "new"}, "Error: quota exceeded"),
        ("load_context", {"label": "broken", "key": "x"}, "Error: bucket unavailable"),
        ("search_context", {"label": "knowledge", "query": "entry"}, "Error: index offline"),
    ],
    "malformed arguments": [
        (
            "set_context",
            "not json",
            INVALID + "set_context: not valid JSON (Expecting value: line 1 column 1 (char 0))",
        ),
        ("set_context", '{"label": "memory", "content": ', None),
        ("set_context", ["memory", "x"], INVALID + "set_context: expected a JSON object, got array"),
        ("set_context", {"label": "memory"}, INVALID + 'set_context: missing required field "content"'),
        (
            "set_context",
            {"label": "memory", "content": 5},
            INVALID + 'set_context: "content" must be string, got number',
        ),
        (
            "set_context",
            {"label": ["memory"], "content": "x"},
            INVALID + 'set_context: "label" must be string, got array',
        ),
        (
            "set_context",
            {"label": "memory", "content": None},
            INVALID + 'set_context: "content" must be string, got null',
        ),
        (
            "set_context",
            {"label": "memory", "content": "x", "action": "delete"},
            INVALID + 'set_context: "action" must be one of "replace", "append"',
        ),
        (
            "set_context",
            {"label": "knowledge", "content": "x", "metadata": "old"},
            INVALID + 'set_context: "metadata" must be object, got string',
        ),
        (
            "set_context",
            {"label": "knowledge", "content": "x", "metadata": {"title": 5}},
            INVALID + 'set_context: "metadata.title" must be string, got number',
        ),
        ("load_context", {"label": "manual"}, INVALID + 'load_context: missing required field "key"'),
        ("load_context", {"label": "manual", "key": 1}, INVALID + 'load_context: "key" must be string, got number'),
        (
            "search_context",
            {"label": "knowledge", "query": {"q": 1}},
            INVALID + 'search_context: "query" must be string, got object',
        ),
    ],
    "wrong blocks for a tool": [
        (
            "load_context",
            {"label": "memory", "key": "sql-query"},
            'Error: "memory" is not a skill block. Skill blocks: manual, broken',
        ),
        (
            "unload_context",
            {"label": "memory", "key": "x"},
            'Error: "memory" is not a skill block. Skill blocks: manual, broken',
        ),
        (
            "unload_context",
            {"label": "manual", "key": "sql-query"},
            'Skill "sql-query" is not currently loaded in "manual".',
        ),
        (
            "search_context",
            {"label": "memory", "query": "x"},
            'Error: "memory" is not searchable. Searchable blocks: knowledge',
        ),
    ],
}


@pytest.mark.parametrize("group", list(BAD_CALLS))
def test_bad_tool_calls_give_error_strings_and_change_nothing(guarded, stored, group):
    """Each call as a dict (or the raw string given) and as a JSON string."""
    s = guarded
    tools = tools_of(s)
    for name, args, expected in BAD_CALLS[group]:
        for sent in [args] if isinstance(args, str) else [args, json.dumps(args)]:
            result = invoke(s, tools[name], sent)
            if expected is None:
                assert result.startswith(INVALID + name + ": not valid JSON ("), (sent, result)
            else:
                assert result == expected, sent
            assert_unchanged(s, stored)


def test_bad_session_writes_raise_and_change_nothing(guarded, stored):
    s = guarded
    for call, error in [
        (lambda: s.replace_context_block("nope", "x"), 'Block "nope" is readonly'),
        (lambda: s.replace_context_block("soul", "x"), 'Block "soul" is readonly'),
        (lambda: s.replace_context_block("manual", "x"), 'Block "manual" is readonly'),
        (
            lambda: s.replace_context_block("knowledge", "x"),
            'Block "knowledge" is a keyed provider. Use setSkill() or setSearchEntry() instead.',
        ),
        (lambda: s.replace_context_block("memory", "word " * 50), 'Block "memory" exceeds maxTokens: 65 > 10'),
        (lambda: s.append_context_block("nope", "x"), 'Block "nope" not found'),
        (lambda: s.append_context_block("memory", "word " * 7), 'Block "memory" exceeds maxTokens: 12 > 10'),
    ]:
        with pytest.raises(ContextError) as caught:
            call()
        assert str(caught.value) == error
    with pytest.raises(OSError, match="disk full"):
        s.replace_context_block("flaky", "new")
    with pytest.raises(ValueError, match="quota exceeded"):
        s.append_context_block("remote", "new")
    assert_unchanged(s, stored)


def test_many_blocks_are_read_together_and_render_their_stored_content(make_session, stored):
    """1,200 stored blocks (more than one bound list of a SQLite statement), a few never
    written: the prompt renders each block's own content, and loading reads the store's blocks
    with ``get_blocks`` (one query per list), never block by block."""
    labels = [f"b{number:04d}" for number in range(1200)]
    for number, label in enumerate(labels):
        if number % 100 != 7:
            stored.set_block("many", label, f"content {number} ünïcode ✓")
    s = make_session("many")
    for label in labels:
        s.with_context(label, max_tokens=50)
    store = session_of(s).store
    original = store.get_block
    store.get_block = lambda *args: pytest.fail("a block was read on its own")
    try:
        prompt = s.freeze_system_prompt()
        blocks = {block.label: block.content for block in s.get_context_blocks()}
    finally:
        store.get_block = original
    assert blocks == {label: "" if n % 100 == 7 else f"content {n} ünïcode ✓" for n, label in enumerate(labels)}
    assert prompt.count("content ") == 1188 and "content 1199 ünïcode ✓" in prompt
    assert stored.get_blocks("many", [labels[7], labels[8], labels[8], "absent"]) == {labels[8]: "content 8 ünïcode ✓"}
    assert stored.get_blocks("other", labels) == {}


skip_where_unsupported(globals())
