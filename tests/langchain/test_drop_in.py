"""Issue 18, LangChain half: the middleware, history and tools as a drop-in for what they replace."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

from langchain_sessions import SessionChatMessageHistory, SessionMemoryMiddleware, SessionToolkit, to_langchain_messages
from sessions_core import Session, SessionManager, StaticContext

from .helpers import ScriptedChatModel, call, texts

CONFIG = {"configurable": {"thread_id": "thread-1"}}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def invalid_call(call_id: str) -> dict:
    return {"type": "invalid_tool_call", "name": "add", "args": '{"a": 1, "b": ', "id": call_id, "error": None}


def assert_every_tool_call_answered(messages: list[BaseMessage]) -> None:
    """Each AI message's tool calls (valid or invalid) are answered by the tool messages that
    follow it, before the next non-tool message."""
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        wanted = {c["id"] for c in message.tool_calls} | {c["id"] for c in message.invalid_tool_calls}
        answered = set()
        for later in messages[index + 1 :]:
            if not isinstance(later, ToolMessage):
                break
            answered.add(later.tool_call_id)
        assert wanted <= answered, (message, wanted - answered)


# -- defect 1: a repaired invalid tool call is stored on the active path ----------------------


@pytest.mark.parametrize("checkpointer", [None, "memory"])
def test_an_invalid_tool_call_is_answered_on_the_stored_path(session, checkpointer):
    mixed = AIMessage(
        "", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "ok"}], invalid_tool_calls=[invalid_call("bad")]
    )
    only_invalid = AIMessage("", invalid_tool_calls=[invalid_call("bad-2")])
    model = ScriptedChatModel(responses=[mixed, AIMessage("3"), only_invalid, AIMessage("Done.")])
    agent = create_agent(
        model,
        tools=[add],
        middleware=[SessionMemoryMiddleware(session)],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    agent.invoke({"messages": [HumanMessage("Add 1 and 2.")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage("Add again.")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage("Never mind.")]}, CONFIG)

    stored = to_langchain_messages(session.get_history())
    assert [m.type for m in stored] == ["human", "ai", "tool", "tool", "ai", "human", "ai", "tool", "human", "ai"]
    assert_every_tool_call_answered(stored)
    assert stored[2].status == "error" and "could not be executed" in stored[2].text
    # The model's last input answers every call too (stored history, or state, or both).
    assert_every_tool_call_answered(model.calls[-1])


# -- defect 6: the middleware adds no graph step ------------------------------------------------


def fewest_steps(middleware_factory) -> int:
    """The smallest ``recursion_limit`` a one-tool loop runs in."""
    for limit in range(1, 30):
        model = ScriptedChatModel(responses=[call("add", {"a": 1, "b": 2}, "c1"), AIMessage("3")])
        agent = create_agent(model, tools=[add], middleware=middleware_factory())
        try:
            agent.invoke({"messages": [HumanMessage("Add 1 and 2.")]}, {**CONFIG, "recursion_limit": limit})
        except GraphRecursionError:
            continue
        return limit
    raise AssertionError("never fit")


def test_an_agent_that_fits_a_recursion_limit_fits_it_with_the_middleware(session):
    assert fewest_steps(lambda: [SessionMemoryMiddleware(session)]) == fewest_steps(list)
    assert [m.type for m in to_langchain_messages(session.get_history())][-4:] == ["human", "ai", "tool", "ai"]


@tool(return_direct=True)
def shout(text: str) -> str:
    """Say it loud; the run ends with the result."""
    return text.upper()


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_tool_result_that_ends_the_run_is_stored(session, mode):
    model = ScriptedChatModel(responses=[call("shout", {"text": "hi"}, "c1"), call("add", {"a": 1, "b": 2}, "c2")])
    agent = create_agent(model, tools=[shout, add], middleware=[SessionMemoryMiddleware(session)])
    inputs = {"messages": [HumanMessage("Shout hi.")]}
    result = agent.invoke(inputs, CONFIG) if mode == "invoke" else asyncio.run(agent.ainvoke(inputs, CONFIG))
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool"]
    assert texts(to_langchain_messages(session.get_history())) == ["human:Shout hi.", "ai:", "tool:HI"]


def test_parallel_tool_results_are_stored_in_call_order(session):
    both = AIMessage(
        "",
        tool_calls=[
            {"name": "add", "args": {"a": 1, "b": 2}, "id": "first"},
            {"name": "add", "args": {"a": 3, "b": 4}, "id": "second"},
        ],
    )
    model = ScriptedChatModel(responses=[both, AIMessage("3 and 7")])
    agent = create_agent(model, tools=[add], middleware=[SessionMemoryMiddleware(session)])
    asyncio.run(agent.ainvoke({"messages": [HumanMessage("Two sums.")]}, CONFIG))
    stored = to_langchain_messages(session.get_history())
    assert [getattr(m, "tool_call_id", m.type) for m in stored] == ["human", "ai", "first", "second", "ai"]


# -- defect 7: a model without bind_tools ------------------------------------------------------


def plain_model(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(text) for text in replies]))


def test_a_model_without_bind_tools_works_when_no_block_needs_a_tool():
    soul = StaticContext("Be kind.")
    with Session(":memory:").for_session("thread-1").with_context("soul", provider=soul) as session:
        middleware = SessionMemoryMiddleware(session)
        assert middleware.tools == []
        agent = create_agent(plain_model("Hello!", "Still here."), middleware=[middleware])
        agent.invoke({"messages": [HumanMessage("Hi")]}, CONFIG)
        agent.invoke({"messages": [HumanMessage("Again")]}, CONFIG)
        assert texts(to_langchain_messages(session.get_history())) == [
            "human:Hi",
            "ai:Hello!",
            "human:Again",
            "ai:Still here.",
        ]


def test_a_model_without_bind_tools_is_told_which_tools_and_how_to_turn_them_off(session):
    agent = create_agent(plain_model("Hello!"), middleware=[SessionMemoryMiddleware(session)])
    with pytest.raises(NotImplementedError) as caught:
        agent.invoke({"messages": [HumanMessage("Hi")]}, CONFIG)
    message = str(caught.value)
    assert "\n" not in message
    assert "GenericFakeChatModel" in message and "set_context" in message and "memory_tools=False" in message

    quiet = create_agent(plain_model("Hello!"), middleware=[SessionMemoryMiddleware(session, memory_tools=False)])
    assert quiet.invoke({"messages": [HumanMessage("Hi")]}, CONFIG)["messages"][-1].text == "Hello!"


# -- constructors: what users of the replaced classes type first -------------------------------


def test_the_middleware_takes_a_path(tmp_path):
    path = str(tmp_path / "chat.db")
    model = ScriptedChatModel(responses=[AIMessage("Hi!")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(path)])
    agent.invoke({"messages": [HumanMessage("Hello")]}, CONFIG)
    with SessionManager(path) as manager:
        assert [m.role for m in manager.get_history("thread-1")] == ["user", "assistant"]
        assert [info.id for info in manager.list_sessions()] == ["thread-1"]


@pytest.mark.parametrize(
    "spelling",
    [
        lambda path: {"connection": path},
        lambda path: {"connection": f"sqlite:///{path}"},
        lambda path: {"connection_string": f"sqlite:///{path}"},
        lambda path: {"connection": f"sqlite+aiosqlite:///{path}", "async_mode": True},
        lambda path: {"connection": Path(path)},
    ],
)
def test_the_history_takes_sql_chat_message_history_spellings(tmp_path, spelling):
    path = str(tmp_path / "chat.db")
    history = SessionChatMessageHistory(session_id="u1", **spelling(path))
    history.add_messages([HumanMessage("Hi"), AIMessage("Hello")])
    history.close()
    again = SessionChatMessageHistory(path, session_id="u1")
    assert [m.text for m in again.messages] == ["Hi", "Hello"]
    again.close()


def test_table_name_keeps_histories_apart(tmp_path):
    path = str(tmp_path / "chat.db")
    first = SessionChatMessageHistory(session_id="u1", connection=path)
    other = SessionChatMessageHistory(session_id="u1", connection=path, table_name="support")
    first.add_messages([HumanMessage("Hi")])
    assert other.messages == []
    first.close()
    other.close()


def test_the_history_takes_a_manager_and_a_session_id():
    with SessionManager(":memory:") as manager:
        history = SessionChatMessageHistory(manager, session_id="u1")
        assert manager.list_sessions() == []  # registered on first use
        history.add_messages([HumanMessage("Hi")])
        assert [info.id for info in manager.list_sessions()] == ["u1"]


@pytest.mark.parametrize(
    ("arguments", "advice"),
    [
        ({"connection": "chat.db"}, "session_id="),
        ({"session_id": "u1"}, 'connection="chat.db"'),
        ({"session_id": "u1", "connection": "mysql://db"}, "postgresql://"),
        ({"session_id": "u1", "connection": 42}, "path or a database URL"),
        ({"session_id": "u1", "connection": "a.db", "connection_string": "b.db"}, "not both"),
        ({"session_id": "u1", "connection": "a.db", "custom_message_converter": object()}, "drop it"),
        ({"session_id": "u1", "connection": "a.db", "engine_args": {}}, "URL alone"),
        ({"session_id": "u1", "table_name": "t"}, "connection="),
        ({"session_id": "u1", "connection": "a.db", "compact_after": 10}, "summarizer="),
    ],
)
def test_every_history_refusal_says_what_to_pass(tmp_path, monkeypatch, arguments, advice):
    monkeypatch.chdir(tmp_path)
    with pytest.raises((TypeError, ValueError)) as caught:
        SessionChatMessageHistory(**arguments)
    assert advice in str(caught.value)


def test_a_session_id_that_contradicts_the_session_is_refused(session):
    with pytest.raises(ValueError, match="SessionManager with session_id"):
        SessionChatMessageHistory(session, session_id="someone-else")


@pytest.mark.parametrize("make", [SessionMemoryMiddleware, SessionToolkit])
def test_the_middleware_and_toolkit_refusal_names_a_path(make):
    with pytest.raises(TypeError, match='path or URL \\(such as "chat.db"'):
        make(42)
