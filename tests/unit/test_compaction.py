"""Compaction planning: the reference algorithm (section 7.3), tool-pair alignment, the summary
prompt, ``sanitize_tool_pairs`` and ``truncate_older_messages`` (section 7.7)."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_core.compaction import (
    STUB_RESULT_TEXT,
    CompactContext,
    CompactResult,
    align_boundary_backward,
    align_boundary_forward,
    build_summary_prompt,
    compute_summary_budget,
    create_compact_function,
    find_tail_cut,
    sanitize_tool_pairs,
    tool_pairs_intact,
    truncate_older_messages,
)
from sessions_core.errors import CompactionError
from sessions_core.messages import (
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
)
from sessions_core.tokens import compact_json, estimate_message_tokens

# -- builders --------------------------------------------------------------------------------


def user(message_id: str, text: str = "hello") -> SessionMessage:
    return SessionMessage(id=message_id, role="user", parts=[TextPart(text=text)])


def assistant(message_id: str, text: str = "sure") -> SessionMessage:
    return SessionMessage(id=message_id, role="assistant", parts=[TextPart(text=text)])


def summary(message_id: str, text: str) -> SessionMessage:
    return SessionMessage(id=f"compaction_{message_id}", role="assistant", parts=[TextPart(text=text)])


def calls(message_id: str, *call_ids: str, text: str = "") -> SessionMessage:
    parts: list[Any] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(tool_call_id=c, tool_name="search", input={"q": c}) for c in call_ids]
    return SessionMessage(id=message_id, role="assistant", parts=parts)


def results(message_id: str, *call_ids: str, output: Any = "done") -> SessionMessage:
    parts = [ToolResultPart(tool_call_id=c, tool_name="search", output=output) for c in call_ids]
    return SessionMessage(id=message_id, role="tool", parts=parts)


def ui_tool(message_id: str, call_id: str, *, state: str = "output-available", output: Any = "done") -> SessionMessage:
    part = ToolUIPart(type="tool-search", tool_call_id=call_id, state=state, input={"q": call_id}, output=output)
    return SessionMessage(id=message_id, role="assistant", parts=[part])


def chat(count: int, text: str = "word", *, start: int = 0) -> list[SessionMessage]:
    """``count`` alternating user/assistant messages ``m<start>..``; one word is 6 tokens each."""
    return [(user if i % 2 == 0 else assistant)(f"m{i}", text) for i in range(start, start + count)]


def ids(messages: list[SessionMessage]) -> list[str]:
    return [m.id for m in messages]


class Recorder:
    """A summarizer that remembers its prompts."""

    def __init__(self, reply: Any = "the summary") -> None:
        self.reply = reply
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        return self.reply


def valid_cut(messages: list[SessionMessage], cut: int) -> bool:
    return tool_pairs_intact(messages[:cut]) and tool_pairs_intact(messages[cut:])


# -- create_compact_function -----------------------------------------------------------------


def test_none_when_not_more_than_head_plus_min_tail() -> None:
    summarize = Recorder()
    fn = create_compact_function(summarize=summarize, keep_recent_tokens=0)
    assert fn(chat(5)) is None
    assert summarize.prompts == []


def test_none_when_the_tail_budget_covers_everything() -> None:
    summarize = Recorder()
    fn = create_compact_function(summarize=summarize)
    assert fn(chat(30)) is None
    assert summarize.prompts == []


def test_compacts_between_head_and_tail() -> None:
    messages = chat(10)
    assert estimate_message_tokens(messages[:1]) == 6
    summarize = Recorder()
    fn = create_compact_function(summarize=summarize, keep_recent_tokens=18)
    assert fn(messages) == CompactResult("the summary", "m3", "m6")
    assert len(summarize.prompts) == 1


def test_newest_message_is_kept_even_over_budget() -> None:
    messages = chat(8) + [user("big", "word " * 500)]
    fn = create_compact_function(summarize=Recorder(), keep_recent_tokens=10, min_tail_messages=0)
    assert fn(messages) == CompactResult("the summary", "m3", "m7")


def test_min_tail_messages_extends_the_tail() -> None:
    fn = create_compact_function(summarize=Recorder(), keep_recent_tokens=0, min_tail_messages=4)
    assert fn(chat(10)) == CompactResult("the summary", "m3", "m5")


def test_protect_head_keeps_the_first_messages() -> None:
    fn = create_compact_function(summarize=Recorder(), protect_head=5, keep_recent_tokens=0)
    assert fn(chat(10)) == CompactResult("the summary", "m5", "m7")


def test_token_counter_option_wins_over_context_and_heuristic() -> None:
    seen: list[list[SessionMessage]] = []

    def per_message(messages: list[SessionMessage]) -> int:
        seen.append(messages)
        return 100

    messages = chat(12)
    fn = create_compact_function(summarize=Recorder(), keep_recent_tokens=250, token_counter=per_message)
    context = CompactContext(token_counter=lambda _: 50)
    assert fn(messages, context) == CompactResult("the summary", "m3", "m9")
    assert seen and all(len(batch) == 1 for batch in seen)


def test_context_counter_wins_over_heuristic() -> None:
    fn = create_compact_function(summarize=Recorder(), keep_recent_tokens=250)
    assert fn(chat(12), CompactContext(token_counter=lambda _: 50)) == CompactResult("the summary", "m3", "m6")
    assert fn(chat(12), CompactContext()) is None
    assert fn(chat(12)) is None


def test_async_summarize_from_sync_code() -> None:
    async def summarize(prompt: str) -> str:
        await asyncio.sleep(0)
        return f"async summary of {len(prompt)} chars"

    result = create_compact_function(summarize=summarize, keep_recent_tokens=0)(chat(8))
    assert result is not None and result.summary.startswith("async summary of ")


def test_blank_summary_is_a_failure() -> None:
    fn = create_compact_function(summarize=Recorder("  \n "), keep_recent_tokens=0)
    with pytest.raises(CompactionError, match="empty summary"):
        fn(chat(8))


def test_a_summary_that_cannot_be_stored_is_a_failure() -> None:
    fn = create_compact_function(summarize=Recorder("half \ud800 a pair"), keep_recent_tokens=0)
    with pytest.raises(CompactionError, match="^the summary summarize returned holds a lone surrogate"):
        fn(chat(8))


def test_summary_is_returned_as_given() -> None:
    fn = create_compact_function(summarize=Recorder("  text \n"), keep_recent_tokens=0)
    result = fn(chat(8))
    assert result is not None and result.summary == "  text \n"


def test_summarize_errors_propagate() -> None:
    def summarize(prompt: str) -> str:
        raise RuntimeError("model down")

    with pytest.raises(RuntimeError, match="model down"):
        create_compact_function(summarize=summarize, keep_recent_tokens=0)(chat(8))


def test_summarize_returning_a_non_string_is_a_type_error() -> None:
    with pytest.raises(CompactionError, match="summarize must return a str, got int"):
        create_compact_function(summarize=Recorder(42), keep_recent_tokens=0)(chat(8))


def test_compaction_messages_are_left_out_of_the_middle() -> None:
    messages = [*chat(3), summary("old", "EARLIER SUMMARY"), *chat(3, start=3), user("last")]
    summarize = Recorder()
    fn = create_compact_function(summarize=summarize, keep_recent_tokens=0, min_tail_messages=1)
    assert fn(messages) == CompactResult("the summary", "m3", "m5")
    new_turns = summarize.prompts[0].split("NEW TURNS TO INCORPORATE:\n")[1]
    assert "EARLIER SUMMARY" not in new_turns
    assert "[user]\nword" in new_turns


def test_none_when_the_middle_holds_only_compaction_messages() -> None:
    messages = [*chat(3), summary("a", "one"), summary("b", "two"), *chat(2, start=3)]
    fn = create_compact_function(summarize=Recorder(), keep_recent_tokens=0)
    assert fn(messages) is None


def test_previous_summary_is_the_first_compaction_message() -> None:
    messages = [summary("first", "FIRST SUMMARY"), *chat(8)[1:], summary("second", "SECOND"), user("last")]
    summarize = Recorder()
    create_compact_function(summarize=summarize, keep_recent_tokens=0)(messages)
    prompt = summarize.prompts[0]
    assert prompt.startswith("You are updating a conversation summary.")
    assert "PREVIOUS SUMMARY:\nFIRST SUMMARY\n\nNEW TURNS" in prompt
    assert "SECOND" not in prompt


def test_the_cut_keeps_every_result_with_its_call() -> None:
    messages = [*chat(3), calls("a", "c1", "c2"), results("r1", "c1"), results("r2", "c2"), *chat(4, start=3)]

    def compact(protect_head: int, min_tail_messages: int) -> CompactResult | None:
        return create_compact_function(
            summarize=Recorder(), protect_head=protect_head, keep_recent_tokens=0, min_tail_messages=min_tail_messages
        )(messages)

    assert compact(4, 2) == CompactResult("the summary", "m3", "m4")
    assert compact(3, 5) is None
    assert compact(1, 5) == CompactResult("the summary", "m1", "m2")
    assert compact(1, 3) == CompactResult("the summary", "m1", "m3")


def test_summary_budget() -> None:
    assert compute_summary_budget(chat(3)) == 100
    big = [user("big", "x" * 4000)]
    assert compute_summary_budget(big) == (4 + 1000) * 2 // 10


# -- summary prompt --------------------------------------------------------------------------

SECTIONS = (
    """## Topic
[What the conversation is about]

## Key Points
[Important information, decisions, and conclusions from the conversation]

## Current State
[Where things stand now — what has been done, what is in progress]

## Open Items
[Unresolved questions, pending tasks, or next steps discussed]

"""
    "Target ~{budget} tokens. Be factual — only include information that was explicitly discussed in the conversation."
    " Do NOT invent file paths, commands, or details that were not mentioned. Write only the summary body."
)


def prompt_conversation() -> list[SessionMessage]:
    return [
        user("u1", "What is the weather in Paris?"),
        SessionMessage(
            id="a1",
            role="assistant",
            parts=[
                TextPart(text="Let me check."),
                ToolCallPart(tool_call_id="c1", tool_name="weather", input={"city": "Paris"}),
            ],
        ),
        SessionMessage(
            id="t1",
            role="tool",
            parts=[ToolResultPart(tool_call_id="c1", tool_name="weather", output={"temp": 21, "sky": "clear"})],
        ),
        SessionMessage(
            id="a2",
            role="assistant",
            parts=[
                TextPart(text="Found it."),
                ToolUIPart(
                    type="tool-lookup", tool_call_id="c2", state="output-available", input={"id": 7}, output="ACME"
                ),
            ],
        ),
    ]


CONTENT = """[user]
What is the weather in Paris?

---

[assistant]
Let me check.
[Tool: weather]
Input: {"city":"Paris"}

---

[tool]

[Tool: weather]
Output: {"temp":21,"sky":"clear"}

---

[assistant]
Found it.
[Tool: lookup]
Input: {"id":7}
Output: ACME"""


def test_first_summary_prompt_golden() -> None:
    expected = (
        "Create a concise summary of this conversation that preserves the important information "
        "for future context.\n\nCONVERSATION TO SUMMARIZE:\n"
        + CONTENT
        + "\n\nUse this structure:\n\n"
        + SECTIONS.replace("{budget}", "150")
    )
    assert build_summary_prompt(prompt_conversation(), None, 150) == expected
    assert build_summary_prompt(prompt_conversation(), "", 150) == expected


def test_update_summary_prompt_golden() -> None:
    expected = (
        "You are updating a conversation summary. A previous summary exists below. New conversation "
        "turns have occurred since then and need to be incorporated.\n\nPREVIOUS SUMMARY:\nOld facts."
        "\n\nNEW TURNS TO INCORPORATE:\n"
        + CONTENT
        + "\n\nUpdate the summary. PRESERVE existing information that is still relevant. ADD new "
        "information. Remove information only if it is clearly obsolete.\n\n" + SECTIONS.replace("{budget}", "100")
    )
    assert build_summary_prompt(prompt_conversation(), "Old facts.", 100) == expected


def content_of(message: SessionMessage) -> str:
    prompt = build_summary_prompt([message], None, 100)
    return prompt.split("CONVERSATION TO SUMMARIZE:\n")[1].split("\n\nUse this structure:")[0]


def test_prompt_snippets_are_cut_to_500_chars() -> None:
    message = SessionMessage(
        id="t",
        role="tool",
        parts=[ToolUIPart(type="dynamic-tool", tool_call_id="c", input="i" * 600, output="o" * 600)],
    )
    assert content_of(message) == '[tool]\n\n[Tool: unknown]\nInput: "' + "i" * 499 + "\nOutput: " + "o" * 500


def test_prompt_leaves_out_js_falsy_values_and_keeps_empty_objects() -> None:
    message = SessionMessage(
        id="t",
        role="assistant",
        parts=[
            ToolUIPart(type="tool-a", tool_call_id="c1", input={}, output=0),
            ToolUIPart(type="tool-b", tool_call_id="c2", input="", output=[]),
            ToolUIPart(type="tool-c", tool_call_id="c3", tool_name="named", input=False, output=True),
        ],
    )
    assert content_of(message) == (
        "[assistant]\n\n[Tool: a]\nInput: {}\n[Tool: b]\nOutput: []\n[Tool: named]\nOutput: true"
    )


def test_prompt_ignores_reasoning_and_joins_text_parts() -> None:
    message = SessionMessage.model_validate(
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "thinking"},
                {"type": "text", "text": "one"},
                {"type": "step-start"},
                {"type": "text", "text": "two"},
            ],
        }
    )
    assert content_of(message) == "[assistant]\none\ntwo"


# -- boundary alignment ----------------------------------------------------------------------


def reference_tool_ids(message: SessionMessage) -> set[str]:
    return {p.tool_call_id for p in message.parts if isinstance(p, (ToolCallPart, ToolResultPart, ToolUIPart))}


def reference_forward(messages: list[SessionMessage], idx: int) -> int:
    if idx <= 0 or idx >= len(messages):
        return idx
    previous = messages[idx - 1]
    wanted = reference_tool_ids(previous)
    if previous.role == "assistant" and wanted:
        while idx < len(messages) and reference_tool_ids(messages[idx]) & wanted:
            idx += 1
    return idx


def reference_backward(messages: list[SessionMessage], idx: int) -> int:
    if idx <= 0 or idx >= len(messages):
        return idx
    while idx > 0:
        current, previous = messages[idx], messages[idx - 1]
        if current.role == "assistant" and reference_tool_ids(current):
            break
        wanted = reference_tool_ids(previous)
        if previous.role == "assistant" and wanted and reference_tool_ids(current) & wanted:
            idx -= 1
            continue
        break
    return idx


REFERENCE_CASES = {
    "plain chat": chat(6),
    "one call, one result": [*chat(2), calls("a", "c1"), results("r", "c1"), *chat(2, start=2)],
    "two calls, one result message": [*chat(2), calls("a", "c1", "c2"), results("r", "c1", "c2"), *chat(2, start=2)],
    "back to back tool turns": [
        user("u"),
        calls("a1", "c1"),
        results("r1", "c1"),
        calls("a2", "c2"),
        results("r2", "c2"),
        assistant("z"),
    ],
    "ui parts": [user("u"), ui_tool("a1", "c1"), ui_tool("a2", "c2"), assistant("z"), user("v")],
    "call without result": [user("u"), calls("a", "c1"), user("v"), assistant("w")],
}


@pytest.mark.parametrize("messages", REFERENCE_CASES.values(), ids=REFERENCE_CASES.keys())
def test_alignment_matches_the_reference_on_its_cases(messages: list[SessionMessage]) -> None:
    for idx in range(len(messages) + 1):
        assert align_boundary_forward(messages, idx) == reference_forward(messages, idx)
        assert align_boundary_backward(messages, idx) == reference_backward(messages, idx)


def test_alignment_moves_past_a_result_pair() -> None:
    messages = [*chat(2), calls("a", "c1"), results("r", "c1"), *chat(2, start=2)]
    assert align_boundary_forward(messages, 3) == 4
    assert align_boundary_backward(messages, 3) == 2
    assert align_boundary_backward(messages, 2) == 2
    assert align_boundary_forward(messages, 0) == 0
    assert align_boundary_forward(messages, len(messages)) == len(messages)


def test_alignment_with_results_in_separate_messages() -> None:
    messages = [
        *chat(3),
        calls("a", "c1", "c2", "c3"),
        results("r1", "c1"),
        results("r2", "c2"),
        results("r3", "c3"),
        *chat(2, start=3),
    ]
    for idx in (4, 5, 6):
        assert align_boundary_backward(messages, idx) == 3
        assert align_boundary_forward(messages, idx) == 7
    assert reference_backward(messages, 5) == 5, "the reference splits c2 from its call here"
    assert reference_forward(messages, 5) == 5


def test_alignment_with_interleaved_calls() -> None:
    messages = [
        user("u"),
        calls("a1", "c1"),
        calls("a2", "c2"),
        results("r1", "c1"),
        user("v"),
        results("r2", "c2"),
        user("w"),
    ]
    assert align_boundary_forward(messages, 2) == 6
    assert align_boundary_backward(messages, 5) == 1
    assert align_boundary_backward(messages, 6) == 6
    assert [valid_cut(messages, b) for b in range(8)] == [True, True, False, False, False, False, True, True]


def test_find_tail_cut_aligns_backward() -> None:
    messages = [*chat(3), calls("a", "c1", "c2"), results("r1", "c1"), results("r2", "c2"), assistant("z")]
    assert find_tail_cut(messages, 3, lambda m: 1, 2, 0) == 3
    assert find_tail_cut(messages, 3, lambda m: 1, 1, 0) == 6
    assert find_tail_cut(messages, 0, lambda m: 1, 100, 0) == 0


# -- property: the cut never splits a tool pair ----------------------------------------------


@st.composite
def conversations(draw: st.DrawFn, *, reference_style: bool = False) -> list[SessionMessage]:
    """Random chats with tool turns: 1-3 calls per assistant message, results in tool messages
    of one or two results (``reference_style``: all results in the next message), UI tool parts,
    and compaction summaries."""
    messages: list[SessionMessage] = []
    pending: list[str] = []
    call_ids = (f"c{n}" for n in itertools.count())
    kinds = ["user", "assistant", "calls", "ui"] + ([] if reference_style else ["results", "summary"])
    for i in range(draw(st.integers(0, 30))):
        text = " ".join(["word"] * draw(st.integers(0, 60)))
        kind = draw(st.sampled_from(kinds))
        if kind == "calls":
            new = [next(call_ids) for _ in range(draw(st.integers(1, 3)))]
            messages.append(calls(f"m{i}", *new, text=text))
            if reference_style:
                messages.append(results(f"r{i}", *new, output=text))
            else:
                pending += new
        elif kind == "results" and pending:
            chosen = [
                pending.pop(draw(st.integers(0, len(pending) - 1)))
                for _ in range(draw(st.integers(1, min(2, len(pending)))))
            ]
            messages.append(results(f"m{i}", *chosen, output=text))
        elif kind == "ui":
            messages.append(ui_tool(f"m{i}", next(call_ids), output=text or None, state="output-available"))
        elif kind == "summary":
            messages.append(summary(str(i), text or "summary"))
        else:
            messages.append((user if kind == "user" else assistant)(f"m{i}", text or "hi"))
    for n, call_id in enumerate(draw(st.permutations(pending))):
        messages.append(results(f"late{n}", call_id))
    return messages


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(0, 5), st.integers(0, 4), st.integers(0, 600))
def test_compaction_never_splits_a_tool_pair(
    messages: list[SessionMessage], protect_head: int, min_tail: int, budget: int
) -> None:
    assert tool_pairs_intact(messages)
    fn = create_compact_function(
        summarize=lambda prompt: "summary",
        protect_head=protect_head,
        keep_recent_tokens=budget,
        min_tail_messages=min_tail,
    )
    result = fn(messages)
    if result is None:
        return
    order = ids(messages)
    start, last = order.index(result.from_message_id), order.index(result.to_message_id)
    assert protect_head <= start <= last < len(messages) - 1
    assert not result.from_message_id.startswith("compaction_")
    assert not result.to_message_id.startswith("compaction_")
    assert tool_pairs_intact(messages[start : last + 1])
    assert tool_pairs_intact(messages[:start] + messages[last + 1 :])


@settings(max_examples=200, deadline=None)
@given(conversations(), st.data())
def test_alignment_finds_the_nearest_valid_cut(messages: list[SessionMessage], data: st.DataObject) -> None:
    idx = data.draw(st.integers(0, len(messages)))
    forward, backward = align_boundary_forward(messages, idx), align_boundary_backward(messages, idx)
    assert backward <= idx <= forward
    assert valid_cut(messages, forward) and valid_cut(messages, backward)
    assert not any(valid_cut(messages, b) for b in range(idx, forward))
    assert not any(valid_cut(messages, b) for b in range(backward + 1, idx + 1))


@settings(max_examples=200, deadline=None)
@given(conversations(reference_style=True))
def test_alignment_equals_the_reference_when_each_call_has_one_result_message(messages: list[SessionMessage]) -> None:
    for idx in range(len(messages) + 1):
        assert align_boundary_forward(messages, idx) == reference_forward(messages, idx)
        assert align_boundary_backward(messages, idx) == reference_backward(messages, idx)


# -- tool_pairs_intact and sanitize_tool_pairs -----------------------------------------------


def test_tool_pairs_intact() -> None:
    assert tool_pairs_intact([calls("a", "c1", "c2"), results("r1", "c1"), results("r2", "c2")])
    assert not tool_pairs_intact([calls("a", "c1", "c2"), results("r1", "c1")])
    assert not tool_pairs_intact([results("r1", "c1")])
    assert tool_pairs_intact([ui_tool("a", "c1")])
    assert not tool_pairs_intact([ui_tool("a", "c1", state="input-available", output=None)])


def test_sanitize_removes_orphaned_results() -> None:
    mixed = SessionMessage(
        id="mixed",
        role="tool",
        parts=[TextPart(text="note"), ToolResultPart(tool_call_id="gone", output="x")],
    )
    messages = [results("r0", "gone"), mixed, calls("a", "c1"), results("r1", "c1")]
    sanitized = sanitize_tool_pairs(messages)
    assert ids(sanitized) == ["mixed", "a", "r1"]
    assert sanitized[0].parts == [TextPart(text="note")]
    assert sanitized[1] is messages[2] and sanitized[2] is messages[3]
    assert len(mixed.parts) == 2


def test_sanitize_stubs_missing_results_after_their_call() -> None:
    messages = [
        user("u"),
        calls("a", "c1", "c2"),
        results("r1", "c1"),
        ui_tool("b", "c3", state="input-available", output=None),
    ]
    sanitized = sanitize_tool_pairs(messages)
    assert ids(sanitized) == ["u", "a", "stub-c2", "r1", "b", "stub-c3"]
    stub = sanitized[2]
    assert stub.role == "tool" and stub.created_at is not None and stub.created_at.tzinfo is not None
    assert stub.parts == [ToolResultPart(tool_call_id="c2", tool_name="search", output=STUB_RESULT_TEXT)]
    assert stub.to_dict()["parts"] == [
        {"type": "tool-result", "toolCallId": "c2", "toolName": "search", "output": STUB_RESULT_TEXT}
    ]
    assert tool_pairs_intact(sanitized)
    assert ids(sanitize_tool_pairs(sanitized)) == ids(sanitized)


def test_sanitize_keeps_finished_ui_parts() -> None:
    messages = [ui_tool("a", "c1"), ui_tool("b", "c2", state="output-error", output=None)]
    assert sanitize_tool_pairs(messages) == messages


@settings(max_examples=200, deadline=None)
@given(conversations(), st.data())
def test_sanitize_makes_any_slice_intact(messages: list[SessionMessage], data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(messages)))
    end = data.draw(st.integers(start, len(messages)))
    window = messages[start:end]
    sanitized = sanitize_tool_pairs(window)
    assert tool_pairs_intact(sanitized)
    assert all(m.parts for m in sanitized)
    kept = [i for i in ids(sanitized) if not i.startswith("stub-")]
    assert kept == [m.id for m in window if m.id in kept]
    assert all(m.role == "tool" for m in window if m.id not in kept)


# -- truncate_older_messages -----------------------------------------------------------------


def tool_output(message: SessionMessage) -> Any:
    return message.parts[0].output


def test_truncate_returns_short_lists_unchanged() -> None:
    messages = [results("r", "c1", output="x" * 5000), *chat(3)]
    truncated = truncate_older_messages(messages)
    assert truncated == messages and all(a is b for a, b in zip(truncated, messages))


def test_truncate_leaves_recent_messages_and_short_parts_alone() -> None:
    messages = [user("short"), *(results(f"r{i}", "c", output="y" * 1000) for i in range(4))]
    truncated = truncate_older_messages(messages)
    assert all(a is b for a, b in zip(truncated, messages))


def test_truncate_cuts_long_text() -> None:
    messages = [user("long", "a" * 30), *chat(2)]
    truncated = truncate_older_messages(messages, keep_recent=2, max_text_chars=10)
    assert truncated[0].text == "a" * 10 + "... [truncated 30 chars]"
    assert truncated[1:] == messages[1:] and truncated[1] is messages[1]
    assert messages[0].text == "a" * 30


def test_truncate_cuts_string_outputs_within_the_limit() -> None:
    messages = [results("r", "c1", output="z" * 2000), user("u")]
    output = tool_output(truncate_older_messages(messages, keep_recent=1, max_tool_output_chars=100)[0])
    assert len(output) == 100 and output.endswith("... [truncated 2000 chars]") and output.startswith("z")


def test_truncate_keeps_the_shape_of_objects() -> None:
    original = {"path": "/a.txt", "content": "y" * 1000, "total": 1}
    messages = [results("r", "c1", output=original), user("u")]
    before = copy.deepcopy(messages[0].model_dump())
    truncated = truncate_older_messages(messages, keep_recent=1, max_tool_output_chars=100)
    output = tool_output(truncated[0])
    assert output["path"] == "/a.txt" and output["total"] == 1
    assert output["content"].endswith("... [truncated 1000 chars]")
    assert len(compact_json(output)) <= 100
    assert messages[0].model_dump() == before
    assert truncated[0].to_dict()["parts"][0]["output"] == output


def test_truncate_drops_array_items_with_a_marker() -> None:
    messages = [results("r", "c1", output=list(range(1000))), user("u")]
    output = tool_output(truncate_older_messages(messages, keep_recent=1, max_tool_output_chars=200)[0])
    assert output[:3] == [0, 1, 2]
    assert output[-1].startswith("Array output truncated ... [truncated ")
    assert len(compact_json(output)) <= 200


def test_truncate_marks_objects_that_cannot_shrink() -> None:
    wide = {f"key{i}": list(range(100)) for i in range(10)}
    messages = [results("r", "c1", output=wide), user("u")]
    output = tool_output(truncate_older_messages(messages, keep_recent=1, max_tool_output_chars=500)[0])
    assert output.get("__truncated") is True
    assert output["__truncatedChars"] == len(compact_json(wide))
    assert len(compact_json(output)) <= 500


def test_truncate_skips_calls_and_provider_executed_outputs() -> None:
    provider = SessionMessage.model_validate(
        {
            "id": "p",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-web_search",
                    "toolCallId": "c",
                    "state": "output-available",
                    "providerExecuted": True,
                    "output": "x" * 1000,
                },
            ],
        }
    )
    call = SessionMessage(
        id="a", role="assistant", parts=[ToolCallPart(tool_call_id="c2", tool_name="t", input="x" * 1000)]
    )
    messages = [provider, call, user("u")]
    truncated = truncate_older_messages(messages, keep_recent=1, max_tool_output_chars=10)
    assert truncated[0] is provider and truncated[1] is call


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=300),
    lambda children: st.lists(children, max_size=30) | st.dictionaries(st.text(max_size=8), children, max_size=12),
    max_leaves=200,
)


@settings(max_examples=300, deadline=None)
@given(JSON, st.integers(60, 600))
def test_truncated_tool_outputs_fit_the_limit(value: Any, limit: int) -> None:
    messages = [results("r", "c1", output=value), user("u")]
    truncated = truncate_older_messages(messages, keep_recent=1, max_tool_output_chars=limit)
    output = tool_output(truncated[0])
    size = len(output) if isinstance(output, str) else len(compact_json(output))
    original = len(value) if isinstance(value, str) else len(compact_json(value))
    if original <= limit:
        assert truncated[0] is messages[0]
    else:
        assert size <= limit
        assert type(output) is type(value)
