"""Compaction planning (pure, no I/O): sections 7.3 and 7.7 of the reference.

A compaction function receives the visible history and names the range to replace by a summary.
A cut between two messages never separates parts that share a ``tool_call_id``: a ``tool-call``
part and its ``tool-result`` parts (our format, results often in later messages of their own),
or an AI SDK UI tool part (``tool-<name>`` / ``dynamic-tool``, call and result in one part).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ._async import call
from .errors import CompactionError
from .messages import (
    COMPACTION_ID_PREFIX,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
)
from .text import lone_surrogate, surrogate_problem
from .tokens import compact_json, estimate_message_tokens

__all__ = [
    "STUB_RESULT_TEXT",
    "CompactContext",
    "CompactResult",
    "align_boundary_backward",
    "align_boundary_forward",
    "build_summary_prompt",
    "compute_summary_budget",
    "create_compact_function",
    "find_tail_cut",
    "sanitize_tool_pairs",
    "tool_pairs_intact",
    "truncate_older_messages",
]

TokenCounter = Callable[[list[SessionMessage]], int]
Summarize = Callable[[str], "str | Awaitable[str]"]

STUB_RESULT_TEXT = "[Result from earlier conversation — see context summary above]"
_SNIPPET_CHARS = 500
_MAX_DEPTH = 8
_TOOL_PARTS = (ToolCallPart, ToolResultPart, ToolUIPart)
_ToolPart = ToolCallPart | ToolResultPart | ToolUIPart

_SECTIONS = """## Topic
[What the conversation is about]

## Key Points
[Important information, decisions, and conclusions from the conversation]

## Current State
[Where things stand now — what has been done, what is in progress]

## Open Items
[Unresolved questions, pending tasks, or next steps discussed]

Target ~{budget} tokens. Be factual — only include information that was explicitly discussed in \
the conversation. Do NOT invent file paths, commands, or details that were not mentioned. Write \
only the summary body."""

_UPDATE_TEMPLATE = (
    """You are updating a conversation summary. A previous summary exists below. New conversation \
turns have occurred since then and need to be incorporated.

PREVIOUS SUMMARY:
{previous_summary}

NEW TURNS TO INCORPORATE:
{content}

Update the summary. PRESERVE existing information that is still relevant. ADD new information. \
Remove information only if it is clearly obsolete.

"""
    + _SECTIONS
)

_FIRST_TEMPLATE = (
    """Create a concise summary of this conversation that preserves the important information for \
future context.

CONVERSATION TO SUMMARIZE:
{content}

Use this structure:

"""
    + _SECTIONS
)


@dataclass(frozen=True, slots=True)
class CompactResult:
    """Replace the messages ``from_message_id .. to_message_id`` (inclusive) by ``summary``."""

    summary: str
    from_message_id: str
    to_message_id: str


@dataclass(slots=True)
class CompactContext:
    """What ``Session.compact`` passes to a compaction function as its second argument."""

    token_counter: TokenCounter | None = None
    """The session's whole-prompt counter, if one was configured."""


def create_compact_function(
    *,
    summarize: Summarize,
    protect_head: int = 3,
    keep_recent_tokens: int = 20_000,
    min_tail_messages: int = 2,
    token_counter: TokenCounter | None = None,
) -> Callable[..., CompactResult | None]:
    """The reference compaction strategy as ``fn(messages, context=None) -> CompactResult | None``.

    The first ``protect_head`` messages and a tail of about ``keep_recent_tokens`` tokens (at
    least ``min_tail_messages`` messages, always the newest one) stay verbatim; the middle, minus
    earlier ``compaction_`` summaries, is summarised by ``summarize(prompt)`` (plain or
    ``async def``). Messages are counted one at a time with ``token_counter``, else the context's
    counter, else ``estimate_message_tokens``. ``None`` when there is nothing to compact. A blank
    or non-string summary is a failed summariser (``CompactionError``; the reference returned
    ``None`` and so hid it); exceptions from ``summarize`` propagate.
    """

    def compact(messages: Sequence[SessionMessage], context: CompactContext | None = None) -> CompactResult | None:
        messages = list(messages)
        if len(messages) <= protect_head + min_tail_messages:
            return None
        counter = token_counter
        if counter is None and context is not None:
            counter = context.token_counter
        if counter is None:
            counter = estimate_message_tokens
        start = align_boundary_forward(messages, protect_head)
        end = find_tail_cut(messages, start, lambda message: counter([message]), keep_recent_tokens, min_tail_messages)
        middle = [m for m in messages[start:end] if not m.id.startswith(COMPACTION_ID_PREFIX)]
        if not middle:
            return None
        prompt = build_summary_prompt(middle, _previous_summary(messages), compute_summary_budget(middle))
        summary = call(summarize, prompt)
        if not isinstance(summary, str):
            raise CompactionError(f"summarize must return a str, got {type(summary).__name__}")
        if not summary.strip():
            raise CompactionError("summarize returned an empty summary")
        position = lone_surrogate(summary)
        if position is not None:
            raise CompactionError(surrogate_problem("the summary summarize returned", summary, position))
        return CompactResult(summary, middle[0].id, middle[-1].id)

    return compact


def find_tail_cut(
    messages: Sequence[SessionMessage],
    start: int,
    count: Callable[[SessionMessage], int],
    budget: int,
    min_tail_messages: int = 2,
) -> int:
    """Index where the verbatim tail begins (``<= start`` means nothing to compact).

    Walks back from the newest message while the tail fits ``budget`` (the newest message is
    always taken), extends the tail to ``min_tail_messages`` when that keeps it after ``start``,
    then aligns the cut backward so no tool call loses its results.
    """
    size = len(messages)
    used = 0
    token_cut = size
    for i in range(size - 1, start - 1, -1):
        tokens = count(messages[i])
        if used + tokens > budget and token_cut < size:
            break
        used += tokens
        token_cut = i
    min_cut = size - min_tail_messages
    cut = min(token_cut, min_cut) if min_cut >= start else token_cut
    return align_boundary_backward(messages, cut)


def align_boundary_forward(messages: Sequence[SessionMessage], idx: int) -> int:
    """The smallest cut ``>= idx`` that separates no tool call from its results.

    A cut ``b`` splits ``messages[:b]`` from ``messages[b:]``; it is valid when every
    ``tool_call_id`` has all its parts on one side.
    """
    spans = _tool_spans(messages)
    while crossing := _crossing(spans, idx):
        idx = max(last for _, last in crossing) + 1
    return idx


def align_boundary_backward(messages: Sequence[SessionMessage], idx: int) -> int:
    """The largest cut ``<= idx`` that separates no tool call from its results (see forward)."""
    spans = _tool_spans(messages)
    while crossing := _crossing(spans, idx):
        idx = min(first for first, _ in crossing)
    return idx


def compute_summary_budget(middle: Sequence[SessionMessage]) -> int:
    """Target summary length: a fifth of the summarised tokens, at least 100."""
    return max(100, math.floor(estimate_message_tokens(middle) * 0.2))


def build_summary_prompt(messages: Sequence[SessionMessage], previous_summary: str | None, budget: int) -> str:
    """The summarisation prompt: an update of ``previous_summary`` when it is non-empty.

    Each message renders as ``[role]`` then its text parts, then one entry per tool part:
    ``[Tool: name]``, ``Input: <compact JSON>`` and ``Output: <output>``, each value cut to 500
    characters and left out when JS-falsy. Unlike the reference (JS ``String()``, which gives
    ``[object Object]``), non-string outputs render as compact JSON, and a ``tool-<name>`` UI part
    without ``tool_name`` is named after its type.
    """
    content = "\n\n---\n\n".join(_render_message(m) for m in messages)
    if previous_summary:
        return _UPDATE_TEMPLATE.format(previous_summary=previous_summary, content=content, budget=budget)
    return _FIRST_TEMPLATE.format(content=content, budget=budget)


def sanitize_tool_pairs(messages: Sequence[SessionMessage]) -> list[SessionMessage]:
    """A copy of ``messages`` in which every tool call has a result and every result a call.

    ``tool-result`` parts without a matching call are removed (and messages left without parts
    dropped); a call without a result gets a stub ``tool`` message right after its message. A UI
    tool part counts as answered once it has an output or an ``output-*`` state. Unchanged
    messages are returned as they are.
    """
    calls = _ids(messages, _is_call)
    missing = calls - _ids(messages, _is_result)
    sanitized: list[SessionMessage] = []
    for message in messages:
        parts = [p for p in message.parts if not (isinstance(p, ToolResultPart) and p.tool_call_id not in calls)]
        if len(parts) < len(message.parts):
            message = message.model_copy(update={"parts": parts})
        if parts:
            sanitized.append(message)
        for part in _tool_parts(message):
            if part.tool_call_id in missing:
                missing.discard(part.tool_call_id)
                sanitized.append(_stub_result(part))
    return sanitized


def tool_pairs_intact(messages: Sequence[SessionMessage]) -> bool:
    """True when every tool result has its call in ``messages`` and every call its result."""
    return _ids(messages, _is_call) == _ids(messages, _is_result)


def truncate_older_messages(
    messages: Sequence[SessionMessage],
    *,
    keep_recent: int = 4,
    max_tool_output_chars: int = 500,
    max_text_chars: int = 10_000,
) -> list[SessionMessage]:
    """A copy with tool outputs and long texts cut in all but the last ``keep_recent`` messages.

    Tool outputs keep their shape (strings end with ``... [truncated N chars]``; objects and
    arrays shrink their members and may gain ``__truncated`` / ``__truncatedChars`` or an omission
    marker); provider-executed outputs are left alone. A text part longer than
    ``max_text_chars`` keeps that many characters plus the suffix. The input is not modified;
    unchanged messages are the same objects.
    """
    cutoff = len(messages) - keep_recent
    return [
        _truncate_message(m, max_tool_output_chars, max_text_chars) if i < cutoff else m for i, m in enumerate(messages)
    ]


def _tool_parts(message: SessionMessage) -> Iterator[_ToolPart]:
    return (p for p in message.parts if isinstance(p, _TOOL_PARTS))


def _is_call(part: _ToolPart) -> bool:
    return isinstance(part, (ToolCallPart, ToolUIPart))


def _is_result(part: _ToolPart) -> bool:
    if isinstance(part, ToolUIPart):
        return part.output is not None or (part.state or "").startswith("output-")
    return isinstance(part, ToolResultPart)


def _ids(messages: Sequence[SessionMessage], keep: Callable[[_ToolPart], bool]) -> set[str]:
    return {p.tool_call_id for m in messages for p in _tool_parts(m) if p.tool_call_id is not None and keep(p)}


def _tool_spans(messages: Sequence[SessionMessage]) -> list[tuple[int, int]]:
    """Per ``tool_call_id`` spread over several messages: its first and last message index."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, message in enumerate(messages):
        for part in _tool_parts(message):
            if part.tool_call_id is not None:
                first.setdefault(part.tool_call_id, i)
                last[part.tool_call_id] = i
    return [(first[key], last[key]) for key in first if last[key] > first[key]]


def _crossing(spans: list[tuple[int, int]], cut: int) -> list[tuple[int, int]]:
    return [(first, last) for first, last in spans if first < cut <= last]


def _previous_summary(messages: Sequence[SessionMessage]) -> str | None:
    return next((m.text for m in messages if m.id.startswith(COMPACTION_ID_PREFIX)), None)


def _tool_name(part: _ToolPart) -> str:
    if part.tool_name:
        return part.tool_name
    if isinstance(part, ToolUIPart) and part.type.startswith("tool-"):
        return part.type.removeprefix("tool-")
    return "unknown"


def _js_truthy(value: Any) -> bool:
    """JavaScript truthiness: ``0``, ``""`` and ``False`` are absent; ``{}`` and ``[]`` present."""
    if isinstance(value, (bool, int, float, str)):
        return bool(value)
    return value is not None


def _render_message(message: SessionMessage) -> str:
    block = f"[{message.role}]\n{message.text}"
    tools = "\n".join(_render_tool(p) for p in _tool_parts(message))
    return f"{block}\n{tools}" if tools else block


def _render_tool(part: _ToolPart) -> str:
    lines = [f"[Tool: {_tool_name(part)}]"]
    tool_input = getattr(part, "input", None)
    if _js_truthy(tool_input):
        lines.append("Input: " + compact_json(tool_input)[:_SNIPPET_CHARS])
    output = getattr(part, "output", None)
    if _js_truthy(output):
        text = output if isinstance(output, str) else compact_json(output)
        lines.append("Output: " + text[:_SNIPPET_CHARS])
    return "\n".join(lines)


def _stub_result(call_part: _ToolPart) -> SessionMessage:
    call_id = call_part.tool_call_id
    assert call_id is not None  # a call among the ids _ids found
    return SessionMessage(
        id=f"stub-{call_id}",
        role="tool",
        parts=[
            ToolResultPart(
                tool_call_id=call_id,
                tool_name=_tool_name(call_part),
                output=STUB_RESULT_TEXT,
            )
        ],
        created_at=datetime.now(timezone.utc),
    )


def _truncate_message(message: SessionMessage, max_output: int, max_text: int) -> SessionMessage:
    parts = [_truncate_part(p, max_output, max_text) for p in message.parts]
    if all(new is old for new, old in zip(parts, message.parts)):
        return message
    return message.model_copy(update={"parts": parts})


def _truncate_part(part: Any, max_output: int, max_text: int) -> Any:
    if isinstance(part, TextPart) and len(part.text) > max_text:
        return part.model_copy(update={"text": part.text[:max_text] + _suffix(len(part.text))})
    if (
        isinstance(part, (ToolResultPart, ToolUIPart))
        and part.output is not None
        and (part.model_extra or {}).get("providerExecuted") is not True
    ):
        output = _shrink(part.output, max_output)
        if output is not part.output:
            return part.model_copy(update={"output": output})
    return part


def _suffix(original_chars: int) -> str:
    return f"... [truncated {original_chars} chars]"


def _json_len(value: Any) -> int:
    return len(compact_json(value))


def _clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending with the truncation suffix."""
    if len(text) <= limit:
        return text
    suffix = _suffix(len(text))
    if limit <= len(suffix):
        return suffix[: max(limit, 0)]
    return text[: limit - len(suffix)] + suffix


def _shrink(value: Any, limit: int, depth: int = 0) -> Any:
    """``value`` with its shape kept and its compact JSON within ``limit`` characters where
    possible; the very object when it already fits."""
    if isinstance(value, str):
        return _clip(value, limit)
    if not isinstance(value, (dict, list)):
        return value
    size = _json_len(value)
    if size <= limit:
        return value
    if depth >= _MAX_DEPTH:
        return f"[Nested output omitted {_suffix(size)}]"
    share = limit if len(value) <= 1 else max(80, limit // min(len(value), 10))
    if isinstance(value, list):
        return _shrink_list(value, limit, share, size, depth)
    return _shrink_dict(value, limit, share, size, depth)


def _shrink_list(items: list[Any], limit: int, share: int, size: int, depth: int) -> list[Any]:
    shrunk = [_shrink(item, share, depth + 1) for item in items]
    if _json_len(shrunk) <= limit:
        return shrunk
    marker = f"Array output truncated {_suffix(size)}"
    room = limit - _json_len([marker])
    totals = itertools.accumulate(_json_len(item) + 1 for item in shrunk)
    kept = sum(1 for _ in itertools.takewhile(lambda total: total <= room, totals))
    result = [*shrunk[:kept], marker]
    return result if _json_len(result) <= limit else [_omission_marker(limit - 2, size)]


def _shrink_dict(obj: dict[str, Any], limit: int, share: int, size: int, depth: int) -> dict[str, Any]:
    shrunk = {key: _shrink(item, share, depth + 1) for key, item in obj.items()}
    for key in sorted((k for k, v in obj.items() if isinstance(v, str)), key=lambda k: -len(shrunk[k])):
        excess = _json_len(shrunk) - limit
        if excess <= 0:
            return shrunk
        text = obj[key]
        shrunk[key] = _clip(text, max(len(shrunk[key]) - excess, len(_suffix(len(text)))))
    if _json_len(shrunk) <= limit:
        return shrunk
    shrunk.update({"__truncated": True, "__truncatedChars": size})
    return shrunk if _json_len(shrunk) <= limit else _omission_marker(limit, size)


def _omission_marker(limit: int, size: int) -> dict[str, Any]:
    marker: dict[str, Any] = {"__truncated": True, "__truncatedChars": size}
    noted = {**marker, "note": "Tool output omitted because it was too large to preserve structurally."}
    return noted if _json_len(noted) <= limit else marker
