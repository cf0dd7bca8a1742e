"""Tools: presence rules, exact schemas and descriptions, every result and error string."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from sessions_core import SessionMessage
from sessions_core.context import ContextBlocks, ContextConfig, StaticContext
from sessions_core.tools import (
    Tool,
    context_tools,
    loaded_skills_in_history,
    session_search_tool,
    to_openai_tools,
    unloaded_skill_rewrite,
)

from .test_context import (
    AsyncKnowledge,
    AsyncMemory,
    AsyncSkills,
    Failing,
    Knowledge,
    Memory,
    ReadOnlySkills,
    Skills,
)

METADATA_HINT = (
    "\n\nFor keyed blocks (skill collections / searchable), pass `metadata: { title, description }` — title "
    "stabilises updates, description helps the model pick entries. Metadata is optional; short content rarely "
    "needs it, long loadable entries benefit most."
)


def full_blocks(**overrides: Any) -> ContextBlocks:
    providers = {
        "soul": StaticContext("You are helpful."),
        "memory": Memory("User likes coffee.\nUser prefers dark roast."),
        "skills": Skills({"pirate": ("Talk like a pirate.", "Pirate style"), "formal": ("Be formal.", None)}),
        "knowledge": Knowledge({"a": "User likes tea", "b": "Deploys need approval"}),
        **overrides,
    }
    descriptions = {
        "soul": "Identity",
        "memory": "Learned facts",
        "skills": "Loadable docs",
        "knowledge": "Searchable docs",
    }
    return ContextBlocks(
        [
            ContextConfig(label, descriptions.get(label), 1100 if label == "memory" else None, provider)
            for label, provider in providers.items()
        ]
    )


def tools_by_name(blocks: ContextBlocks) -> dict[str, Tool]:
    return {tool.name: tool for tool in context_tools(blocks)}


# -- presence ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "providers, names",
    [
        ({}, []),
        ({"soul": StaticContext("x")}, []),
        ({"empty": None}, []),
        ({"memory": Memory()}, ["set_context"]),
        ({"skills": ReadOnlySkills({})}, ["load_context", "unload_context"]),
        ({"skills": Skills()}, ["set_context", "load_context", "unload_context"]),
        ({"kb": Knowledge(writable=False)}, ["search_context"]),
        ({"kb": Knowledge()}, ["set_context", "search_context"]),
        (
            {"kb": Knowledge(), "skills": ReadOnlySkills({}), "m": Memory(), "soul": StaticContext("x")},
            ["set_context", "load_context", "unload_context", "search_context"],
        ),
    ],
)
def test_tools_present_only_when_they_apply(providers, names):
    blocks = ContextBlocks([ContextConfig(label, provider=p) for label, p in providers.items()])
    assert [tool.name for tool in context_tools(blocks)] == names
    assert blocks.loaded


def test_a_provider_with_load_and_search_is_both():
    class Both(Skills):
        def search(self, query: str) -> str:
            return f"found {query}"

    blocks = ContextBlocks([ContextConfig("docs", "Docs", provider=Both({"a": ("A", None)}))])
    tools = tools_by_name(blocks)
    assert list(tools) == ["set_context", "load_context", "unload_context", "search_context"]
    assert '- "docs" (skill collection, keyed entries): Docs' in tools["set_context"].description
    assert "[searchable]" in blocks.to_system_prompt()
    assert (
        tools["set_context"].invoke({"label": "docs", "content": "x", "metadata": {"title": "T"}})
        == 'Indexed "t" in docs.'
    )
    assert blocks.get_block("docs").content == "- a\n- t: T"  # written through the skill path
    assert tools["search_context"].invoke({"label": "docs", "query": "q"}) == "found q"


# -- set_context -------------------------------------------------------------------------------


def test_set_context_description_and_schema_with_keyed_blocks():
    tool = tools_by_name(full_blocks())["set_context"]
    assert tool.description == (
        "Write to a context block. Available blocks:\n"
        '- "memory" (writable): Learned facts\n'
        '- "skills" (skill collection, keyed entries): Loadable docs\n'
        '- "knowledge" (searchable, keyed entries): Searchable docs\n'
        "\nWrites are durable and persist across sessions." + METADATA_HINT
    )
    assert "soul" not in tool.description
    assert tool.parameters == {
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
                "description": 'Optional metadata for keyed entries (skill collections, searchable blocks: "skills", '
                '"knowledge"). Short content doesn\'t need metadata; longer loadable entries (skills) benefit from '
                "a title and description so the model can pick the right one without loading it.",
                "properties": {
                    "title": {
                        "type": "string",
                        "description": "Short title. Used as a stable identifier — entries "
                        "with the same title are updated in place, different titles create new entries.",
                    },
                    "description": {
                        "type": "string",
                        "description": "One-line summary shown alongside the title "
                        "in the system prompt so the model can decide when to load the entry.",
                    },
                },
            },
        },
        "required": ["label", "content"],
    }


def test_set_context_without_keyed_blocks_has_no_metadata():
    blocks = ContextBlocks([ContextConfig("memory", provider=Memory()), ContextConfig("notes", "", provider=Memory())])
    tool = tools_by_name(blocks)["set_context"]
    assert tool.description == (
        "Write to a context block. Available blocks:\n"
        '- "memory" (writable): no description\n'
        '- "notes" (writable): \n'
        "\nWrites are durable and persist across sessions."
    )
    assert list(tool.parameters["properties"]) == ["label", "content", "action"]


def test_set_context_plain_writes():
    memory = Memory("User likes coffee.")
    blocks = ContextBlocks(
        [ContextConfig("memory", "Learned facts", 1100, memory), ContextConfig("free", provider=Memory())]
    )
    tool = tools_by_name(blocks)["set_context"]
    assert tool.invoke({"label": "memory", "content": "User prefers dark roast.", "action": "append"}) == (
        "Written to memory. Usage: 1% (11/1100 tokens)"
    )
    assert memory.content == "User likes coffee.\nUser prefers dark roast."
    assert tool.invoke({"label": "memory", "content": "Tea."}) == "Written to memory. Usage: 0% (2/1100 tokens)"
    assert tool.invoke('{"label": "free", "content": "hello world", "action": "replace"}') == (
        "Written to free. Usage: 3 tokens"
    )
    assert tool.invoke({"label": "free", "content": "x", "key": "ignored", "action": None}) == (
        "Written to free. Usage: 2 tokens"
    )


@pytest.mark.parametrize(
    "args, result",
    [
        ({"label": "soul", "content": "x"}, 'Error: Block "soul" is readonly'),
        ({"label": "memory", "content": "a" * 260}, 'Error: Block "memory" exceeds maxTokens: 65 > 10'),
        (
            {"label": "memory", "content": "a" * 260, "action": "append"},
            'Error: Block "memory" exceeds maxTokens: 65 > 10',
        ),
        ({"label": "nope", "content": "x"}, 'Error: block "nope" not found'),
        ({"label": "ro-skills", "content": "x"}, 'Error: Block "ro-skills" does not support writes'),
        ({"label": "ro-kb", "content": "x"}, 'Error: Block "ro-kb" does not support writes'),
        ({"label": "broken", "content": "x"}, "Error: disk full"),
    ],
)
def test_set_context_errors_leave_blocks_unchanged(args, result):
    memory = Memory()
    blocks = ContextBlocks(
        [
            ContextConfig("soul", provider=StaticContext("Be kind.")),
            ContextConfig("memory", max_tokens=10, provider=memory),
            ContextConfig("ro-skills", provider=ReadOnlySkills({})),
            ContextConfig("ro-kb", provider=Knowledge(writable=False)),
            ContextConfig("broken", provider=Failing("old")),
        ]
    )
    tool = tools_by_name(blocks)["set_context"]
    before = blocks.get_blocks()
    assert tool.invoke(args) == result
    assert blocks.get_blocks() == before and memory.writes == []


def test_set_context_keyed_writes():
    skills, knowledge = Skills(), Knowledge()
    blocks = full_blocks(skills=skills, knowledge=knowledge)
    tool = tools_by_name(blocks)["set_context"]
    assert tool.invoke({"label": "skills", "content": "Arr.", "metadata": {"title": "Pirate style"}}) == (
        'Indexed "pirate-style" in skills.'
    )
    assert tool.invoke(
        {
            "label": "skills",
            "content": "Arr!",
            "action": "append",
            "metadata": {"title": "Pirate style", "description": "Speak like a pirate"},
        }
    ) == ('Indexed "pirate-style" in skills.')
    assert tool.invoke({"label": "skills", "content": "no key"}) == 'Indexed "no-key-1nprufp" in skills.'
    assert skills.sets == [
        ("pirate-style", "Arr.", "Pirate style"),
        ("pirate-style", "Arr!", "Speak like a pirate"),
        ("no-key-1nprufp", "no key", None),
    ]
    assert blocks.get_block("skills").content == "- no-key-1nprufp\n- pirate-style: Speak like a pirate"
    assert tool.invoke({"label": "knowledge", "content": "hello world", "metadata": {"title": "  "}}) == (
        'Indexed "hello-world-1n91413" in knowledge.'
    )
    assert knowledge.entries == {"hello-world-1n91413": "hello world"}
    assert blocks.get_block("knowledge").content == "1 entries indexed."


# -- load_context / unload_context -------------------------------------------------------------


def test_load_and_unload_descriptions_and_schemas():
    blocks = ContextBlocks(
        [
            ContextConfig("skills", provider=Skills({"pirate": ("Arr.", None), "formal": ("Sir.", None)})),
            ContextConfig("docs", provider=ReadOnlySkills({})),
        ]
    )
    tools = tools_by_name(blocks)
    assert tools["load_context"].description == (
        'Load a document from a skill block by key. Available skill blocks: "skills", "docs". '
        "Check the system prompt for available keys."
    )
    assert tools["load_context"].parameters == {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["skills", "docs"], "description": "Skill block label"},
            "key": {"type": "string", "description": "Skill key to load"},
        },
        "required": ["label", "key"],
    }
    assert tools["unload_context"].description == (
        "Unload a previously loaded skill to free context space. The skill remains available for re-loading. "
        "No skills currently loaded."
    )
    unload_schema = json.loads(json.dumps(tools["load_context"].parameters))
    unload_schema["properties"]["key"]["description"] = "Skill key to unload"
    assert tools["unload_context"].parameters == unload_schema
    blocks.load_skill("skills", "pirate")
    blocks.load_skill("skills", "formal")
    assert tools_by_name(blocks)["unload_context"].description.endswith(
        " Currently loaded: skills:pirate, skills:formal."
    )
    assert tools["unload_context"].description.endswith("No skills currently loaded.")  # a snapshot


def test_load_context_results():
    blocks = ContextBlocks(
        [
            ContextConfig("skills", provider=Skills({"pirate": ("Arr.", None)})),
            ContextConfig("docs", provider=ReadOnlySkills({})),
            ContextConfig("memory", provider=Memory()),
        ]
    )
    load = tools_by_name(blocks)["load_context"]
    assert load.invoke({"label": "skills", "key": "pirate"}) == "Arr."
    assert blocks.loaded_skill_keys() == ["skills:pirate"]
    assert load.invoke({"label": "skills", "key": "nope"}) == "Not found: nope"
    assert (
        load.invoke({"label": "memory", "key": "x"})
        == 'Error: "memory" is not a skill block. Skill blocks: skills, docs'
    )
    assert blocks.loaded_skill_keys() == ["skills:pirate"]


def test_load_context_provider_errors_become_strings():
    class Broken(ReadOnlySkills):
        def load(self, key: str) -> str:
            raise OSError(f"cannot read {key}")

    load = tools_by_name(ContextBlocks([ContextConfig("s", provider=Broken({}))]))["load_context"]
    assert load.invoke({"label": "s", "key": "k"}) == "Error: cannot read k"


def test_unload_context_results_and_hook():
    blocks = ContextBlocks([ContextConfig("skills", provider=Skills({"pirate": ("Arr.", None)}))])
    tools = tools_by_name(blocks)
    seen: list[tuple[str, str]] = []

    def hook(label: str, key: str) -> None:
        seen.append((label, key))
        raise RuntimeError("rewrite failed")  # swallowed

    blocks.on_unload = hook
    unload = tools["unload_context"]
    assert unload.invoke({"label": "skills", "key": "pirate"}) == 'Skill "pirate" is not currently loaded in "skills".'
    tools["load_context"].invoke({"label": "skills", "key": "pirate"})
    assert unload.invoke({"label": "skills", "key": "pirate"}) == 'Unloaded "pirate" from skills. Context reclaimed.'
    assert seen == [("skills", "pirate")] and blocks.loaded_skill_keys() == []
    assert (
        unload.invoke({"label": "other", "key": "pirate"})
        == 'Error: "other" is not a skill block. Skill blocks: skills'
    )


# -- search_context ----------------------------------------------------------------------------


def test_search_context():
    blocks = ContextBlocks(
        [
            ContextConfig("knowledge", provider=Knowledge({"a": "User likes tea"}, writable=False)),
            ContextConfig("kb2", provider=Knowledge()),
            ContextConfig("memory", provider=Memory()),
        ]
    )
    search = tools_by_name(blocks)["search_context"]
    assert search.description == (
        "Search for information in a searchable context block. "
        'ONLY these blocks are searchable: "knowledge", "kb2". Other blocks cannot be searched.'
    )
    assert search.parameters == {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["knowledge", "kb2"], "description": "Searchable block label"},
            "query": {"type": "string", "description": "Search query"},
        },
        "required": ["label", "query"],
    }
    assert search.invoke({"label": "knowledge", "query": "tea"}) == "User likes tea"
    assert search.invoke({"label": "knowledge", "query": "coffee"}) == "No results found."
    assert search.invoke({"label": "memory", "query": "x"}) == (
        'Error: "memory" is not searchable. Searchable blocks: knowledge, kb2'
    )


def test_search_context_provider_errors_become_strings():
    class Broken(Knowledge):
        def search(self, query: str) -> str:
            raise RuntimeError("index offline")

    search = tools_by_name(ContextBlocks([ContextConfig("kb", provider=Broken())]))["search_context"]
    assert search.invoke({"label": "kb", "query": "q"}) == "Error: index offline"


# -- malformed arguments -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got array"),
        ('"text"', "expected a JSON object, got string"),
        (42, "expected a JSON object, got number"),
        ({}, 'missing required field "label"'),
        ({"label": "memory"}, 'missing required field "content"'),
        ({"label": "memory", "content": 5}, '"content" must be string, got number'),
        ({"label": 1, "content": "x"}, '"label" must be string, got number'),
        ({"label": "memory", "content": None}, '"content" must be string, got null'),
        ({"label": "memory", "content": "x", "action": "prepend"}, '"action" must be one of "replace", "append"'),
        ({"label": "memory", "content": "x", "action": True}, '"action" must be string, got boolean'),
        ({"label": "skills", "content": "x", "metadata": "title"}, '"metadata" must be object, got string'),
        ({"label": "skills", "content": "x", "metadata": {"title": 3}}, '"metadata.title" must be string, got number'),
    ],
)
def test_malformed_arguments_give_errors_and_change_nothing(args, fragment):
    memory, skills = Memory("kept"), Skills()
    blocks = full_blocks(memory=memory, skills=skills)
    tool = tools_by_name(blocks)["set_context"]
    before = blocks.get_blocks()
    result = tool.invoke(args)
    assert result.startswith("Error: invalid arguments for set_context: ") and fragment in result
    assert blocks.get_blocks() == before and memory.writes == [] and skills.sets == []


def test_missing_fields_of_other_tools():
    tools = tools_by_name(full_blocks())
    assert tools["load_context"].invoke({"label": "skills"}) == (
        'Error: invalid arguments for load_context: missing required field "key"'
    )
    assert tools["search_context"].invoke("") == (
        'Error: invalid arguments for search_context: missing required field "label"'
    )
    assert tools["unload_context"].invoke(None).startswith("Error: invalid arguments for unload_context")


def test_generic_tool_validation_and_results():
    seen: list[dict[str, Any]] = []

    def func(args: dict[str, Any]) -> Any:
        seen.append(args)
        return {"ok": args["n"]}

    tool = Tool(
        "t",
        "A tool.",
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "x": {"type": ["number", "null"]},
                "tags": {"type": "array"},
                "flag": {"type": "boolean"},
            },
            "required": ["n", "x"],
        },
        func,
    )
    assert tool.invoke({"n": 2, "x": None, "tags": None}) == '{"ok": 2}'
    assert seen == [{"n": 2, "x": None}]  # an optional null is dropped, a required one kept
    assert tool.invoke({"n": 2.0, "x": 1.5}) == '{"ok": 2.0}'
    assert "must be integer, got number" in tool.invoke({"n": 2.5, "x": 1})
    assert "must be integer, got boolean" in tool.invoke({"n": True, "x": 1})
    assert "must be number or null, got string" in tool.invoke({"n": 1, "x": "1"})
    assert "must be array, got object" in tool.invoke({"n": 1, "x": 1, "tags": {}})
    assert "must be boolean, got number" in tool.invoke({"n": 1, "x": 1, "flag": 0})
    failing = Tool("f", "", {"type": "object"}, lambda args: 1 / 0)
    assert failing.invoke({}) == "Error: division by zero"
    assert Tool("k", "", {"type": "object"}, lambda args: {}["missing"]).invoke({}) == "Error: 'missing'"
    assert (
        Tool("e", "", {"type": "object"}, lambda args: (_ for _ in ()).throw(ValueError())).invoke({})
        == "Error: ValueError"
    )


def test_to_openai_tools():
    tools = context_tools(full_blocks())
    openai = to_openai_tools(tools)
    assert [entry["function"]["name"] for entry in openai] == [t.name for t in tools]
    assert openai[0] == {
        "type": "function",
        "function": {"name": "set_context", "description": tools[0].description, "parameters": tools[0].parameters},
    }
    openai[0]["function"]["parameters"]["required"].append("x")
    assert tools[0].parameters["required"] == ["label", "content"]  # a copy
    json.dumps(openai)


# -- async -------------------------------------------------------------------------------------


def test_async_providers_through_sync_invoke():
    blocks = ContextBlocks(
        [
            ContextConfig("memory", provider=AsyncMemory("a")),
            ContextConfig("skills", provider=AsyncSkills({"k": ("K", None)})),
            ContextConfig("kb", provider=AsyncKnowledge({"t": "tea"})),
        ]
    )
    tools = tools_by_name(blocks)
    assert tools["set_context"].invoke({"label": "memory", "content": "b", "action": "append"}) == (
        "Written to memory. Usage: 3 tokens"
    )
    assert tools["load_context"].invoke({"label": "skills", "key": "k"}) == "K"
    assert tools["search_context"].invoke({"label": "kb", "query": "tea"}) == "tea"


def test_ainvoke_inside_a_running_loop_with_async_providers():
    memory = AsyncMemory("a")
    blocks = ContextBlocks(
        [
            ContextConfig("memory", max_tokens=100, provider=memory),
            ContextConfig("skills", provider=AsyncSkills({"k": ("K", None)})),
            ContextConfig("kb", provider=AsyncKnowledge({"t": "tea"})),
        ]
    )
    tools = tools_by_name(blocks)

    async def main() -> list[str]:
        results = await asyncio.gather(
            tools["set_context"].ainvoke({"label": "memory", "content": "b"}),
            tools["load_context"].ainvoke('{"label": "skills", "key": "k"}'),
            tools["search_context"].ainvoke({"label": "kb", "query": "tea"}),
            tools["set_context"].ainvoke("nonsense"),
        )
        results.append(
            await tools["set_context"].ainvoke({"label": "skills", "content": "new", "metadata": {"title": "N"}})
        )
        return results

    results = asyncio.run(main())
    assert results[:3] == ["Written to memory. Usage: 2% (2/100 tokens)", "K", "tea"]
    assert results[3].startswith("Error: invalid arguments for set_context: not valid JSON")
    assert results[4] == 'Indexed "n" in skills.'
    assert memory.content == "b" and blocks.get_block("skills").content == "- k\n- n: N"


# -- session_search ----------------------------------------------------------------------------


def test_session_search_tool():
    calls: list[str] = []

    def search(query: str) -> list[Any]:
        calls.append(query)
        if query == "none":
            return []
        if query == "boom":
            raise RuntimeError("search not supported")
        return [SimpleNamespace(role="user", content="I like tea"), SimpleNamespace(role="assistant", content="Noted")]

    tool = session_search_tool(search)
    assert tool.name == "session_search"
    assert tool.description == "Search past conversations for relevant context. Searches across all sessions."
    assert tool.parameters == {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Search query"}},
        "required": ["query"],
    }
    assert tool.invoke({"query": "tea"}) == "[user] I like tea\n---\n[assistant] Noted"
    assert tool.invoke({"query": "none"}) == "No results found."
    assert tool.invoke({"query": "boom"}) == "Error: search not supported"
    assert tool.invoke({}).startswith("Error: invalid arguments for session_search")
    assert calls == ["tea", "none", "boom"]


def test_session_search_tool_with_an_async_search():
    async def search(query: str) -> list[Any]:
        await asyncio.sleep(0)
        return [SimpleNamespace(role="user", content=query)]

    tool = session_search_tool(search)
    assert tool.invoke({"query": "x"}) == "[user] x"
    assert asyncio.run(tool.ainvoke({"query": "y"})) == "[user] y"


# -- loaded skills in history ------------------------------------------------------------------


def ui_part(tool: str, label: str, key: str, output: Any, state: str = "output-available", named: bool = True) -> dict:
    part = {
        "type": f"tool-{tool}",
        "toolCallId": f"{tool}-{key}-{output!s:.5}",
        "state": state,
        "input": {"label": label, "key": key},
        "output": output,
    }
    if named:
        part["toolName"] = tool
    return part


def assistant(message_id: str, *parts: dict) -> SessionMessage:
    return SessionMessage.model_validate({"id": message_id, "role": "assistant", "parts": list(parts)})


def test_loaded_skills_in_history_from_ui_parts():
    history = [
        SessionMessage.model_validate({"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}),
        assistant(
            "a1",
            ui_part("load_context", "skills", "pirate", "Arr."),
            ui_part("load_context", "skills", "formal", "Sir."),
        ),
        assistant(
            "a2",
            ui_part("load_context", "skills", "missing", "Not found: missing"),
            ui_part("load_context", "skills", "bad", "Error: boom"),
            ui_part("load_context", "skills", "pending", None, state="input-available"),
        ),
        assistant(
            "a3",
            ui_part("unload_context", "skills", "formal", 'Unloaded "formal" from skills. Context reclaimed.'),
            ui_part("load_context", "skills", "old", "[skill unloaded: old]"),
            ui_part("load_context", "docs", "static", "Doc.", named=False),
        ),
    ]
    assert loaded_skills_in_history(history) == ["skills:pirate", "docs:static"]


def test_loaded_skills_in_history_from_tool_call_pairs():
    history = [
        SessionMessage.model_validate(
            {
                "id": "a",
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool-call",
                        "toolCallId": "c1",
                        "toolName": "load_context",
                        "input": {"label": "s", "key": "k"},
                    },
                    {
                        "type": "tool-call",
                        "toolCallId": "c2",
                        "toolName": "load_context",
                        "input": {"label": "s", "key": "e"},
                    },
                ],
            }
        ),
        SessionMessage.model_validate(
            {
                "id": "t",
                "role": "tool",
                "parts": [
                    {"type": "tool-result", "toolCallId": "c1", "toolName": "load_context", "output": "K"},
                    {
                        "type": "tool-result",
                        "toolCallId": "c2",
                        "toolName": "load_context",
                        "output": "x",
                        "isError": True,
                    },
                ],
            }
        ),
    ]
    assert loaded_skills_in_history(history) == ["s:k"]
    rewritten = unloaded_skill_rewrite(history, "s", "k")
    assert rewritten is not None and rewritten.id == "t"
    assert rewritten.parts[0].output == "[skill unloaded: k]" and rewritten.parts[1].output == "x"
    assert loaded_skills_in_history([history[0], rewritten]) == []


def test_unloaded_skill_rewrite_targets_the_newest_live_load():
    history = [
        assistant("a1", ui_part("load_context", "skills", "pirate", "Arr.")),
        assistant("a2", {"type": "text", "text": "ok"}, ui_part("load_context", "skills", "pirate", "Arr!")),
        assistant("a3", ui_part("load_context", "skills", "formal", "Sir.")),
    ]
    rewritten = unloaded_skill_rewrite(history, "skills", "pirate")
    assert rewritten.id == "a2" and rewritten.parts[1].output == "[skill unloaded: pirate]"
    assert rewritten.parts[0] == history[1].parts[0] and history[1].parts[1].output == "Arr!"  # a copy
    assert rewritten.to_dict()["parts"][1]["output"] == "[skill unloaded: pirate]"
    assert unloaded_skill_rewrite(history, "skills", "nope") is None
    assert unloaded_skill_rewrite(history, "other", "pirate") is None
