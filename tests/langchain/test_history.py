"""SessionChatMessageHistory: a BaseChatMessageHistory with native async, for
RunnableWithMessageHistory."""

from __future__ import annotations

import asyncio
import sqlite3
import warnings

import pytest
from langchain.agents import create_agent
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_sessions import SessionChatMessageHistory
from sessions_core import InvalidInputError, Session, SessionManager, StoreError

from .helpers import ScriptedChatModel


@pytest.fixture(autouse=True)
def _quiet_deprecations():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*RunnableWithMessageHistory is deprecated.*")
        yield


def chain_with_history(model, manager, **history_options):
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are helpful."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    return RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: SessionChatMessageHistory.from_manager(manager, session_id, **history_options),
        input_messages_key="question",
        history_messages_key="history",
    )


def test_is_a_chat_message_history_without_deprecation_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history = SessionChatMessageHistory(Session(":memory:").for_session("s"))
    assert isinstance(history, BaseChatMessageHistory)
    with pytest.raises(InvalidInputError, match="pass session_id="):  # a path alone: which session?
        SessionChatMessageHistory("s")  # type: ignore[arg-type]


def test_runnable_with_message_history_sync():
    manager = SessionManager(":memory:")
    model = ScriptedChatModel(responses=[AIMessage("Hello Alice."), AIMessage("Your name is Alice.")])
    chain = chain_with_history(model, manager)
    config = {"configurable": {"session_id": "alice"}}
    assert chain.invoke({"question": "Hi, I'm Alice."}, config).content == "Hello Alice."
    assert chain.invoke({"question": "What's my name?"}, config).content == "Your name is Alice."
    assert [m.text for m in model.calls[1]] == ["You are helpful.", "Hi, I'm Alice.", "Hello Alice.", "What's my name?"]
    stored = manager.get_history("alice")
    assert [(m.role, m.text) for m in stored] == [
        ("user", "Hi, I'm Alice."),
        ("assistant", "Hello Alice."),
        ("user", "What's my name?"),
        ("assistant", "Your name is Alice."),
    ]
    assert {hit.session_id for hit in manager.search("alice")} == {"alice"}  # registered, so searchable
    assert SessionChatMessageHistory(manager.get_session("alice")).messages[-1] == AIMessage(
        "Your name is Alice.", id=stored[-1].id
    )


def test_runnable_with_message_history_async():
    manager = SessionManager(":memory:")
    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2")])
    chain = chain_with_history(model, manager)
    config = {"configurable": {"session_id": "s2"}}

    async def run():
        await chain.ainvoke({"question": "q1"}, config)
        await chain.ainvoke({"question": "q2"}, config)

    asyncio.run(run())
    assert [m.text for m in manager.get_history("s2")] == ["q1", "a1", "q2", "a2"]
    assert [m.text for m in model.calls[1]] == ["You are helpful.", "q1", "a1", "q2"]


def test_ids_are_given_and_stored_ids_skipped():
    history = SessionChatMessageHistory(Session(":memory:").for_session("s"))
    question = HumanMessage("q")
    answer = AIMessage("a", id="ai-1")
    history.add_messages([question, answer])
    assert question.id is None  # the stored copy has an id, the caller's message is left alone
    stored = history.messages
    assert stored[0].id and stored[0] == question.model_copy(update={"id": stored[0].id})
    history.add_messages([*stored, answer, AIMessage("a again", id="ai-1")])  # stored ids are skipped
    history.add_message(HumanMessage("q2"))
    assert [m.text for m in history.messages] == ["q", "a", "q2"]
    assert history.messages[:2] == stored == [question.model_copy(update={"id": stored[0].id}), answer]

    asyncio.run(history.aadd_messages([stored[0], ToolMessage("r", tool_call_id="c", id="t")]))
    assert [m.type for m in asyncio.run(history.aget_messages())] == ["human", "ai", "human", "tool"]
    asyncio.run(history.aclear())
    assert history.messages == []
    assert history.session.search("q2")  # cleared without deleting: still searchable
    history.add_user_message("again")
    assert [m.text for m in history.messages] == ["again"]
    history.clear()
    assert history.messages == []
    history.add_user_message("fresh")
    history.hard_clear()
    assert history.messages == [] and history.session.search("q2") == []
    asyncio.run(history.ahard_clear())


def test_an_add_is_stored_whole_or_not_at_all(tmp_path):
    """``add_messages`` is one transaction: an exchange the database refuses halfway leaves
    nothing, and the same add succeeds once the database takes it."""
    path = tmp_path / "history.db"
    history = SessionChatMessageHistory(Session(str(path)).for_session("s"))
    history.add_messages([HumanMessage("q1"), AIMessage("a1")])
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON session_messages WHEN new.id = 'ai-2'"
            " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )
    exchange = [HumanMessage("q2", id="human-2"), AIMessage("a2", id="ai-2")]
    with pytest.raises(StoreError, match="refused by the test"):
        history.add_messages(exchange)
    assert [m.text for m in history.messages] == ["q1", "a1"]
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER refuse")
    history.add_messages(exchange)
    assert [m.text for m in history.messages] == ["q1", "a1", "q2", "a2"]


def test_a_history_whose_session_was_deleted_registers_it_again_at_next_use():
    manager = SessionManager()
    history = SessionChatMessageHistory.from_manager(manager, "u1")
    other = SessionChatMessageHistory.from_manager(manager, "u2")
    history.add_messages([HumanMessage("first")])
    other.add_messages([HumanMessage("elsewhere")])
    assert manager.delete("u1")
    history.add_messages([HumanMessage("second")])
    assert {info.id for info in manager.list_sessions()} == {"u1", "u2"}
    assert [m.text for m in history.messages] == ["second"]


def test_messages_added_again_after_clear_leave_the_new_ones_on_the_new_branch():
    """After ``clear()`` the stored messages sent again (a caller re-sending its whole list) are
    skipped, and what is new goes on the new branch, not after the old messages."""
    history = SessionChatMessageHistory(Session(":memory:").for_session("s"))
    history.add_messages([HumanMessage("q1", id="h1"), AIMessage("a1", id="a1")])
    old = history.messages
    history.clear()
    history.add_messages([*old, HumanMessage("q2", id="h2"), AIMessage("a2", id="a2")])
    assert [m.text for m in history.messages] == ["q2", "a2"]
    assert [m.text for m in history.session.get_history("a1")] == ["q1", "a1"]


def test_one_message_object_sent_every_turn_is_stored_every_turn():
    """A constant ``HumanMessage("continue")`` reused each turn is a new turn each time, as in
    ``InMemoryChatMessageHistory``: the id we give the stored copy is not written on the caller's
    message, so it cannot make a later add look like a duplicate. An id the caller set still dedupes."""
    proceed = HumanMessage("continue")
    history = SessionChatMessageHistory(Session(":memory:").for_session("s"))
    history.add_messages([proceed, AIMessage("a1")])
    history.add_messages([proceed, AIMessage("a2")])
    assert proceed.id is None
    assert [(m.type, m.text) for m in history.messages] == [
        ("human", "continue"),
        ("ai", "a1"),
        ("human", "continue"),
        ("ai", "a2"),
    ]
    assert len({m.id for m in history.messages}) == 4
    history.add_messages([proceed, proceed])  # the same object twice in one add: one message
    assert [m.text for m in history.messages][-2:] == ["a2", "continue"]
    named = HumanMessage("named", id="mine")
    history.add_messages([named])
    history.add_messages([named])  # an id the caller set dedupes
    assert [m.text for m in history.messages][-2:] == ["continue", "named"]

    manager = SessionManager(":memory:")
    model = ScriptedChatModel(responses=[AIMessage("r1"), AIMessage("r2")])
    chain = RunnableWithMessageHistory(
        (lambda inputs: inputs["question"]) | model,
        lambda session_id: SessionChatMessageHistory(manager.get_session(session_id)),
        input_messages_key="question",
    )
    for _ in range(2):
        chain.invoke({"question": proceed}, {"configurable": {"session_id": "s"}})
    assert [(m.role, m.text) for m in manager.get_history("s")] == [
        ("user", "continue"),
        ("assistant", "r1"),
        ("user", "continue"),
        ("assistant", "r2"),
    ]


def test_wrapping_an_agent_stores_nothing_twice():
    """The known RunnableWithMessageHistory + agent trap: the agent returns the whole state."""
    manager = SessionManager(":memory:")
    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2")])
    chain = RunnableWithMessageHistory(
        create_agent(model),
        lambda session_id: SessionChatMessageHistory(manager.get_session(session_id)),
        input_messages_key="messages",
        output_messages_key="messages",
    )
    for question in ["q1", "q2"]:
        chain.invoke({"messages": [HumanMessage(question)]}, {"configurable": {"session_id": "s"}})
    assert [m.text for m in manager.get_history("s")] == ["q1", "a1", "q2", "a2"]


def test_compaction_with_a_summariser_passed_in():
    model = ScriptedChatModel(responses=[], summary="SUMMARY: tea and milk.")
    session = Session(":memory:").for_session("s")
    history = SessionChatMessageHistory(
        session, summarizer=model, compact_after=300, keep_recent_tokens=60, protect_head=1
    )
    for i in range(6):
        history.add_messages([HumanMessage(f"q{i} " + "tea " * 30), AIMessage(f"a{i} " + "milk " * 30)])
    assert model.summary_prompts
    messages = history.messages
    assert messages[0].text.startswith("q0")
    assert messages[1].text == "SUMMARY: tea and milk." and messages[1].id.startswith("compaction_")
    assert messages[-1].text.startswith("a5")
    assert session.get_path_length() == 12
    # The summary read back is never stored as a message.
    history.add_messages(messages)
    assert session.get_path_length() == 12


def test_async_compaction_and_failure_keeps_history():
    model = ScriptedChatModel(responses=[], fail_summary=True)
    session = Session(":memory:").for_session("s")
    history = SessionChatMessageHistory(
        session, summarizer=model, compact_after=200, keep_recent_tokens=50, protect_head=1
    )

    async def run():
        for i in range(4):
            await history.aadd_messages([HumanMessage(f"q{i} " + "tea " * 30), AIMessage(f"a{i} " + "milk " * 30)])

    asyncio.run(run())
    assert model.summary_prompts
    assert session.get_compactions() == []
    assert len(history.messages) == 8

    with pytest.raises(ValueError):
        SessionChatMessageHistory(session, compact_after=10)


def test_a_plain_function_summariser():
    session = Session(":memory:").for_session("s")
    history = SessionChatMessageHistory(
        session, summarizer=lambda prompt: "short", compact_after=100, keep_recent_tokens=20, protect_head=1
    )
    history.add_messages([SystemMessage("be nice")] + [HumanMessage("word " * 40, id=f"h{i}") for i in range(4)])
    assert any(m.text == "short" for m in history.messages)
