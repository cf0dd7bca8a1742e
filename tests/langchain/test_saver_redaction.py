"""``SessionSaver`` over a redacting manager: the state its checkpoints and pending writes keep
passes through the redactor, so a value the session masks is in no byte of the SQLite file; a
resumed thread sees the masks, the session keeps each message once, ``redactor=False`` keeps the
state verbatim, and a redactor that raises stores no checkpoint."""

from __future__ import annotations

import secrets
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.base import PutOp
from langgraph.types import Command, Interrupt, Send

from langchain_sessions import SessionMemoryMiddleware, SessionSaver, SessionStore
from langchain_sessions import checkpoint as checkpoint_module
from langchain_sessions.checkpoint import MaskedInterruptWarning, redact_state
from sessions_core import InvalidInputError, PIIRedactor, RedactionError, SessionManager

from .helpers import ScriptedChatModel, call


class Ambiguous:
    """An object of state whose truth is an error, as a NumPy array's or a DataFrame's."""

    def __bool__(self) -> bool:
        raise ValueError("the truth value is ambiguous")


def _email() -> str:
    return f"m{secrets.token_hex(6)}@example.com"


@tool
def send_mail(to: str, body: str) -> str:
    """Send an e-mail."""
    return f"sent to {to}"


def _agent(manager: SessionManager, model: ScriptedChatModel, **saver: Any) -> Any:
    return create_agent(
        model,
        tools=[send_mail],
        checkpointer=SessionSaver.from_manager(manager, **saver),
        middleware=[SessionMemoryMiddleware(manager)],
    )


def test_redact_state_masks_free_text_and_keeps_identifiers_and_other_objects() -> None:
    email = _email()
    marker = Ambiguous()
    state = {
        "messages": [
            HumanMessage(
                [{"type": "text", "text": f"write to {email}"}, {"type": "image", "url": f"https://x/{email}"}]
            ),
            AIMessage(
                "", id="ai-1", tool_calls=[{"name": "send_mail", "args": {"to": email, "data": email}, "id": "c1"}]
            ),
            ToolMessage(f"sent to {email}", tool_call_id="c1", artifact={"to": email}),
        ],
        "note": (f"call {email}", 3),
        "other": marker,
        "task": Send("tools", [{"name": "send_mail", "args": {"to": email}, "id": "c1", "type": "tool_call"}]),
        "paused": Interrupt({"action_requests": [{"name": "send_mail", "args": {"to": email}}], "data": email}, "i1"),
    }
    redacted = redact_state(PIIRedactor(), state)
    human, ai, result = redacted["messages"]
    assert human.content == [
        {"type": "text", "text": "write to [EMAIL]"},
        {"type": "image", "url": f"https://x/{email}"},  # a URL is kept, as a stored part's is
    ]
    assert ai.id == "ai-1" and ai.tool_calls[0]["id"] == "c1" and ai.tool_calls[0]["name"] == "send_mail"
    assert ai.tool_calls[0]["args"] == {"to": "[EMAIL]", "data": "[EMAIL]"}  # arguments are free text
    assert (result.content, result.artifact, result.tool_call_id) == ("sent to [EMAIL]", {"to": "[EMAIL]"}, "c1")
    assert redacted["note"] == ("call [EMAIL]", 3) and redacted["other"] is marker
    task, paused = redacted["task"], redacted["paused"]
    assert task.node == "tools" and task.arg == [
        {"name": "send_mail", "args": {"to": "[EMAIL]"}, "id": "c1", "type": "tool_call"}
    ]
    assert paused.id == "i1" and paused.value == {  # an interrupt's value is the graph's: every string
        "action_requests": [{"name": "send_mail", "args": {"to": "[EMAIL]"}}],
        "data": "[EMAIL]",
    }
    assert state["messages"][0].content[0]["text"] == f"write to {email}"  # the graph's own state is untouched

    clean = {"messages": [HumanMessage("nothing to mask")], "n": 1}
    assert redact_state(PIIRedactor(), clean) is clean


def test_a_saver_remembers_what_texts_mask_to_for_a_pii_redactor_only(monkeypatch: pytest.MonkeyPatch) -> None:
    email = _email()
    state = {"messages": [HumanMessage(f"write to {email}"), AIMessage("on it"), HumanMessage("thanks")]}
    first, second = PIIRedactor(), PIIRedactor(hash_salt="s")
    manager = SessionManager(":memory:").with_redaction(first)
    saver = SessionSaver.from_manager(manager)
    expected = redact_state(first, state)
    for _ in range(2):  # remembered, then read from what was remembered: the same state
        assert [m.text for m in saver._redact_state(first, state)["messages"]] == [m.text for m in expected["messages"]]
    manager.with_redaction(second)  # another redactor: nothing remembered applies
    assert saver._redact_state(saver.redactor, state)["messages"][0].text.startswith("write to [EMAIL:")

    calls: list[str] = []

    def counting(text: str) -> str:  # a callable may be impure: asked every time
        calls.append(text)
        return text.replace(email, "<hidden>")

    plain = SessionSaver(":memory:", redactor=counting)
    for _ in range(2):
        assert plain._redact_state(counting, state)["messages"][0].text == "write to <hidden>"
    assert len(calls) == 6

    monkeypatch.setattr(checkpoint_module, "_MEMO_CHARS", 20)  # a memo that forgets past 20 characters
    memo = checkpoint_module._TextMemo().of(first)
    for text in ("a" * 8, "b" * 8, "c" * 8):
        memo.put(text, text)
    assert memo.get("a" * 8) is None and memo.get("c" * 8) == "c" * 8


@pytest.mark.parametrize("resume", ["same manager", "restart"])
def test_no_checkpoint_keeps_a_masked_value_and_a_resumed_thread_sees_the_masks(tmp_path: Path, resume: str) -> None:
    db = tmp_path / "memory.db"
    email = _email()
    manager = SessionManager(str(db)).with_redaction(PIIRedactor())
    model = ScriptedChatModel(
        responses=[call("send_mail", {"to": email, "body": f"hi {email}"}, "c1"), AIMessage(f"Sent to {email}.")]
    )
    result = _agent(manager, model).invoke(  # LangGraph copies the user_id into each checkpoint's metadata
        {"messages": [HumanMessage(f"Mail {email} please.")]}, {"configurable": {"thread_id": "t1", "user_id": email}}
    )
    assert result["messages"][-1].text == f"Sent to {email}."  # the run's own state is as the graph made it
    if resume == "restart":
        manager.close()
        manager = SessionManager(str(db)).with_redaction(PIIRedactor())

    model = ScriptedChatModel(responses=[AIMessage("Done.")])
    _agent(manager, model).invoke({"messages": [HumanMessage("Thanks.")]}, {"configurable": {"thread_id": "t1"}})
    seen = [m.text for m in model.calls[0]]
    assert seen[:2] == ["Mail [EMAIL] please.", ""] and "Sent to [EMAIL]." in seen
    assert not any(email in text for text in seen)
    stored = manager.get_history("t1")
    assert len(stored) == 6 and len({m.id for m in stored}) == 6  # each message once
    manager.close()

    for file in tmp_path.iterdir():
        assert email.split("@")[0].encode() not in file.read_bytes(), file.name


def test_a_redactor_the_middleware_sets_after_the_saver_and_the_store_are_built_applies(tmp_path: Path) -> None:
    email = _email()
    manager = SessionManager(str(tmp_path / "memory.db"))
    saver, store = SessionSaver.from_manager(manager), SessionStore.from_manager(manager)
    store.put(("memories",), "before", {"note": "written before any redactor"})  # the short path next
    model = ScriptedChatModel(responses=[AIMessage("Noted.")])
    agent = create_agent(  # keyword arguments run in order: the saver and store exist first
        model,
        checkpointer=saver,
        store=store,
        middleware=[SessionMemoryMiddleware(manager, redactor=PIIRedactor())],
    )
    agent.invoke({"messages": [HumanMessage(f"I am {email}.")]}, {"configurable": {"thread_id": "t1"}})
    store.put(("memories",), "contact", {"email": email})
    store.batch([PutOp(("memories",), "batched", {"email": email})])
    saved = saver.get_tuple({"configurable": {"thread_id": "t1"}})
    assert saved is not None and saved.checkpoint["channel_values"]["messages"][0].text == "I am [EMAIL]."
    assert [store.get(("memories",), key).value for key in ("contact", "batched")] == [  # type: ignore[union-attr]
        {"email": "[EMAIL]"},
        {"email": "[EMAIL]"},
    ]
    manager.close()
    for file in tmp_path.iterdir():
        assert email.split("@")[0].encode() not in file.read_bytes(), file.name


def test_redactor_false_keeps_the_state_verbatim(tmp_path: Path) -> None:
    email = _email()
    with SessionManager(str(tmp_path / "memory.db")).with_redaction(PIIRedactor()) as manager:
        model = ScriptedChatModel(responses=[AIMessage("Noted.")])
        _agent(manager, model, redactor=False).invoke(
            {"messages": [HumanMessage(f"I am {email}.")]}, {"configurable": {"thread_id": "t1"}}
        )
        saved = SessionSaver.from_manager(manager, redactor=False).get_tuple({"configurable": {"thread_id": "t1"}})
        assert saved is not None and saved.checkpoint["channel_values"]["messages"][0].text == f"I am {email}."
        assert manager.get_history("t1")[0].parts[0].text == "I am [EMAIL]."  # type: ignore[union-attr]


def test_a_redactor_that_raises_stores_no_checkpoint_and_no_write() -> None:
    def failing(text: str) -> str:
        raise RuntimeError("detector down")

    saver = SessionSaver(":memory:", redactor=failing)
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [HumanMessage("hello")]}
    with pytest.raises(RedactionError, match="detector down"):
        saver.put(config, checkpoint, {"source": "input", "step": -1, "parents": {}}, {})  # type: ignore[arg-type]
    assert saver.get_tuple(config) is None  # type: ignore[arg-type]

    stored = SessionSaver.from_manager(saver.manager, redactor=False).put(
        config,  # type: ignore[arg-type]
        empty_checkpoint(),
        {"source": "input", "step": -1, "parents": {}},
        {},
    )
    with pytest.raises(RedactionError):
        saver.put_writes(stored, [("messages", [AIMessage("hi")])], "task-1")
    latest = saver.get_tuple(stored)
    assert latest is not None and latest.pending_writes == []
    with pytest.raises(TypeError, match="redactor"):
        SessionSaver(":memory:", redactor=42)


def _metadata_of_two_users(saver: SessionSaver) -> tuple[str, str]:
    """Two users' threads, each checkpoint's metadata holding its user's address (from
    ``configurable``, as LangGraph copies it) and a note naming it; the two addresses."""
    emails = _email(), _email()
    for thread, email in zip(("t1", "t2"), emails):
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "user_id": email}}
        metadata = {"source": "input", "step": -1, "parents": {}, "run_id": "run-1", "note": f"for {email}"}
        saver.put(config, empty_checkpoint(), metadata, {})  # type: ignore[arg-type]
    return emails


def test_checkpoint_metadata_is_masked_but_for_langgraph_own_fields() -> None:
    saver = SessionSaver(SessionManager(":memory:").with_redaction(PIIRedactor()))
    email, _ = _metadata_of_two_users(saver)
    saved = saver.get_tuple({"configurable": {"thread_id": "t1"}})
    assert saved is not None
    assert saved.metadata == {  # type: ignore[comparison-overlap]
        "source": "input",
        "step": -1,
        "parents": {},
        "run_id": "run-1",
        "note": "for [EMAIL]",
        "user_id": "[EMAIL]",
    }
    assert email not in str(saver.checkpoints.list_checkpoints(thread_id="t1"))
    plain = SessionSaver(SessionManager(":memory:"))
    _metadata_of_two_users(plain)
    kept = plain.get_tuple({"configurable": {"thread_id": "t1"}})
    assert kept is not None and "@example.com" in kept.metadata["user_id"]  # type: ignore[typeddict-item]


@pytest.mark.asyncio
async def test_a_filter_on_a_masked_value_matches_its_own_with_a_salted_redactor_and_is_refused_without() -> None:
    salted = SessionSaver(SessionManager(":memory:").with_redaction(PIIRedactor(hash_salt="pepper")))
    first, second = _metadata_of_two_users(salted)
    for email, thread in ((first, "t1"), (second, "t2")):
        found = list(salted.list(None, filter={"user_id": email}))
        assert [t.config["configurable"]["thread_id"] for t in found] == [thread]
        found = [t async for t in salted.alist(None, filter={"user_id": email, "source": "input"})]
        assert [t.config["configurable"]["thread_id"] for t in found] == [thread]
    assert list(salted.list(None, filter={"user_id": _email()})) == []

    unsalted = SessionSaver(SessionManager(":memory:").with_redaction(PIIRedactor()))
    first, _ = _metadata_of_two_users(unsalted)
    with pytest.raises(InvalidInputError, match="'user_id'.*hash_salt"):
        list(unsalted.list(None, filter={"user_id": first}))
    with pytest.raises(InvalidInputError, match="'user_id'"):
        [t async for t in unsalted.alist(None, filter={"user_id": first})]
    assert len(list(unsalted.list(None, filter={"source": "input", "run_id": "run-1"}))) == 2  # nothing masked
    assert len(list(unsalted.list(None, filter={"user_id": "[EMAIL]"}))) == 2  # the mask itself, asked for


@pytest.mark.parametrize(("redactor", "sent_to"), [(None, "[EMAIL]"), (False, "the address")])
def test_a_tool_call_approved_after_an_interrupt_runs_with_the_state_the_checkpoint_kept(
    redactor: Any, sent_to: str
) -> None:
    # The documented trade-off: a resumed thread sees the masks, so a graph that needs the
    # masked value back (a call waiting for approval) takes redactor=False (and key=); a pause
    # on masked values says so with a MaskedInterruptWarning.
    email, sent = _email(), []

    @tool
    def mail(to: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return "sent"

    manager = SessionManager(":memory:").with_redaction(PIIRedactor())
    model = ScriptedChatModel(responses=[call("mail", {"to": email}, "c1"), AIMessage("Done.")])
    agent = create_agent(
        model,
        tools=[mail],
        checkpointer=SessionSaver.from_manager(manager, redactor=redactor),
        middleware=[SessionMemoryMiddleware(manager), HumanInTheLoopMiddleware(interrupt_on={"mail": True})],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paused = agent.invoke({"messages": [HumanMessage(f"Mail {email}.")]}, config)
    masked = [w for w in caught if issubclass(w.category, MaskedInterruptWarning)]
    assert len(masked) == (1 if redactor is None else 0)  # the pause on a masked value is told
    assert paused["__interrupt__"][0].value["action_requests"][0]["args"] == {"to": email}  # the reviewer sees it
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert sent == [email if sent_to == "the address" else sent_to]
    assert manager.get_history("t1")[0].text == "Mail [EMAIL]."  # the session masks it either way
    manager.close()
