"""Compaction contract: overlays at read time (reference 7.5), ``compact()`` (7.4), auto-compaction
(7.6), failure handling (4.5) and the ``compaction_`` id guard (#1984), on every backend and mode.

Summarisers are deterministic: they return a numbered summary and record every prompt they get.
One module over 500 lines because it is one contract: its tests share the scripted conversations
and summarisers above them.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import pytest

from sessions_core import (
    CompactContext,
    CompactionError,
    CompactResult,
    InvalidParentError,
    SessionMessage,
    SessionsError,
    ToolCallPart,
    ToolResultPart,
    create_compact_function,
)
from sessions_core._time import now_us
from sessions_core.compaction import tool_pairs_intact
from sessions_core.stores.base import CompactionRow
from sessions_core.tokens import estimate_message_tokens

from .builders import ids, msg
from .harness import AsyncDriver, skip_where_unsupported

PREFIX = "compaction_"


# -- helpers -------------------------------------------------------------------------------


def raw(s: Any) -> Any:
    """The ``Session`` behind a test handle (the handle itself in sync mode)."""
    return s.session if isinstance(s, AsyncDriver) else s


def store_of(s: Any) -> Any:
    return raw(s).store


def chain(s: Any, *names: str, parent: str | None = "") -> None:
    """Append ``names`` one after another; the first under ``parent`` ("" = the latest leaf)."""
    for i, name in enumerate(names):
        message = msg(name)
        if i == 0 and parent != "":
            s.append_message(message, parent_id=parent)
        else:
            s.append_message(message)


def summary_id(compaction: Any) -> str:
    return PREFIX + compaction.id


def call_msg(message_id: str, *call_ids: str, text: str = "") -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [
        {"type": "tool-call", "toolCallId": c, "toolName": "lookup", "input": {"query": f"q {c}"}} for c in call_ids
    ]
    return {"id": message_id, "role": "assistant", "parts": parts}


def result_msg(message_id: str, *call_ids: str, output: str = "") -> dict[str, Any]:
    return {
        "id": message_id,
        "role": "tool",
        "parts": [
            {"type": "tool-result", "toolCallId": c, "toolName": "lookup", "output": output or f"result of {c}"}
            for c in call_ids
        ],
    }


class Summarizer:
    """A deterministic summariser: ``Summary <n> (<k> turns)``; records every prompt."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.summaries: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        turns = prompt.count("\n\n---\n\n") + 1
        summary = f"Summary {len(self.prompts)} ({turns} turns)"
        self.summaries.append(summary)
        return summary


class AsyncSummarizer(Summarizer):
    async def __call__(self, prompt: str) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        return Summarizer.__call__(self, prompt)


@pytest.fixture(params=["plain", "async-def"])
def summarizer(request: pytest.FixtureRequest) -> Summarizer:
    return Summarizer() if request.param == "plain" else AsyncSummarizer()


def fn_for(summarize: Any, **options: Any) -> Any:
    options.setdefault("keep_recent_tokens", 0)
    return create_compact_function(summarize=summarize, **options)


class Recording:
    """Wraps a compaction function and keeps what it was called with."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls: list[tuple[list[SessionMessage], Any]] = []

    def __call__(self, messages: list[SessionMessage], context: Any = None) -> Any:
        self.calls.append((list(messages), context))
        return self.fn(messages, context)


WORDS = (
    "weather paris tokyo invoice refund order shipping tracking python sqlite index query budget"
    " report meeting monday deploy release branch merge review test failure retry"
).split()


def scripted_conversation(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` messages of user turns, plain replies and tool turns whose calls and results
    interleave (a second call is issued before the first call's result has arrived). Every call
    has its result within its turn."""
    rng = random.Random(seed)
    calls = itertools.count()

    def text(lo: int, hi: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))

    def new_calls(n: int) -> list[str]:
        return [f"call{next(calls)}" for _ in range(n)]

    messages: list[dict[str, Any]] = []
    while len(messages) < count:
        turn: list[tuple[str, tuple[str, ...], str]] = [("user", (), text(3, 30))]
        kind = rng.random()
        if 0.35 <= kind < 0.7:  # below 0.35: a plain exchange, no tool call
            batch = new_calls(rng.randint(1, 3))
            turn.append(("call", tuple(batch), text(0, 8)))
            if rng.random() < 0.5:
                turn.append(("result", tuple(batch), text(10, 80)))
            else:
                turn += [("result", (c,), text(10, 60)) for c in batch]
        elif kind >= 0.7:
            first, second, third = new_calls(3)
            turn += [
                ("call", (first, second), text(0, 8)),
                ("result", (first,), text(10, 60)),
                ("call", (third,), text(0, 8)),
                ("result", (second,), text(10, 60)),
                ("result", (third,), text(10, 60)),
            ]
        turn.append(("assistant", (), text(5, 40)))
        if len(messages) + len(turn) > count:  # pad with plain messages to exactly ``count``
            roles = itertools.cycle(["user", "assistant"])
            turn = [(next(roles), (), text(3, 20)) for _ in range(count - len(messages))]
        for kind_, call_ids, body in turn:
            message_id = f"m{len(messages):04d}"
            if kind_ == "call":
                messages.append(call_msg(message_id, *call_ids, text=body))
            elif kind_ == "result":
                messages.append(result_msg(message_id, *call_ids, output=body))
            else:
                messages.append(msg(message_id, body, role=kind_))
    assert len(messages) == count
    return messages


def tool_ids(messages: list[SessionMessage]) -> tuple[set[str], set[str]]:
    """The call ids of the ``tool-call`` parts and of the ``tool-result`` parts."""
    parts = [p for m in messages for p in m.parts]
    return (
        {p.tool_call_id for p in parts if isinstance(p, ToolCallPart)},
        {p.tool_call_id for p in parts if isinstance(p, ToolResultPart)},
    )


def test_scripted_conversation_is_well_formed():
    messages = [SessionMessage.model_validate(m) for m in scripted_conversation(300, seed=4)]
    assert len(messages) == 300 and tool_pairs_intact(messages)
    calls_after_results = [
        m
        for previous, m in itertools.pairwise(messages)
        if previous.role == "tool" and any(p.type == "tool-call" for p in m.parts)
    ]
    assert calls_after_results, "the script must interleave calls and results"


# -- 7.5 overlays at read time --------------------------------------------------------------


def test_an_overlay_replaces_its_range_on_every_read(make_session):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(6)])
    c = s.add_compaction("the summary", "m1", "m3")
    history = s.get_history()
    assert ids(history) == ["m0", summary_id(c), "m4", "m5"]
    synthetic = history[1]
    assert synthetic.role == "assistant" and synthetic.text == "the summary"
    assert synthetic.created_at == c.created_at and synthetic.created_at.tzinfo is not None
    assert ids(s.history()) == ids(history)
    assert ids(s.history(newest_first=True)) == ids(history)[::-1]
    assert ids(s.get_recent_history(10**6).messages) == ids(history)
    # originals stay, and search ignores overlays
    for name in ("m1", "m2", "m3"):
        assert s.get_message(name).text == f"message {name}"
    assert ids(s.search("m2")) == ["m2"]
    assert s.get_path_length() == 6


def test_the_newest_overlay_with_a_given_start_wins_even_when_shorter(make_session):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(6)])
    s.add_compaction("long", "m1", "m4")
    short = s.add_compaction("short", "m1", "m2")
    assert ids(s.get_history()) == ["m0", summary_id(short), "m3", "m4", "m5"]


def test_the_earliest_start_wins_and_overlays_starting_inside_it_are_skipped(make_session):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(7)])
    later_start = s.add_compaction("from m2", "m2", "m5")
    earlier_start = s.add_compaction("from m1", "m1", "m3")
    # m4 and m5 were covered by the skipped overlay: they are shown raw
    assert ids(s.get_history()) == ["m0", summary_id(earlier_start), "m4", "m5", "m6"]
    assert later_start.id != earlier_start.id


def test_equal_timestamps_go_to_the_later_insert_and_time_orders_before_insertion(make_session):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(5)])
    store, sid = store_of(s), raw(s).session_id
    moment = 1_700_000_000_000_000
    store.add_compaction(sid, CompactionRow("first", "first", "m1", "m3", moment))
    store.add_compaction(sid, CompactionRow("second", "second", "m1", "m2", moment))
    assert ids(s.get_history()) == ["m0", "compaction_second", "m3", "m4"]
    # inserted last but created earlier: older in storage order, so it does not win
    store.add_compaction(sid, CompactionRow("backdated", "backdated", "m1", "m3", moment - 1))
    assert ids(s.get_history()) == ["m0", "compaction_second", "m3", "m4"]
    assert [c.id for c in s.get_compactions()] == ["backdated", "first", "second"]


def test_overlays_anchored_off_the_path_are_ignored(make_session):
    s = make_session()
    chain(s, "m0", "m1", "m2", "m3")
    chain(s, "x2", "x3", parent="m1")
    s.add_compaction("to a sibling", "m1", "x3")
    chain(s, "gone", parent="m1")
    s.add_compaction("unknown start", "gone", "m2")
    s.add_compaction("unknown end", "m1", "gone")
    s.delete_messages(["gone"])  # the two overlays now name an id that no longer exists
    with pytest.raises(InvalidParentError, match="'nope'"):
        s.add_compaction("refused", "nope", "m2")
    s.add_compaction("reversed", "m3", "m1")
    assert ids(s.get_history("m3")) == ["m0", "m1", "m2", "m3"]
    assert ids(s.history("m3", newest_first=True)) == ["m3", "m2", "m1", "m0"]
    assert [m.text for m in s.get_history("x3")] == ["message m0", "to a sibling"]


def _expected_reading(store: Any, session_id: str, leaf: str, counter: Any) -> tuple[list[str], int]:
    """The ids a read of the path to ``leaf`` shows and its token estimate, computed from the
    whole stored path with :func:`sessions_core.overlays.plan_overlays` (what reads did before
    they jumped over covered ranges)."""
    from sessions_core.overlays import plan_overlays
    from sessions_core.reads import summary_message

    path = store.path(session_id, leaf)
    shown, tokens = [], 0
    for segment in plan_overlays([e.id for e in path], store.get_compactions(session_id)):
        if segment.overlay is None:
            entries = [e for e in path[segment.start : segment.end] if not e.id.startswith(PREFIX)]
            shown += [e.id for e in entries]
            tokens += sum(e.tokens for e in entries)
        else:
            shown.append(PREFIX + cast(CompactionRow, segment.overlay).id)  # one of get_compactions'
            tokens += counter([summary_message(segment.overlay)])
    return shown, tokens


def _random_compacted_tree(s: Any, rng: random.Random, *, wild: bool) -> list[str]:
    """Messages in a random tree with random overlays on paths, nested and overlapping;
    ``wild``: also across branches, reversed, ending or starting at ids stored only later, and
    deletes between them."""
    store, sid = store_of(s), raw(s).session_id
    names: list[str] = []
    ghosts = [f"g{i}" for i in range(3)]
    unborn = list(ghosts)

    def append(name: str) -> None:
        roll = rng.random()
        parent: Any = "" if roll < 0.75 or not names else (None if roll > 0.95 else rng.choice(names))
        if parent == "":
            s.append_message(msg(name))
        else:
            s.append_message(msg(name), parent_id=parent)
        names.append(name)

    for step in range(rng.randint(25, 45)):
        append(f"m{step}")
        if rng.random() < 0.15:
            kind = rng.random() if wild else 0.0
            if kind < 0.6:  # on a path: an ancestor and a descendant of it
                last = rng.choice(names)
                ancestors = [e.id for e in store.path(sid, last)]
                first = ancestors[rng.randrange(len(ancestors))]
            elif kind < 0.85:
                first, last = rng.choice(names), rng.choice(names)
            else:  # naming an id not stored (yet): Session refuses it, a store keeps what it is given
                first, last = (
                    (rng.choice(ghosts), rng.choice(names))
                    if rng.random() < 0.5
                    else (rng.choice(names), rng.choice(ghosts))
                )
            if first in ghosts or last in ghosts:
                store.add_compaction(sid, CompactionRow(f"ghost-{step}", f"summary {step}", first, last, now_us()))
            else:
                s.add_compaction(f"summary {step}", first, last)
        if wild and rng.random() < 0.05 and len(names) > 3:
            victim = rng.choice(names[:-1])
            s.delete_messages([victim])
            names.remove(victim)
        if wild and rng.random() < 0.04 and unborn:
            append(unborn.pop())
    return names


def test_compacted_reads_show_exactly_what_the_whole_path_shows(make_session):
    """Reads jump over the ranges overlays cover; on random trees with random overlays they show
    exactly what applying every overlay to the whole path shows: every leaf and inner message,
    both directions, the token estimate, and in a fork (whose overlays are copies)."""
    from sessions_core import SessionManager

    rng = random.Random(20)
    for trial in range(8):
        s = make_session()
        names = _random_compacted_tree(s, rng, wild=trial % 2 == 1)
        session = raw(s)
        store, sid = session.store, session.session_id
        for leaf in names:
            expected, tokens = _expected_reading(store, sid, leaf, session._compaction.count)
            assert ids(s.get_history(leaf)) == expected, leaf
            assert ids(s.history(leaf, newest_first=True)) == expected[::-1], leaf
            assert session._history_tokens(leaf) == tokens, leaf
        at = rng.choice(names)
        fork = SessionManager(store).fork(sid, at, "fork")
        copy = SessionManager(store).get_session(fork.id)
        expected, _ = _expected_reading(store, copy.session_id, at, copy._compaction.count)
        assert ids(copy.get_history(at)) == expected
        assert [m.text for m in copy.get_history(at)] == [m.text for m in s.get_history(at)]


def test_a_compacted_read_racing_an_overlay_write_shows_a_whole_reading(make_session):
    """An overlay written between a read's look at the overlays and its walk (another process
    compacting) never cuts the history short: the read shows the path with the overlays it saw,
    or with the new one too."""
    s = make_session()
    chain(s, *[f"m{i}" for i in range(30)])
    s.add_compaction("first", "m2", "m10")
    store = store_of(s)
    overlays = store.overlays
    raw_session = raw(s)
    seen = overlays(raw_session.session_id)  # what the read looked at before the other write
    s.add_compaction("second", "m2", "m20")
    store.overlays = lambda session_id: seen
    try:
        shown = ids(s.get_history())
    finally:
        store.overlays = overlays
    whole = ["m0", "m1", f"{PREFIX}{seen[0].compaction.id}", *[f"m{i}" for i in range(11, 30)]]
    newest = ["m0", "m1", summary_id(s.get_compactions()[-1]), *[f"m{i}" for i in range(21, 30)]]
    assert shown in (whole, newest), shown


def test_a_compacted_read_walks_only_what_it_shows(make_session):
    """A 400-message branch with one overlay over its middle: the read walks the head and the
    tail, not the covered range (on the project's stores, which keep overlay depths)."""
    s = make_session()
    chain(s, *[f"m{i}" for i in range(400)])
    s.add_compaction("the middle", "m3", "m389")
    store = store_of(s)
    from sessions_core.stores.base import Store

    if type(store).overlays is Store.overlays:  # a store without depths
        pytest.skip("this store keeps no overlay depths: its reads walk whole paths")
    walked: list[int] = []
    path_up, path_ids = store.path_up, store.path_ids
    store.path_up = lambda *a, **k: (lambda r: walked.append(len(r[1])) or r)(path_up(*a, **k))
    store.path_ids = lambda *a, **k: pytest.fail("the whole path was walked")
    try:
        history = s.get_history()
        assert ids(history)[:4] == ["m0", "m1", "m2", history[3].id] and ids(history)[4:] == [
            f"m{i}" for i in range(390, 400)
        ]
        assert sum(walked) <= 3 + 1 + 10
    finally:
        store.path_up, store.path_ids = path_up, path_ids


def test_sibling_branches_each_get_their_own_overlay(make_session):
    """Reference test: A1 m0->a2, B m0->b2, A2 m0->a3."""
    s = make_session()
    chain(s, "m0", "a1", "a2", "a3", "a4")
    chain(s, "b1", "b2", "b3", parent="m0")
    s.add_compaction("A1", "m0", "a2")
    b = s.add_compaction("B", "m0", "b2")
    a2 = s.add_compaction("A2", "m0", "a3")
    assert ids(s.get_history("a4")) == [summary_id(a2), "a4"]
    assert ids(s.get_history("b3")) == [summary_id(b), "b3"]
    assert ids(s.get_history()) == [summary_id(b), "b3"]  # b3 is the latest leaf
    assert [m.text for m in s.history("a4", newest_first=True)] == ["message a4", "A2"]
    assert ids(s.get_recent_history(10**6, leaf_id="b3").messages) == [summary_id(b), "b3"]


def test_recent_history_ignores_overlays_that_leave_the_window(make_session):
    s = make_session()
    names = [f"m{i}" for i in range(8)]
    for name in names:
        s.append_message(msg(name, "x" * 40))
    size = len(store_of(s).get_message(raw(s).session_id, "m0").content.encode())
    s.add_compaction("crosses the window start", "m2", "m4")
    inside = s.add_compaction("inside the window", "m5", "m6")
    recent = s.get_recent_history(size * 5)  # window m3..m7
    assert ids(recent.messages) == ["m3", "m4", summary_id(inside), "m7"]
    assert recent.truncated is True
    whole = s.get_recent_history(size * 8)
    assert [m.text for m in whole.messages] == [
        "x" * 40,
        "x" * 40,
        "crosses the window start",
        "inside the window",
        "x" * 40,
    ]
    assert whole.truncated is False


def test_streaming_applies_overlays_across_fetch_chunks(make_session):
    s = make_session()
    names = [f"m{i:03d}" for i in range(450)]  # more than two fetch chunks
    chain(s, *names)
    big = s.add_compaction("big", "m005", "m250")
    small = s.add_compaction("small", "m300", "m310")
    expected = names[:5] + [summary_id(big)] + names[251:300] + [summary_id(small)] + names[311:]
    assert ids(s.get_history()) == expected
    assert ids(s.history()) == expected
    assert ids(s.history(newest_first=True)) == expected[::-1]
    seen = []
    for message in s.history(newest_first=True):
        seen.append(message.id)
        if message.id.startswith(PREFIX):
            break
    assert seen == expected[::-1][: len(names) - 311 + 1]


def test_legacy_compaction_rows_are_hidden_on_read(make_session):
    """A ``compaction_`` row stored by an older version (#1984) heals at read time."""
    s = make_session()
    chain(s, "m0", "m1")
    moment = datetime.now(timezone.utc)
    s.import_message(
        msg("compaction_legacy", "old echoed summary", role="assistant"), parent_id="m1", created_at=moment
    )
    s.import_message(msg("m2"), parent_id="compaction_legacy", created_at=moment + timedelta(seconds=1))
    assert ids(s.get_history()) == ["m0", "m1", "m2"]
    assert ids(s.history(newest_first=True)) == ["m2", "m1", "m0"]
    assert s.get_message("compaction_legacy") is None
    assert s.get_token_estimate() == estimate_message_tokens(s.get_history())


# -- 7.4 compact() ---------------------------------------------------------------------------


def test_compact_without_a_function_raises(make_session):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(8)])
    with pytest.raises(SessionsError, match=r"^No compaction function registered\. Call on_compaction\(\) first\.$"):
        s.compact()
    assert s.get_compactions() == []


def test_compact_returns_none_when_there_is_nothing_to_compress(make_session):
    summarizer = Summarizer()
    s = make_session()
    s.on_compaction(create_compact_function(summarize=summarizer))
    assert s.compact() is None  # empty session
    chain(s, *[f"m{i}" for i in range(5)])  # protect_head + min_tail
    assert s.compact() is None
    chain(s, *[f"n{i}" for i in range(20)])  # the tail budget covers everything (#1593)
    assert s.compact() is None
    s.on_compaction(lambda messages, context: None)
    assert s.compact() is None
    assert summarizer.prompts == [] and s.get_compactions() == []
    assert len(s.get_history()) == 25


def test_compact_stores_an_overlay_and_keeps_every_original(make_session, summarizer):
    s = make_session()
    names = [f"m{i}" for i in range(10)]
    chain(s, *names)
    originals = {m.id: m for m in s.get_history()}
    s.on_compaction(fn_for(summarizer))
    result = s.compact()
    assert result == CompactResult("Summary 1 (5 turns)", "m3", "m7")
    [row] = s.get_compactions()
    assert (row.summary, row.from_message_id, row.to_message_id) == ("Summary 1 (5 turns)", "m3", "m7")
    assert ids(s.get_history()) == ["m0", "m1", "m2", summary_id(row), "m8", "m9"]
    assert "CONVERSATION TO SUMMARIZE:" in summarizer.prompts[0]
    assert "PREVIOUS SUMMARY" not in summarizer.prompts[0]
    for name in names:
        assert s.get_message(name) == originals[name]
    assert s.get_path_length() == 10
    assert s.get_token_estimate() == estimate_message_tokens(s.get_history())


def test_compact_a_named_branch(make_session):
    summarizer = Summarizer()
    s = make_session()
    chain(s, *[f"a{i}" for i in range(10)])
    chain(s, "b5", "b6", parent="a4")  # latest leaf is b6, on a short branch
    s.on_compaction(fn_for(summarizer))
    result = s.compact("a9")
    assert (result.from_message_id, result.to_message_id) == ("a3", "a7")
    [row] = s.get_compactions()
    assert ids(s.get_history("a9")) == ["a0", "a1", "a2", summary_id(row), "a8", "a9"]
    assert ids(s.get_history()) == ["a0", "a1", "a2", "a3", "a4", "b5", "b6"]


def test_three_compactions_form_one_chain_fed_with_the_previous_summary(make_session, summarizer):
    s = make_session()
    recording = Recording(fn_for(summarizer))
    s.on_compaction(recording)
    chain(s, *[f"m{i:02d}" for i in range(10)])
    first = s.compact()
    chain(s, *[f"m{i:02d}" for i in range(10, 15)])
    second = s.compact()
    chain(s, *[f"m{i:02d}" for i in range(15, 20)])
    third = s.compact()

    assert [(r.from_message_id, r.to_message_id) for r in (first, second, third)] == [
        ("m03", "m07"),
        ("m03", "m12"),
        ("m03", "m17"),
    ]
    rows = s.get_compactions()
    assert [(c.summary, c.from_message_id, c.to_message_id) for c in rows] == [
        ("Summary 1 (5 turns)", "m03", "m07"),
        ("Summary 2 (5 turns)", "m03", "m12"),
        ("Summary 3 (5 turns)", "m03", "m17"),
    ]
    assert [c.created_at for c in rows] == sorted(c.created_at for c in rows)
    assert all(c.created_at.tzinfo is not None for c in rows)
    # only the newest summary shows
    assert ids(s.get_history()) == ["m00", "m01", "m02", summary_id(rows[2]), "m18", "m19"]
    # each run saw the previous overlay as a compaction_ message and got its text as the
    # previous summary; the first run had none
    seen = [[m.id for m in messages if m.id.startswith(PREFIX)] for messages, _ in recording.calls]
    assert seen == [[], [summary_id(rows[0])], [summary_id(rows[1])]]
    assert all(
        isinstance(context, CompactContext) and callable(context.token_counter) for _, context in recording.calls
    )
    assert "PREVIOUS SUMMARY" not in summarizer.prompts[0]
    for previous, prompt in zip(summarizer.summaries, summarizer.prompts[1:], strict=False):
        assert f"PREVIOUS SUMMARY:\n{previous}\n\nNEW TURNS TO INCORPORATE:" in prompt
    assert "Summary 1" not in summarizer.prompts[2]
    # the new turns are only those after the previous range
    assert "[user]\nmessage m08" in summarizer.prompts[1] and "message m07" not in summarizer.prompts[1]
    for i in range(20):
        assert s.get_message(f"m{i:02d}").text == f"message m{i:02d}"


def test_compact_extends_only_overlays_visible_on_its_branch(make_session):
    """Compaction on one branch leaves a sibling branch's reads untouched (PR #2120)."""
    summarizer = Summarizer()
    s = make_session()
    chain(s, *[f"m{i}" for i in range(5)])
    chain(s, *[f"a{i}" for i in range(5, 15)])
    chain(s, *[f"b{i}" for i in range(5, 12)], parent="m4")
    s.on_compaction(fn_for(summarizer))
    b_before = s.get_history("b11")
    b_recent = s.get_recent_history(10**6, leaf_id="b11")

    a_result = s.compact("a14")
    assert (a_result.from_message_id, a_result.to_message_id) == ("m3", "a12")
    assert s.get_history("b11") == b_before
    assert s.get_recent_history(10**6, leaf_id="b11") == b_recent
    assert ids(s.history("b11", newest_first=True)) == ids(b_before)[::-1]
    assert s.get_token_estimate("b11") == estimate_message_tokens(b_before)

    b_result = s.compact("b11")  # A's overlay starts on B's path but is not visible there
    assert (b_result.from_message_id, b_result.to_message_id) == ("m3", "b9")
    a_row, b_row = s.get_compactions()
    assert ids(s.get_history("a14")) == ["m0", "m1", "m2", summary_id(a_row), "a13", "a14"]
    assert ids(s.get_history("b11")) == ["m0", "m1", "m2", summary_id(b_row), "b10", "b11"]
    assert "PREVIOUS SUMMARY" not in summarizer.prompts[1]

    # a second compaction on A extends A's chain, not B's
    chain(s, "a15", "a16", "a17", parent="a14")
    again = s.compact("a17")
    assert (again.from_message_id, again.to_message_id) == ("m3", "a15")
    assert f"PREVIOUS SUMMARY:\n{a_row.summary}\n" in summarizer.prompts[2]
    assert ids(s.get_history("b11")) == ["m0", "m1", "m2", summary_id(b_row), "b10", "b11"]


def test_a_custom_function_may_be_async_and_return_a_mapping(make_session):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(6)])

    async def compact(messages, context):
        await asyncio.sleep(0)
        return {"summary": "custom", "fromMessageId": messages[1].id, "toMessageId": messages[2].id}

    s.on_compaction(compact)
    assert s.compact() == CompactResult("custom", "m1", "m2")
    assert [m.text for m in s.get_history()][:2] == ["message m0", "custom"]


@pytest.mark.parametrize(
    "to_id",
    ["nope", "b3", "m4", "summary"],
    ids=["unknown", "sibling-branch", "hidden-under-an-overlay", "synthetic-summary"],
)
def test_a_range_ending_off_the_branch_raises_and_stores_nothing(make_session, to_id):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(10)])
    chain(s, "b3", parent="m2")
    existing = s.add_compaction("existing", "m3", "m5")
    if to_id == "summary":
        to_id = summary_id(existing)
    before = s.get_history("m9")
    s.on_compaction(lambda messages, context: CompactResult("bad", "m6", to_id))
    with pytest.raises(CompactionError):
        s.compact("m9")
    assert [c.id for c in s.get_compactions()] == [existing.id]
    assert s.get_history("m9") == before


@pytest.mark.parametrize("from_id", ["nope", "b3", "m8"], ids=["unknown", "sibling-branch", "after-the-end"])
def test_a_range_starting_off_the_branch_raises_and_stores_nothing(make_session, from_id):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(10)])
    chain(s, "b3", parent="m2")
    s.on_compaction(lambda messages, context: CompactResult("bad", from_id, "m6"))
    with pytest.raises(CompactionError):
        s.compact("m9")
    assert s.get_compactions() == []
    assert ids(s.get_history("m9")) == [f"m{i}" for i in range(10)]


def test_clear_removes_compactions(make_session):
    summarizer = Summarizer()
    s = make_session()
    chain(s, *[f"m{i}" for i in range(10)])
    s.on_compaction(fn_for(summarizer))
    s.compact()
    assert len(s.get_compactions()) == 1
    s.clear_messages()
    assert s.get_compactions() == [] and s.get_history() == []
    chain(s, *[f"m{i}" for i in range(10)])  # the same ids again: no stale overlay applies
    assert ids(s.get_history()) == [f"m{i}" for i in range(10)]


def test_compactions_are_per_session(make_session):
    summarizer = Summarizer()
    a = make_session("a")
    b = make_session("b", store=store_of(a))
    chain(a, *[f"m{i}" for i in range(10)])
    chain(b, *[f"m{i}" for i in range(10)])
    a.on_compaction(fn_for(summarizer))
    a.compact()
    assert b.get_compactions() == []
    assert ids(b.get_history()) == [f"m{i}" for i in range(10)]


# -- tool pairs and budgets ------------------------------------------------------------------


def test_300_messages_with_interleaved_tool_calls_compact_within_the_budget(make_session):
    summarizer = Summarizer()
    s = make_session()
    script = scripted_conversation(300, seed=7)
    for message in script:
        s.append_message(message)
    before = s.get_history()
    assert len(before) == 300 and tool_pairs_intact(before)
    full = estimate_message_tokens(before)
    budget = 4_000
    assert full > 3 * budget
    s.on_compaction(create_compact_function(summarize=summarizer, keep_recent_tokens=budget // 2))

    result = s.compact()
    assert result is not None
    after = s.get_history()
    assert len(after) < len(before)
    assert estimate_message_tokens(after) <= budget
    assert s.get_token_estimate() == estimate_message_tokens(after)
    assert tool_pairs_intact(after), "a tool call lost its result or a result its call"
    start, end = ids(before).index(result.from_message_id), ids(before).index(result.to_message_id)
    assert tool_pairs_intact(before[start : end + 1])
    assert ids(after) == ids(before[:start]) + [summary_id(s.get_compactions()[0])] + ids(before[end + 1 :])
    # every original message is still there, unchanged, and searchable
    for original in before:
        assert s.get_message(original.id) == original
    covered = before[(start + end) // 2]
    assert covered.id in ids(s.search(covered.text.split()[0], limit=300))
    assert s.get_path_length() == 300


class Hang:
    """Summarisers that hang far past the 0.2 s timeout: a plain one (released at the end of
    the test; a thread cannot be stopped) and an ``async def`` one (must be cancelled)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.cancelled = 0

    def plain(self, prompt: str) -> str:
        self.release.wait(10)
        return "too late"

    async def coroutine(self, prompt: str) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return "too late"

    def settle(self, s: Any, cancelled: int) -> None:
        """Release the plain hang; wait for the async ones to be cancelled and for every
        timeout thread to end (driver calls let the async-mode event loop run)."""
        self.release.set()
        alive: list[threading.Thread] = []
        for _ in range(200):
            alive = [t for t in threading.enumerate() if t.name == "sessions-core-timeout"]
            if self.cancelled >= cancelled and not alive:
                break
            s.get_message("m0")
            time.sleep(0.01)
        assert self.cancelled == cancelled, "a timed-out async summariser was left running"
        assert not alive, "a timeout thread is still running"


def test_summariser_that_raises_hangs_or_returns_nothing_leaves_history_as_it_was(make_session):
    hang = Hang()

    def raises(prompt):
        raise RuntimeError("model unavailable")

    async def aempty(prompt):
        return "  \n"

    s = make_session()
    chain(s, *[f"m{i}" for i in range(12)])
    s.on_compaction(fn_for(lambda prompt: "good summary"))
    s.compact()
    chain(s, "m12")
    compactions = s.get_compactions()
    for bad, cause in [
        (raises, RuntimeError),
        (hang.plain, TimeoutError),
        (hang.coroutine, TimeoutError),
        (lambda prompt: "", None),
        (aempty, None),
    ]:
        before = s.get_history()
        s.on_compaction(fn_for(bad), timeout=0.2)
        started = time.monotonic()
        with pytest.raises(CompactionError) as error:
            s.compact()
        assert time.monotonic() - started < 2
        if cause is not None:
            assert isinstance(error.value.__cause__, cause)
        assert s.get_history() == before
        assert s.get_compactions() == compactions
    hang.settle(s, cancelled=1)
    assert s.get_compactions() == compactions


@pytest.mark.parametrize("failure", ["raises", "hangs", "hangs-async", "empty"])
def test_auto_compaction_failure_keeps_the_append_and_reports(make_session, failure):
    hang = Hang()

    def raises(prompt):
        raise RuntimeError("model unavailable")

    summarize = {"raises": raises, "hangs": hang.plain, "hangs-async": hang.coroutine, "empty": lambda p: ""}

    s = make_session()
    chain(s, *[f"m{i}" for i in range(10)])
    s.on_compaction(fn_for(lambda prompt: "first summary"))
    s.compact()
    before = s.get_history()
    compactions = s.get_compactions()

    errors: list[BaseException] = []
    s.on_compaction(fn_for(summarize[failure]), timeout=0.2)
    s.compact_after(1)
    s.on_compaction_error(errors.append)
    started = time.monotonic()
    result = s.append_message(msg("trigger"))
    assert time.monotonic() - started < 2
    assert result.inserted is True
    assert s.get_message("trigger").text == "message trigger"
    assert s.get_latest_leaf().id == "trigger"
    assert s.get_history() == before + [s.get_message("trigger")]
    assert s.get_compactions() == compactions
    assert len(errors) == 1 and isinstance(errors[0], CompactionError)
    if failure.startswith("hangs"):
        assert isinstance(errors[0].__cause__, TimeoutError)
    hang.settle(s, cancelled=int(failure == "hangs-async"))
    assert s.get_compactions() == compactions


def test_auto_compaction_error_handler_may_be_async_or_fail(make_session, caplog):
    s = make_session()
    chain(s, *[f"m{i}" for i in range(10)])
    seen: list[BaseException] = []

    async def handler(error):
        seen.append(error)
        raise ValueError("handler broke")

    def summarize(prompt):
        raise RuntimeError("boom")

    s.on_compaction(fn_for(summarize)).compact_after(1).on_compaction_error(handler)
    assert s.append_message(msg("m10")).inserted is True
    assert len(seen) == 1 and "boom" in str(seen[0])
    assert "handler broke" in caplog.text
    assert s.get_latest_leaf().id == "m10"


def test_auto_compaction_runs_between_turns_with_a_custom_counter(make_session):
    s = make_session()
    summarize = Summarizer()
    s.on_compaction(create_compact_function(summarize=summarize, keep_recent_tokens=300))
    s.compact_after(1000, token_counter=lambda messages: 100 * len(messages))
    chain(s, *[f"m{i:02d}" for i in range(10)])
    assert s.get_token_estimate() == 1000 and summarize.prompts == []
    s.append_message(msg("m10"))  # 1100 > 1000
    assert len(summarize.prompts) == 1
    [row] = s.get_compactions()
    assert (row.from_message_id, row.to_message_id) == ("m03", "m07")
    assert ids(s.get_history()) == ["m00", "m01", "m02", summary_id(row), "m08", "m09", "m10"]
    assert s.get_token_estimate() == 700
    assert s.append_message(msg("m10")).inserted is False  # a duplicate does not trigger
    assert len(summarize.prompts) == 1


def test_auto_compaction_compacts_the_branch_that_was_appended_to(make_session):
    s = make_session()
    summarize = Summarizer()
    s.on_compaction(fn_for(summarize, min_tail_messages=2))
    s.compact_after(1000, token_counter=lambda messages: 100 * len(messages))
    chain(s, *[f"a{i}" for i in range(10)])
    chain(s, "b0", "b1", parent=None)  # a newer, short branch: the latest leaf
    old = datetime.now(timezone.utc) - timedelta(hours=1)
    s.append_message(msg("a10", createdAt=old.isoformat()), parent_id="a9")  # A: 1100 > 1000
    assert s.get_latest_leaf().id == "b1"
    assert len(summarize.prompts) == 1
    [row] = s.get_compactions()
    assert row.to_message_id.startswith("a")
    assert s.get_token_estimate("a10") <= 1000
    assert ids(s.get_history("b1")) == ["b0", "b1"]


def test_appending_a_compaction_id_never_stores_it(make_session):
    summarizer = Summarizer()
    s = make_session()
    chain(s, *[f"m{i}" for i in range(10)])
    s.on_compaction(fn_for(summarizer))
    s.compact_after(10**6)
    s.compact()
    transcript = s.get_history()
    [row] = s.get_compactions()
    assert transcript[3].id == summary_id(row)

    # a client echoes the whole transcript back, then adds a turn (#1984)
    for message in transcript:
        echoed = message.model_dump(by_alias=True, mode="json")
        assert s.append_message(echoed).inserted is False
    assert s.append_message(msg("compaction_made_up", "x", role="assistant"), parent_id="m9").inserted is False
    assert s.append_message(msg("compaction_root", "x", role="assistant"), parent_id=None).inserted is False
    s.append_message(msg("m10"))
    assert ids(s.get_history()) == ids(transcript) + ["m10"]
    assert s.get_path_length() == 11
    for message_id in (summary_id(row), "compaction_made_up", "compaction_root"):
        assert s.get_message(message_id) is None
    assert s.search(row.summary.split()[0]) == []
    assert s.get_branches("m9") == [s.get_message("m10")]
    assert len(s.get_history()) == len(transcript) + 1


# -- 7.6 auto-compaction over a long scripted conversation -----------------------------------


@pytest.mark.slow
def test_auto_compaction_keeps_2000_messages_under_the_threshold(make_session, backend, mode):
    """The visible history is re-read after every compaction (the summariser was called) and
    every 50 messages, and checked against a model kept in between (the previous read plus the
    messages appended since), so every step is checked without reading a 2,000-deep path 2,000
    times."""
    if mode == "async":
        pytest.skip("heavy: run in sync mode only; the async twins run the same Session code")
    threshold = 4_000
    summarize = Summarizer()
    s = make_session()
    s.on_compaction(create_compact_function(summarize=summarize, keep_recent_tokens=1_500))
    s.compact_after(threshold)
    errors: list[BaseException] = []
    s.on_compaction_error(errors.append)

    script = scripted_conversation(2_000, seed=11)
    max_estimate = 0
    pending: set[str] = set()
    visible: list[SessionMessage] = []
    reads = 0
    counted: dict[str, int] = {}  # message id -> tokens (ids, summaries included, are never reused)
    started = time.perf_counter()
    for i, message in enumerate(script):
        calls_before = len(summarize.prompts)
        assert s.append_message(message).inserted
        parsed = SessionMessage.model_validate(message)
        compacted = len(summarize.prompts) > calls_before
        if compacted or i % 50 == 49:
            history = s.get_history()
            reads += 1
            if compacted:
                assert s.get_token_estimate() == estimate_message_tokens(history)
            else:
                assert ids(history) == ids(visible) + [parsed.id]
            visible = history
        else:
            visible.append(parsed)
        for m in visible:
            if m.id not in counted:
                counted[m.id] = estimate_message_tokens([m])
        estimate = sum(counted[m.id] for m in visible)
        max_estimate = max(max_estimate, estimate)
        assert estimate <= threshold, f"over the threshold after {parsed.id}"
        # mid-turn, only the calls whose results are still to come may lack them
        raw_calls, raw_results = tool_ids([parsed])
        pending = (pending | raw_calls) - raw_results
        calls, results = tool_ids(visible)
        assert results <= calls and calls - results == pending, f"tool pair split after {parsed.id}"
    elapsed = time.perf_counter() - started

    rows = s.get_compactions()
    assert errors == []
    assert len(summarize.prompts) == len(rows) > 10
    assert len({c.from_message_id for c in rows}) == 1  # one chain
    for previous, prompt in zip(summarize.summaries, summarize.prompts[1:], strict=False):
        assert f"PREVIOUS SUMMARY:\n{previous}\n" in prompt
    history = s.get_history()
    assert [m.id.startswith(PREFIX) for m in history].count(True) == 1
    assert ids(history)[:3] == ["m0000", "m0001", "m0002"] and history[-1].id == "m1999"
    assert s.get_path_length() == 2_000
    for message in script[::97]:
        assert s.get_message(message["id"]) is not None
    print(
        f"\n[{backend.name}/{mode}] 2000 messages: {len(summarize.prompts)} summariser calls,"
        f" max estimate {max_estimate} <= threshold {threshold}, final estimate"
        f" {s.get_token_estimate()}, {reads} full reads, {elapsed:.2f} s"
    )


skip_where_unsupported(globals())
