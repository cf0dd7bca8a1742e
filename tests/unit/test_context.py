"""Context blocks: rendering, keys, the block manager and the frozen prompt lifecycle.

The duck-typed providers defined first are shared with test_tools and test_skills.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from sessions_core._async import run_in_thread
from sessions_core.context import (
    SEP,
    ContextBlock,
    ContextBlocks,
    ContextConfig,
    ContextError,
    StaticContext,
    context_entry_key,
    is_search_provider,
    is_skill_provider,
    is_writable_provider,
    js_round,
    render_system_prompt,
    stable_hash,
)
from sessions_core.errors import SessionsError

# -- providers ---------------------------------------------------------------------------------


class Memory:
    """A writable provider that records its writes."""

    def __init__(self, content: str | None = None) -> None:
        self.content = content
        self.writes: list[str] = []

    def get(self) -> str | None:
        return self.content

    def set(self, content: str) -> None:
        self.writes.append(content)
        self.content = content


class Skills:
    """A skill provider over a dict ``key -> (content, description)``; writable unless told."""

    def __init__(self, docs: dict[str, tuple[str, str | None]] | None = None) -> None:
        self.docs = dict(docs or {})
        self.sets: list[tuple[Any, ...]] = []

    def get(self) -> str | None:
        lines = [f"- {k}: {d}" if d else f"- {k}" for k, (_, d) in sorted(self.docs.items())]
        return "\n".join(lines) or None

    def load(self, key: str) -> str | None:
        entry = self.docs.get(key)
        return entry[0] if entry else None

    def set(self, key: str, content: str, description: str | None = None) -> None:
        self.sets.append((key, content, description))
        self.docs[key] = (content, description)


class ReadOnlySkills:
    def __init__(self, docs: dict[str, str]) -> None:
        self.docs = docs

    def get(self) -> str:
        return "\n".join(f"- {k}" for k in sorted(self.docs))

    def load(self, key: str) -> str | None:
        return self.docs.get(key)


class Knowledge:
    """A searchable provider: ``N entries indexed.``, substring search."""

    def __init__(self, entries: dict[str, str] | None = None, writable: bool = True) -> None:
        self.entries = dict(entries or {})
        if not writable:
            self.set = None  # type: ignore[assignment]  # not callable: not writable

    def get(self) -> str | None:
        return f"{len(self.entries)} entries indexed." if self.entries else None

    def search(self, query: str) -> str | None:
        hits = [v for v in self.entries.values() if query.lower() in v.lower()]
        return "\n".join(hits) or None

    def set(self, key: str, content: str) -> None:  # noqa: F811 - may be shadowed per instance
        self.entries[key] = content


class AsyncMemory:
    """A writable provider whose methods are all ``async def``."""

    def __init__(self, content: str | None = None) -> None:
        self.content = content
        self.labels: list[str] = []

    async def init(self, label: str) -> None:
        await asyncio.sleep(0)
        self.labels.append(label)

    async def get(self) -> str | None:
        await asyncio.sleep(0)
        return self.content

    async def set(self, content: str) -> None:
        await asyncio.sleep(0)
        self.content = content


class AsyncSkills(Skills):
    async def get(self) -> str | None:  # type: ignore[override]
        await asyncio.sleep(0)
        return Skills.get(self)

    async def load(self, key: str) -> str | None:  # type: ignore[override]
        await asyncio.sleep(0)
        return Skills.load(self, key)

    async def set(self, key: str, content: str, description: str | None = None) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        Skills.set(self, key, content, description)


class AsyncKnowledge(Knowledge):
    async def get(self) -> str | None:  # type: ignore[override]
        return Knowledge.get(self)

    async def search(self, query: str) -> str | None:  # type: ignore[override]
        await asyncio.sleep(0)
        return Knowledge.search(self, query)

    async def set(self, key: str, content: str) -> None:  # type: ignore[override]
        Knowledge.set(self, key, content)


class Failing:
    """A writable provider whose ``set`` (and optionally ``get``) raises."""

    def __init__(self, content: str = "", fail_get: bool = False) -> None:
        self.content = content
        self.fail_get = fail_get

    def get(self) -> str:
        if self.fail_get:
            raise RuntimeError("backend down")
        return self.content

    def set(self, content: str) -> None:
        raise RuntimeError("disk full")


def block(
    label: str,
    content: str = "",
    *,
    description: str | None = None,
    max_tokens: int | None = None,
    writable: bool = False,
    is_skill: bool = False,
    is_searchable: bool = False,
    tokens: int | None = None,
) -> ContextBlock:
    from sessions_core.tokens import estimate_tokens

    return ContextBlock(
        label,
        description,
        content,
        estimate_tokens(content) if tokens is None else tokens,
        max_tokens,
        writable,
        is_skill,
        is_searchable,
    )


def example_blocks() -> ContextBlocks:
    """The blocks of the worked example of the reference (5.4)."""
    return ContextBlocks(
        [
            ContextConfig("soul", "Identity", provider=StaticContext("You are a helpful assistant.")),
            ContextConfig("memory", "Learned facts", 1100, Memory("User likes coffee.\nUser prefers dark roast.")),
            ContextConfig("skills", "Project docs", provider=ReadOnlySkills({})),
            ContextConfig("knowledge", "Searchable knowledge base", provider=Knowledge({"a": "x", "b": "y"})),
        ]
    )


WORKED_EXAMPLE = """\
══════════════════════════════════════════════
SOUL (Identity) [readonly]
══════════════════════════════════════════════
You are a helpful assistant.

══════════════════════════════════════════════
MEMORY (Learned facts) [1% — 11/1100 tokens] [writable]
══════════════════════════════════════════════
User likes coffee.
User prefers dark roast.

══════════════════════════════════════════════
SKILLS (Project docs) [loadable]
══════════════════════════════════════════════
- code-review: Code review
- sql-query: SQL guide

══════════════════════════════════════════════
KNOWLEDGE (Searchable knowledge base) [searchable]
══════════════════════════════════════════════
2 entries indexed."""


# -- rendering ---------------------------------------------------------------------------------


def test_separator_is_46_box_drawing_characters():
    assert SEP == "\u2550" * 46 and len(SEP) == 46


def test_worked_example_is_reproduced_exactly():
    blocks = ContextBlocks(
        [
            ContextConfig("soul", "Identity", provider=StaticContext("You are a helpful assistant.")),
            ContextConfig("memory", "Learned facts", 1100, Memory("User likes coffee.\nUser prefers dark roast.")),
            ContextConfig(
                "skills",
                "Project docs",
                provider=Skills({"code-review": ("...", "Code review"), "sql-query": ("...", "SQL guide")}),
            ),
            ContextConfig(
                "knowledge", "Searchable knowledge base", provider=Knowledge({"a": "x", "b": "y"}, writable=False)
            ),
        ]
    )
    assert blocks.freeze_system_prompt() == WORKED_EXAMPLE
    assert not WORKED_EXAMPLE.endswith("\n")


@pytest.mark.parametrize(
    "kind, expected",
    [
        (block("soul", "Be kind."), f"{SEP}\nSOUL [readonly]\n{SEP}\nBe kind."),
        (block("soul", "Be kind.", description="Identity"), f"{SEP}\nSOUL (Identity) [readonly]\n{SEP}\nBe kind."),
        (block("memory", "", writable=True), f"{SEP}\nMEMORY [writable]\n{SEP}\n"),
        (block("memory", "fact", writable=True), f"{SEP}\nMEMORY [writable]\n{SEP}\nfact"),
        (
            block("memory", "", description="Facts", max_tokens=100, writable=True),
            f"{SEP}\nMEMORY (Facts) [0% — 0/100 tokens] [writable]\n{SEP}\n",
        ),
        (
            block("memory", "x", max_tokens=10, writable=True, tokens=15),
            f"{SEP}\nMEMORY [150% — 15/10 tokens] [writable]\n{SEP}\nx",
        ),
        (block("memory", "x", max_tokens=0, writable=True), f"{SEP}\nMEMORY [writable]\n{SEP}\nx"),
        (block("memory", "x", description="", writable=True), f"{SEP}\nMEMORY [writable]\n{SEP}\nx"),
        (block("skills", "", is_skill=True), f"{SEP}\nSKILLS [loadable]\n{SEP}\n"),
        (block("skills", "- a", is_skill=True, writable=True), f"{SEP}\nSKILLS [loadable]\n{SEP}\n- a"),
        (block("kb", "", is_searchable=True), f"{SEP}\nKB [searchable]\n{SEP}\n"),
        (
            block("kb", "1 entries indexed.", is_searchable=True, is_skill=True, writable=True, max_tokens=8, tokens=1),
            f"{SEP}\nKB [13% — 1/8 tokens] [searchable]\n{SEP}\n1 entries indexed.",
        ),
    ],
)
def test_each_block_kind_renders_exactly(kind, expected):
    assert render_system_prompt([kind]) == expected


def test_empty_read_only_blocks_are_skipped_and_blocks_joined_by_a_blank_line():
    prompt = render_system_prompt([block("empty"), block("a", "A"), block("also-empty"), block("b", "B")])
    assert prompt == f"{SEP}\nA [readonly]\n{SEP}\nA\n\n{SEP}\nB [readonly]\n{SEP}\nB"
    assert render_system_prompt([]) == ""
    assert render_system_prompt([block("empty")]) == ""


@pytest.mark.parametrize(
    "tokens, max_tokens, pct",
    [
        (1, 200, 1),  # 0.5 -> 1 (Python's round would give 0)
        (1, 8, 13),  # 12.5 -> 13 (round: 12)
        (5, 200, 3),  # 2.5 -> 3 (round: 2)
        (3, 8, 38),  # 37.5 -> 38
        (1, 3, 33),
        (2, 3, 67),
        (11, 1100, 1),
        (1, 1000, 0),  # 0.1 -> 0
        (1100, 1100, 100),
    ],
)
def test_meter_rounds_halves_up_like_javascript(tokens, max_tokens, pct):
    rendered = render_system_prompt([block("m", "x", max_tokens=max_tokens, writable=True, tokens=tokens)])
    assert f"[{pct}% — {tokens}/{max_tokens} tokens]" in rendered


def test_js_round():
    assert [js_round(x) for x in (0.5, 1.5, 2.5, 0.49999999999999994, 2.4999, 7.0)] == [1, 2, 3, 0, 2, 7]


# -- keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "title, content, key",
    [
        (None, "no key", "no-key-1nprufp"),
        (None, "Just content, no desc", "just-content-no-desc-cgko96"),
        (None, "用户喜欢咖啡", "entry-2mzjev"),
        ("Pirate style", "any", "pirate-style"),
        ("!!!", "any", "entry-ckr8de"),
        ("  ", "hello world", "hello-world-1n91413"),
        (
            None,
            "The deployment process for production requires approval from security team",
            "the-deployment-process-for-production-requires-approval-from-qz646",
        ),
        (
            None,
            "The deployment process for production requires approval from management",
            "the-deployment-process-for-production-requires-approval-from-1a3vzxs",
        ),
    ],
)
def test_context_entry_key_vectors(title, content, key):
    assert context_entry_key(title, content) == key


def test_key_details():
    assert context_entry_key("", "no key") == "no-key-1nprufp"  # empty title: content path
    assert context_entry_key("Pirate style", "a") == context_entry_key("Pirate style", "b")  # title is stable
    assert context_entry_key(" -Tea- ", "x") == "tea"  # one leading and one trailing dash removed
    assert context_entry_key("\ufeff", "hi") == "hi-" + stable_hash("hi")  # JS trim strips a BOM
    # 60 UTF-16 units: an astral character counts twice and may be cut in half
    assert context_entry_key("😀" * 29 + "ab", "x") == "ab"
    assert context_entry_key("a" + "😀" * 30 + "b", "x") == "a"
    assert stable_hash("") == "ztntfp"  # 0x811c9dc5 in base 36


# -- providers and loading ---------------------------------------------------------------------


def test_provider_kinds_are_duck_typed():
    memory, skills, knowledge = Memory(), ReadOnlySkills({}), Knowledge(writable=False)
    assert (is_writable_provider(memory), is_skill_provider(memory), is_search_provider(memory)) == (True, False, False)
    assert (is_writable_provider(skills), is_skill_provider(skills)) == (False, True)
    assert (is_writable_provider(knowledge), is_search_provider(knowledge)) == (False, True)
    assert not is_writable_provider(StaticContext("x")) and not is_writable_provider(None)
    with pytest.raises(TypeError, match="no get"):
        ContextConfig("x", provider=object())


def test_blocks_are_not_loaded_until_asked():
    blocks = example_blocks()
    assert not blocks.loaded and blocks.get_blocks() == [] and blocks.get_block("soul") is None
    blocks.load()
    assert blocks.loaded
    assert [b.label for b in blocks.get_blocks()] == ["soul", "memory", "skills", "knowledge"]
    soul, memory, skills, knowledge = blocks.get_blocks()
    assert (soul.writable, soul.is_skill, soul.is_searchable) == (False, False, False)
    assert (memory.writable, memory.max_tokens, memory.tokens, memory.description) == (True, 1100, 11, "Learned facts")
    assert (skills.is_skill, skills.writable, skills.content) == (True, False, "")
    assert (knowledge.is_searchable, knowledge.writable, knowledge.content) == (True, True, "2 entries indexed.")


def test_providerless_block_is_empty_and_read_only():
    blocks = ContextBlocks([ContextConfig("notes", "Notes")])
    blocks.load()
    assert blocks.get_block("notes") == ContextBlock("notes", "Notes", "", 0, None, False, False, False)
    assert blocks.to_system_prompt() == ""


def test_init_is_called_before_get_on_every_load():
    calls: list[str] = []

    class Tracked:
        def init(self, label: str) -> None:
            calls.append(f"init:{label}")

        def get(self) -> str:
            calls.append("get")
            return "x"

    blocks = ContextBlocks([ContextConfig("a", provider=Tracked())])
    blocks.load()
    blocks.load()  # idempotent
    assert calls == ["init:a", "get"]
    blocks.load(force=True)
    blocks.refresh_system_prompt()
    assert calls == ["init:a", "get"] * 3


def test_duplicate_labels_are_refused():
    with pytest.raises(ContextError, match='Block "a" already exists'):
        ContextBlocks([ContextConfig("a"), ContextConfig("a")])
    blocks = ContextBlocks([ContextConfig("a", provider=Memory("1"))])
    with pytest.raises(ContextError, match='^Block "a" already exists$'):
        blocks.add_context(ContextConfig("a"))
    assert issubclass(ContextError, SessionsError)


def test_add_context_loads_and_appends_without_touching_the_frozen_prompt():
    blocks = ContextBlocks([ContextConfig("soul", provider=StaticContext("Hi."))])
    frozen = blocks.freeze_system_prompt()
    added = blocks.add_context(ContextConfig("memory", "Facts", provider=Memory("fact")))
    assert added == blocks.get_block("memory") and added.content == "fact" and added.writable
    assert [b.label for b in blocks.get_blocks()] == ["soul", "memory"]
    assert blocks.freeze_system_prompt() == frozen
    assert "MEMORY (Facts)" in blocks.refresh_system_prompt()


def test_remove_context_drops_block_and_its_loaded_skills():
    blocks = ContextBlocks(
        [
            ContextConfig("skills", provider=Skills({"a": ("A", None)})),
            ContextConfig("skills2", provider=Skills({"a": ("A", None)})),
        ]
    )
    blocks.load_skill("skills", "a")
    blocks.load_skill("skills2", "a")
    unloaded: list[Any] = []
    blocks.on_unload = lambda *args: unloaded.append(args)
    assert blocks.remove_context("skills") is True
    assert blocks.remove_context("skills") is False
    assert blocks.get_block("skills") is None and [b.label for b in blocks.get_blocks()] == ["skills2"]
    assert blocks.loaded_skill_keys() == ["skills2:a"] and unloaded == []


# -- writes ------------------------------------------------------------------------------------


def writable_blocks(**providers: Any) -> ContextBlocks:
    configs = [
        ContextConfig("soul", provider=StaticContext("Be kind.")),
        ContextConfig("memory", "Facts", 10, providers.get("memory", Memory("a"))),
        ContextConfig("free", provider=providers.get("free", Memory())),
        ContextConfig("skills", provider=providers.get("skills", Skills())),
        ContextConfig("kb", provider=providers.get("kb", Knowledge())),
    ]
    return ContextBlocks(configs)


def test_set_block_writes_provider_and_memory():
    memory = Memory("a")
    blocks = writable_blocks(memory=memory)
    updated = blocks.set_block("memory", "likes tea")
    assert memory.writes == ["likes tea"]
    assert updated == blocks.get_block("memory")
    assert (updated.content, updated.tokens, updated.max_tokens, updated.description) == ("likes tea", 3, 10, "Facts")


@pytest.mark.parametrize(
    "label, content, message",
    [
        ("soul", "x", 'Block "soul" is readonly'),
        ("nope", "x", 'Block "nope" is readonly'),
        ("skills", "x", 'Block "skills" is a keyed provider. Use setSkill() or setSearchEntry() instead.'),
        ("kb", "x", 'Block "kb" is a keyed provider. Use setSkill() or setSearchEntry() instead.'),
        ("memory", "a" * 260, 'Block "memory" exceeds maxTokens: 65 > 10'),
    ],
)
def test_set_block_errors(label, content, message):
    blocks = writable_blocks()
    blocks.load()
    before = blocks.get_blocks()
    with pytest.raises(ContextError) as error:
        blocks.set_block(label, content)
    assert str(error.value) == message
    assert blocks.get_blocks() == before


def test_max_tokens_zero_rejects_content_but_shows_no_meter():
    blocks = ContextBlocks([ContextConfig("m", max_tokens=0, provider=Memory())])
    with pytest.raises(ContextError, match="exceeds maxTokens: 2 > 0"):
        blocks.set_block("m", "x")
    assert blocks.set_block("m", "").content == ""
    assert blocks.to_system_prompt() == f"{SEP}\nM [writable]\n{SEP}\n"


def test_failed_provider_write_leaves_block_unchanged():
    blocks = ContextBlocks([ContextConfig("m", provider=Failing("old"))])
    with pytest.raises(RuntimeError, match="disk full"):
        blocks.set_block("m", "new")
    assert blocks.get_block("m").content == "old"


@pytest.mark.parametrize(
    "existing, added, result",
    [("a", "b", "a\nb"), ("a", "\nb", "a\nb"), ("", "b", "b"), (None, "b", "b"), ("a\n", "b", "a\n\nb")],
)
def test_append_separator(existing, added, result):
    blocks = ContextBlocks([ContextConfig("m", provider=Memory(existing))])
    assert blocks.append_to_block("m", added).content == result


def test_append_errors_and_limit_on_combined_text():
    blocks = writable_blocks(memory=Memory("a" * 36))  # 9 tokens
    with pytest.raises(ContextError, match='^Block "nope" not found$'):
        blocks.append_to_block("nope", "x")
    with pytest.raises(ContextError, match='^Block "soul" is readonly$'):
        blocks.append_to_block("soul", "x")
    with pytest.raises(ContextError, match="exceeds maxTokens: 11 > 10"):
        blocks.append_to_block("memory", "b" * 6)


def test_set_skill_refreshes_listing_and_passes_description_only_when_given():
    skills = Skills()
    blocks = writable_blocks(skills=skills)
    blocks.set_skill("skills", "pirate", "Talk like a pirate.", "Pirate style")
    blocks.set_skill("skills", "plain", "Plain.")
    assert skills.sets == [("pirate", "Talk like a pirate.", "Pirate style"), ("plain", "Plain.", None)]
    assert blocks.get_block("skills").content == "- pirate: Pirate style\n- plain"
    assert blocks.get_block("skills").tokens > 0


def test_set_skill_keeps_listing_when_get_gives_nothing():
    class Opaque(Skills):
        def get(self) -> str:
            return "listing" if not self.docs else ""

    blocks = ContextBlocks([ContextConfig("s", provider=Opaque())])
    blocks.set_skill("s", "k", "doc")
    assert blocks.get_block("s").content == "listing"


def test_set_search_entry_refreshes_summary():
    kb = Knowledge()
    blocks = writable_blocks(kb=kb)
    blocks.load()
    assert blocks.get_block("kb").content == ""
    blocks.set_search_entry("kb", "tea", "User likes tea")
    assert kb.entries == {"tea": "User likes tea"}
    assert blocks.get_block("kb").content == "1 entries indexed."


def test_keyed_write_errors():
    blocks = ContextBlocks(
        [
            ContextConfig("memory", provider=Memory()),
            ContextConfig("ro-skills", provider=ReadOnlySkills({})),
            ContextConfig("ro-kb", provider=Knowledge(writable=False)),
        ]
    )
    with pytest.raises(ContextError, match='^Block "memory" is not a skill provider$'):
        blocks.set_skill("memory", "k", "x")
    with pytest.raises(ContextError, match='^Block "memory" is not a search provider$'):
        blocks.set_search_entry("memory", "k", "x")
    with pytest.raises(ContextError, match='^Block "ro-skills" does not support writes$'):
        blocks.set_skill("ro-skills", "k", "x")
    with pytest.raises(ContextError, match='^Block "ro-kb" does not support writes$'):
        blocks.set_search_entry("ro-kb", "k", "x")
    with pytest.raises(ContextError, match='^Block "memory" is not a skill provider$'):
        blocks.load_skill("memory", "k")
    with pytest.raises(ContextError, match='^Block "missing" is not a search provider$'):
        blocks.search_context("missing", "q")


# -- skills and search -------------------------------------------------------------------------


def test_load_and_unload_skills():
    blocks = ContextBlocks(
        [ContextConfig("skills", provider=Skills({"pirate": ("Arr.", None), "formal": ("Sir.", None)}))]
    )
    assert blocks.load_skill("skills", "missing") is None
    assert blocks.load_skill("skills", "pirate") == "Arr."
    assert blocks.load_skill("skills", "formal") == "Sir."
    assert blocks.load_skill("skills", "pirate") == "Arr."
    assert blocks.loaded_skill_keys() == ["skills:pirate", "skills:formal"]
    seen: list[tuple[str, str]] = []
    blocks.on_unload = lambda label, key: seen.append((label, key))
    assert blocks.unload_skill("skills", "pirate") is True
    assert blocks.unload_skill("skills", "pirate") is False
    assert seen == [("skills", "pirate")]
    assert blocks.loaded_skill_keys() == ["skills:formal"]
    blocks.restore_loaded_skills(["skills:a", "skills:b", "skills:a"])
    assert blocks.loaded_skill_keys() == ["skills:a", "skills:b"]
    blocks.clear_loaded_skills()
    assert blocks.loaded_skill_keys() == []


def test_unload_hook_errors_are_logged_not_raised(caplog):
    blocks = ContextBlocks([ContextConfig("skills", provider=Skills({"a": ("A", None)}))])
    blocks.load_skill("skills", "a")

    def broken(label: str, key: str) -> None:
        raise ValueError("history unavailable")

    blocks.on_unload = broken
    with caplog.at_level(logging.ERROR, logger="sessions_core.context"):
        assert blocks.unload_skill("skills", "a") is True
    assert "history unavailable" in caplog.text


def test_async_unload_hook_is_awaited():
    blocks = ContextBlocks([ContextConfig("skills", provider=Skills({"a": ("A", None)}))])
    blocks.load_skill("skills", "a")
    seen: list[str] = []

    async def hook(label: str, key: str) -> None:
        await asyncio.sleep(0)
        seen.append(f"{label}:{key}")

    blocks.on_unload = hook
    assert blocks.unload_skill("skills", "a")
    assert seen == ["skills:a"]


def test_search_context():
    blocks = ContextBlocks([ContextConfig("kb", provider=Knowledge({"t": "User likes tea"}))])
    assert blocks.search_context("kb", "tea") == "User likes tea"
    assert blocks.search_context("kb", "coffee") is None


def test_has_skill_providers_needs_no_load():
    assert ContextBlocks([ContextConfig("s", provider=ReadOnlySkills({}))]).has_skill_providers()
    assert not ContextBlocks([ContextConfig("m", provider=Memory())]).has_skill_providers()


# -- async providers ---------------------------------------------------------------------------


def test_async_providers_from_sync_code():
    memory, skills, kb = AsyncMemory("fact"), AsyncSkills({"a": ("A", "Doc A")}), AsyncKnowledge({"k": "tea"})
    blocks = ContextBlocks(
        [
            ContextConfig("memory", provider=memory),
            ContextConfig("skills", provider=skills),
            ContextConfig("kb", provider=kb),
        ]
    )
    blocks.load()
    assert memory.labels == ["memory"]
    assert blocks.get_block("memory").content == "fact"
    assert blocks.get_block("skills").content == "- a: Doc A"
    assert blocks.set_block("memory", "new").content == "new" and memory.content == "new"
    assert blocks.load_skill("skills", "a") == "A"
    blocks.set_skill("skills", "b", "B", "Doc B")
    assert blocks.get_block("skills").content == "- a: Doc A\n- b: Doc B"
    assert blocks.search_context("kb", "tea") == "tea"
    blocks.set_search_entry("kb", "c", "coffee")
    assert blocks.get_block("kb").content == "2 entries indexed."


def test_async_providers_from_a_worker_thread_of_a_running_loop():
    memory = AsyncMemory("fact")
    blocks = ContextBlocks([ContextConfig("memory", provider=memory)], prompt_store=AsyncMemory())

    async def main() -> str:
        await run_in_thread(blocks.set_block, "memory", "from the loop")
        return await run_in_thread(blocks.freeze_system_prompt)

    assert "from the loop" in asyncio.run(main())


def test_async_providers_called_synchronously_inside_a_running_loop():
    blocks = ContextBlocks([ContextConfig("memory", provider=AsyncMemory("fact"))])

    async def main() -> str:
        return blocks.freeze_system_prompt()  # blocking call on the loop thread still works

    assert asyncio.run(main()).endswith("\nfact")


# -- frozen prompt lifecycle -------------------------------------------------------------------


def test_writes_do_not_change_the_frozen_prompt_until_refresh():
    blocks = writable_blocks(memory=Memory("old"))
    frozen = blocks.freeze_system_prompt()
    assert frozen.count("old") == 1
    blocks.set_block("memory", "new")
    blocks.append_to_block("free", "more")
    assert blocks.freeze_system_prompt() == frozen == blocks.to_system_prompt()
    assert blocks.get_block("memory").content == "new"  # the live block did change
    refreshed = blocks.refresh_system_prompt()
    assert "new" in refreshed and "more" in refreshed and "old" not in refreshed
    assert blocks.freeze_system_prompt() == refreshed


def test_prompt_store_is_read_first_and_written_on_freeze_and_refresh():
    store = Memory()
    blocks = writable_blocks(memory=Memory("old"))
    blocks.prompt_store = store
    frozen = blocks.freeze_system_prompt()
    assert store.writes == [frozen]
    assert blocks.freeze_system_prompt() == frozen and store.writes == [frozen]  # stored value wins
    blocks.set_block("memory", "new")
    refreshed = blocks.refresh_system_prompt()
    assert store.writes == [frozen, refreshed] and "new" in refreshed


def test_after_a_restart_freeze_returns_the_stored_prompt():
    store = Memory("the stored prompt")
    blocks = ContextBlocks([ContextConfig("memory", provider=Memory("fact"))], prompt_store=store)
    assert blocks.freeze_system_prompt() == "the stored prompt"
    assert not blocks.loaded and store.writes == []
    empty = ContextBlocks([ContextConfig("memory", provider=Memory("fact"))], prompt_store=Memory(""))
    assert empty.freeze_system_prompt() == ""  # an empty string counts as a stored prompt


def test_prompt_store_must_be_writable():
    with pytest.raises(TypeError, match="get\\(\\) and set\\(\\)"):
        ContextBlocks([], prompt_store=StaticContext("x"))


def test_prompt_for_estimate_never_caches_or_persists():
    store = Memory()
    blocks = ContextBlocks([ContextConfig("memory", provider=Memory("fact"))], prompt_store=store)
    fresh = blocks.prompt_for_estimate()
    assert fresh.endswith("\nfact") and store.writes == [] and blocks.loaded
    blocks.set_block("memory", "changed")
    assert blocks.prompt_for_estimate().endswith("\nchanged")  # not cached
    store.content = "stored"
    assert blocks.prompt_for_estimate() == "stored"
    frozen = blocks.to_system_prompt()
    assert blocks.prompt_for_estimate() == frozen  # the in-memory snapshot comes first
    assert store.writes == []


class SlowMemory(Memory):
    def get(self) -> str | None:
        time.sleep(0.01)
        return super().get()


@pytest.mark.parametrize("store", [None, SlowMemory()], ids=["in-memory", "prompt-store"])
def test_concurrent_freezes_return_the_same_prompt(store):
    memory = SlowMemory("v0")
    blocks = ContextBlocks([ContextConfig("memory", provider=memory)], prompt_store=store)
    results: list[str] = []
    barrier = threading.Barrier(8)

    def freeze() -> None:
        barrier.wait()
        results.append(blocks.freeze_system_prompt())

    def write() -> None:
        barrier.wait()
        for i in range(3):
            memory.content = f"v{i + 1}"

    threads = [threading.Thread(target=freeze) for _ in range(7)] + [threading.Thread(target=write)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 7 and len(set(results)) == 1
    if store is not None:
        assert store.writes == results[:1]


def test_a_provider_that_raises_on_load_propagates_and_leaves_blocks_unloaded():
    blocks = ContextBlocks([ContextConfig("m", provider=Failing(fail_get=True))])
    with pytest.raises(RuntimeError, match="backend down"):
        blocks.load()
    assert not blocks.loaded and blocks.get_blocks() == []


def test_restoring_an_entry_on_a_session_that_has_not_loaded_its_blocks():
    """A keyed restore goes to the searchable provider even before the blocks are loaded (it
    took a searchable block for a skill one: ``Block "kb" is not a skill provider``)."""
    from sessions_core import Session, StoreSearchContext

    with Session(":memory:").for_session("u") as first:
        for text in ("Lisbon has trams", "Lisbon has no trams"):
            first.store.write_block("u", "kb", text, key="lisbon")
        fresh = Session(first.store).for_session("u").with_context("kb", provider=StoreSearchContext())
        restored = fresh.restore_context("kb", 1, "lisbon")
        assert (restored.version, restored.content) == (3, "Lisbon has trams")
        assert first.store.search_entries("u", "kb", "trams", 5) == [("lisbon", "Lisbon has trams")]
