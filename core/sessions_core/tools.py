"""Tools for the model: a framework-neutral ``Tool``, the context tools and ``session_search``.

A tool never raises into the agent loop: bad arguments and failures come back as
``"Error: ..."`` strings, worded as the reference words them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from ._async import call, run_in_thread
from .context import ContextBlock, ContextBlocks, context_entry_key, usage_percent
from .messages import SessionMessage, ToolCallPart, ToolResultPart, ToolUIPart
from .provenance import write_source, writing_as
from .tokens import estimate_tokens

LOAD_CONTEXT = "load_context"
UNLOAD_CONTEXT = "unload_context"
UNLOADED_PREFIX = "[skill unloaded:"


class _ArgumentError(ValueError):
    """Tool arguments that do not fit the tool's JSON schema."""


@dataclass(frozen=True)
class Tool:
    """A tool: a name, a description, a JSON Schema for its arguments and ``func(args) -> str``.

    ``func`` (plain or ``async def``) receives the validated arguments as a dict; optional
    arguments given as ``null`` are dropped. ``advisory_enums`` names top-level arguments whose
    ``enum`` is a hint the tool checks itself (to give its own error message).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[[dict[str, Any]], Any] = field(repr=False)
    advisory_enums: frozenset[str] = field(default=frozenset(), repr=False)

    def invoke(self, args: Mapping[str, Any] | str | bytes | None = None, *, tool_call_id: str | None = None) -> str:
        """Run the tool on a dict or a JSON string; always returns a string. What it writes to
        a context block is recorded as written by ``"tool"``, with ``tool_call_id`` (or the id an
        adapter set with ``writing_as``)."""
        try:
            parsed = _parse_arguments(args)
            _validate(self.parameters, parsed, "", self.advisory_enums)
        except _ArgumentError as error:
            return f"Error: invalid arguments for {self.name}: {error}"
        source, outer_id = write_source()
        try:
            with writing_as("tool", tool_call_id or (outer_id if source == "tool" else None)):
                result = call(self.func, parsed)
        except Exception as error:
            return f"Error: {str(error) or type(error).__name__}"
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)

    async def ainvoke(
        self, args: Mapping[str, Any] | str | bytes | None = None, *, tool_call_id: str | None = None
    ) -> str:
        """``invoke`` in a worker thread; async providers run back on this event loop."""
        return await run_in_thread(self.invoke, args, tool_call_id=tool_call_id)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }


def to_openai_tools(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """The OpenAI ``tools=[...]`` list for ``tools``."""
    return [tool.to_openai() for tool in tools]


# -- argument checks --------------------------------------------------------------------------

_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "string", "object", "array", "number"):
        if _JSON_TYPES[name](value):
            return name
    return type(value).__name__


def _parse_arguments(args: Any) -> dict[str, Any]:
    if args is None:
        return {}
    if isinstance(args, (bytes, bytearray)):
        args = args.decode("utf-8", "replace")
    if isinstance(args, str):
        if not args.strip():
            return {}
        try:
            args = json.loads(args)
        except ValueError as error:
            raise _ArgumentError(f"not valid JSON ({error})") from None
        except RecursionError:
            raise _ArgumentError("not valid JSON (nested too deeply)") from None
    if not isinstance(args, Mapping):
        raise _ArgumentError(f"expected a JSON object, got {_json_type(args)}")
    return dict(args)


def _validate(schema: Mapping[str, Any], value: Any, path: str, advisory: Iterable[str] = ()) -> None:
    """Check ``value`` against the ``type``, ``enum``, ``required`` and ``properties`` of
    ``schema``; optional ``null`` members of an object are removed in place."""
    where = f'"{path}"' if path else "the arguments"
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_JSON_TYPES.get(name, lambda v: True)(value) for name in names):
            raise _ArgumentError(f"{where} must be {' or '.join(names)}, got {_json_type(value)}")
    if "enum" in schema and path not in advisory and value not in schema["enum"]:
        choices = ", ".join(json.dumps(choice, ensure_ascii=False) for choice in schema["enum"])
        raise _ArgumentError(f"{where} must be one of {choices}")
    if not isinstance(value, dict):
        return
    required = schema.get("required", ())
    for name in required:
        if name not in value:
            raise _ArgumentError(f'missing required field "{path + "." if path else ""}{name}"')
    for name, sub in schema.get("properties", {}).items():
        if name not in value:
            continue
        if value[name] is None and name not in required:
            del value[name]
            continue
        if path:
            _validate(sub, value[name], f"{path}.{name}")
        else:
            _validate(sub, value[name], name, advisory)


# -- context tools ----------------------------------------------------------------------------

_METADATA_HINT = (
    "\n\nFor keyed blocks (skill collections / searchable), pass "
    "`metadata: { title, description }` — title stabilises updates, "
    "description helps the model pick entries. Metadata is optional; "
    "short content rarely needs it, long loadable entries benefit most."
)


def _quoted(labels: Sequence[str]) -> str:
    return ", ".join(f'"{label}"' for label in labels)


def _label_schema(labels: Sequence[str], description: str, second: str, second_description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": list(labels), "description": description},
            second: {"type": "string", "description": second_description},
        },
        "required": ["label", second],
    }


def context_tools(
    blocks: ContextBlocks, current: list[ContextBlock] | None = None, *, edit: bool = False
) -> list[Tool]:
    """The context tools that apply, in order ``set_context`` (then ``edit_context`` with
    ``edit``), ``load_context``, ``unload_context``, ``search_context``, for the ``current``
    blocks (by default ``blocks``, loaded first); label lists and descriptions are snapshots."""
    if current is None:
        blocks.load()
        current = blocks.get_blocks()
    writable = [b for b in current if b.writable]
    skill_labels = [b.label for b in current if b.is_skill]
    search_labels = [b.label for b in current if b.is_searchable]
    tools: list[Tool] = []
    if writable:
        tools.append(_set_context(blocks, writable))
        if edit:
            tools.append(_edit_context(blocks, writable))
    if skill_labels:
        tools.append(_load_context(blocks, skill_labels))
        tools.append(_unload_context(blocks, skill_labels))
    if search_labels:
        tools.append(_search_context(blocks, search_labels))
    return tools


def _kind(block: ContextBlock) -> str:
    if block.is_skill:
        return "skill collection, keyed entries"
    if block.is_searchable:
        return "searchable, keyed entries"
    return "writable"


def _set_context(blocks: ContextBlocks, writable: list[ContextBlock]) -> Tool:
    keyed = [b.label for b in writable if b.is_skill or b.is_searchable]
    lines = [
        f'- "{b.label}" ({_kind(b)}): {b.description if b.description is not None else "no description"}'
        for b in writable
    ]
    properties: dict[str, Any] = {
        "label": {"type": "string", "enum": [b.label for b in writable], "description": "Block label to write to"},
        "content": {"type": "string", "description": "The main content to write to the block."},
        "action": {"type": "string", "enum": ["replace", "append"], "description": "replace (default) or append"},
    }
    if keyed:
        properties["metadata"] = {
            "type": "object",
            "description": (
                f"Optional metadata for keyed entries (skill collections, searchable blocks: {_quoted(keyed)}). "
                "Short content doesn't need metadata; longer loadable entries (skills) benefit from a title "
                "and description so the model can pick the right one without loading it."
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
        }
    description = (
        "Write to a context block. Available blocks:\n"
        + "\n".join(lines)
        + "\n\nWrites are durable and persist across sessions."
        + (_METADATA_HINT if keyed else "")
    )

    def run(args: dict[str, Any]) -> str:
        label, content = args["label"], args["content"]
        block = blocks.get_block(label)
        if block is None:
            return f'Error: block "{label}" not found'
        if block.is_skill or block.is_searchable:
            metadata = given if isinstance(given := args.get("metadata"), dict) else {}
            title, summary = metadata.get("title"), metadata.get("description")
            key = context_entry_key(title, content)
            if block.is_skill:
                blocks.set_skill(label, key, content, summary if summary is not None else title)
            else:
                blocks.set_search_entry(label, key, content)
            return f'Indexed "{key}" in {label}.'
        if args.get("action") == "append":
            updated = blocks.append_to_block(label, content)
        else:
            updated = blocks.set_block(label, content)
        return f"Written to {label}. Usage: {_usage(updated)}"

    schema = {"type": "object", "properties": properties, "required": ["label", "content"]}
    return Tool("set_context", description, schema, run, frozenset({"label"}))


EDIT_CONTEXT = "edit_context"


def _edit_context(blocks: ContextBlocks, writable: list[ContextBlock]) -> Tool:
    keyed = [b.label for b in writable if b.is_skill or b.is_searchable]
    properties: dict[str, Any] = {
        "label": {"type": "string", "enum": [b.label for b in writable], "description": "Block label to edit"},
        "old_text": {
            "type": "string",
            "description": "The exact text to replace. It must occur exactly once in the block (or entry).",
        },
        "new_text": {"type": "string", "description": "The text to put in its place (empty to delete old_text)."},
    }
    if keyed:
        properties["key"] = {
            "type": "string",
            "description": f"The entry to edit, in a keyed block ({_quoted(keyed)}).",
        }
    description = (
        "Edit a context block in place: replace the one occurrence of old_text with new_text. Prefer it to"
        " set_context for a change to part of a block: the rest stays as it is."
    )

    def run(args: dict[str, Any]) -> str:
        label, old, new, key = args["label"], args["old_text"], args["new_text"], args.get("key", "")
        block = blocks.get_block(label)
        if block is None:
            return f'Error: block "{label}" not found'
        if not block.writable:
            return f'Error: block "{label}" is read-only'
        if not old:
            return "Error: old_text must not be empty"
        keyed_block = block.is_skill or block.is_searchable
        if keyed_block:
            if not key:
                return f'Error: block "{label}" holds keyed entries: pass the key of the entry to edit'
            current = blocks.entry_content(label, key)
            if current is None:
                return f'Error: no entry "{key}" in block "{label}"'
            where = f'entry "{key}" of block "{label}"'
        else:
            current, where = block.content, f'block "{label}"'
        count = current.count(old)
        if count == 0:
            return f"Error: old_text does not occur in {where}; nothing changed"
        if count > 1:
            return (
                f"Error: old_text occurs {count} times in {where}; nothing changed"
                " (pass a longer old_text, one that occurs once)"
            )
        edited = current.replace(old, new, 1)
        if not keyed_block:
            tokens = estimate_tokens(edited)
            if block.max_tokens is not None and tokens > block.max_tokens:
                return (
                    f'Error: the edit would take block "{label}" to {tokens} tokens, over its limit of'
                    f" {block.max_tokens}; nothing changed"
                )
            updated = blocks.set_block(label, edited)
            return f"Edited {label}. Usage: {_usage(updated)}"
        if block.is_skill:
            blocks.set_skill(label, key, edited)
        else:
            blocks.set_search_entry(label, key, edited)
        return f'Edited "{key}" in {label}.'

    schema = {"type": "object", "properties": properties, "required": ["label", "old_text", "new_text"]}
    return Tool(EDIT_CONTEXT, description, schema, run, frozenset({"label"}))


def _usage(block: ContextBlock) -> str:
    if block.max_tokens:
        return f"{usage_percent(block.tokens, block.max_tokens)}% ({block.tokens}/{block.max_tokens} tokens)"
    return f"{block.tokens} tokens"


def _not_a_skill_block(label: str, skill_labels: Sequence[str]) -> str:
    return f'Error: "{label}" is not a skill block. Skill blocks: {", ".join(skill_labels)}'


def _load_context(blocks: ContextBlocks, skill_labels: list[str]) -> Tool:
    description = (
        "Load a document from a skill block by key. "
        f"Available skill blocks: {_quoted(skill_labels)}. Check the system prompt for available keys."
    )

    def run(args: dict[str, Any]) -> str:
        label, key = args["label"], args["key"]
        if label not in skill_labels:
            return _not_a_skill_block(label, skill_labels)
        content = blocks.load_skill(label, key)
        return f"Not found: {key}" if content is None else content

    schema = _label_schema(skill_labels, "Skill block label", "key", "Skill key to load")
    return Tool(LOAD_CONTEXT, description, schema, run, frozenset({"label"}))


def _unload_context(blocks: ContextBlocks, skill_labels: list[str]) -> Tool:
    loaded = blocks.loaded_skill_keys()
    description = (
        "Unload a previously loaded skill to free context space. The skill remains available for re-loading."
        + (f" Currently loaded: {', '.join(loaded)}." if loaded else " No skills currently loaded.")
    )

    def run(args: dict[str, Any]) -> str:
        label, key = args["label"], args["key"]
        if label not in skill_labels:
            return _not_a_skill_block(label, skill_labels)
        if not blocks.unload_skill(label, key):
            return f'Skill "{key}" is not currently loaded in "{label}".'
        return f'Unloaded "{key}" from {label}. Context reclaimed.'

    schema = _label_schema(skill_labels, "Skill block label", "key", "Skill key to unload")
    return Tool(UNLOAD_CONTEXT, description, schema, run, frozenset({"label"}))


def _search_context(blocks: ContextBlocks, search_labels: list[str]) -> Tool:
    description = (
        "Search for information in a searchable context block. "
        f"ONLY these blocks are searchable: {_quoted(search_labels)}. Other blocks cannot be searched."
    )

    def run(args: dict[str, Any]) -> str:
        label, query = args["label"], args["query"]
        if label not in search_labels:
            return f'Error: "{label}" is not searchable. Searchable blocks: {", ".join(search_labels)}'
        result = blocks.search_context(label, query)
        return "No results found." if result is None else result

    schema = _label_schema(search_labels, "Searchable block label", "query", "Search query")
    return Tool("search_context", description, schema, run, frozenset({"label"}))


HIT_CHARS = 4_000
"""Characters of a hit a search tool shows at most."""
CONTEXT_CHARS = 400
"""Characters of the turn beside a hit a search tool shows at most."""


class HitTurn(NamedTuple):
    """The turn beside a hit that helps answer from it: ``relation`` is ``"reply"`` (the hit
    asked, this answered) or ``"asked"`` (this asked, the hit answered)."""

    relation: str
    role: str
    text: str


class ToolHit(NamedTuple):
    """A search hit as a tool shows it: when, where (the session's name or id), who, what."""

    created_at: datetime
    session: str
    role: str
    content: str
    turn: HitTurn | None = None


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (the cut marked with "…")."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def format_hits(hits: Sequence[ToolHit]) -> str:
    """The text of ``session_search`` (and of the searchable history block): one entry per hit,
    best first, separated by a line ``---``::

        [2023-05-08 13:56 UTC | session "Trip planning" | user] When does the car lease start?
          reply (assistant): It starts on the first of March.

    The header says when the message was written, in which session and by whom; the indented
    line is the turn that completes it, when there is one (a question's reply, a reply's
    question), at most ``CONTEXT_CHARS`` characters; a hit shows at most ``HIT_CHARS``."""
    entries = []
    for hit in hits:
        header = f"[{hit.created_at.strftime('%Y-%m-%d %H:%M')} UTC | {hit.session} | {hit.role}]"
        entry = f"{header} {shorten(hit.content, HIT_CHARS)}"
        if hit.turn is not None:
            entry += f"\n  {hit.turn.relation} ({hit.turn.role}): {hit.turn.text}"
        entries.append(entry)
    return "\n---\n".join(entries)


def session_search_tool(search: Callable[[str], Any]) -> Tool:
    """``session_search`` over ``search(query) -> [ToolHit]`` (or results with ``.role`` and
    ``.content``), plain or async; the caller applies the limit, 10 in the reference."""

    def run(args: dict[str, Any]) -> str:
        results = call(search, args["query"])
        if not results:
            return "No results found."
        if all(isinstance(r, ToolHit) for r in results):
            return format_hits(results)
        return "\n---\n".join(f"[{r.role}] {r.content}" for r in results)

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Search query"}},
        "required": ["query"],
    }
    return Tool(
        "session_search",
        "Search past conversations for relevant context. Searches across all sessions.",
        schema,
        run,
    )


# -- loaded skills in history (for the Session: restore after restart, rewrite on unload) ------


@dataclass(frozen=True)
class _SkillEvent:
    message: int
    part: int
    tool: str
    label: str
    key: str
    output: Any
    failed: bool


def _skill_events(messages: Sequence[SessionMessage]) -> list[_SkillEvent]:
    """Completed ``load_context`` / ``unload_context`` calls, in path order: AI SDK tool parts
    with ``state == "output-available"`` and ``tool-call`` / ``tool-result`` pairs."""
    calls: dict[str, tuple[str, Any]] = {}
    events: list[_SkillEvent] = []
    for m, message in enumerate(messages):
        if message.role not in ("assistant", "tool"):
            continue
        for p, part in enumerate(message.parts):
            if isinstance(part, ToolCallPart):
                calls[part.tool_call_id] = (part.tool_name, part.input)
                continue
            if isinstance(part, ToolUIPart):
                if part.state != "output-available":
                    continue
                name = part.tool_name or (part.type[5:] if part.type.startswith("tool-") else None)
                arguments, failed = part.input, False
            elif isinstance(part, ToolResultPart) and part.tool_call_id in calls:
                name, arguments = calls[part.tool_call_id]
                failed = part.is_error
            else:
                continue
            if name not in (LOAD_CONTEXT, UNLOAD_CONTEXT) or not isinstance(arguments, Mapping):
                continue
            label, key = arguments.get("label"), arguments.get("key")
            if isinstance(label, str) and isinstance(key, str):
                events.append(_SkillEvent(m, p, name, label, key, part.output, failed))
    return events


def _is_live_load(event: _SkillEvent) -> bool:
    output = event.output
    if event.tool != LOAD_CONTEXT or event.failed:
        return False
    if isinstance(output, str):
        return not (
            output.startswith(UNLOADED_PREFIX) or output.startswith("Error:") or output == f"Not found: {event.key}"
        )
    return output is not None


def loaded_skills_in_history(messages: Iterable[SessionMessage]) -> list[str]:
    """The ``"label:key"`` skills still loaded at the end of ``messages`` (a path, oldest
    first): a successful load adds, an unload or an ``[skill unloaded: ...]`` result removes."""
    loaded: dict[str, None] = {}
    for event in _skill_events(list(messages)):
        skill_id = f"{event.label}:{event.key}"
        if _is_live_load(event):
            loaded[skill_id] = None
        elif event.tool == UNLOAD_CONTEXT or (
            isinstance(event.output, str) and event.output.startswith(UNLOADED_PREFIX)
        ):
            loaded.pop(skill_id, None)
    return list(loaded)


def unloaded_skill_rewrite(messages: Sequence[SessionMessage], label: str, key: str) -> SessionMessage | None:
    """The newest message holding a live ``load_context`` result for ``label``/``key``, with
    each such result's output replaced by ``[skill unloaded: <key>]``; ``None`` if there is
    none. The caller stores it with ``update_message``."""
    messages = list(messages)
    matches = [e for e in _skill_events(messages) if e.label == label and e.key == key and _is_live_load(e)]
    if not matches:
        return None
    newest = matches[-1].message
    parts = list(messages[newest].parts)
    for event in matches:
        if event.message == newest:
            parts[event.part] = parts[event.part].model_copy(update={"output": f"[skill unloaded: {key}]"})
    return messages[newest].model_copy(update={"parts": parts})
