"""An adapter's turn goes through the core's turn service: it resolves its session once and
crosses the adapter/core boundary a handful of times, however long the history is."""

from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from langchain_sessions import SessionMemoryMiddleware
from sessions_core import Session, SessionManager
from sessions_core.turns import TurnService

from .crossings import crossings
from .langchain.helpers import ScriptedChatModel

MAX_CROSSINGS = 6


def _agent(target, replies):
    model = ScriptedChatModel(responses=[AIMessage(text) for text in replies])
    return create_agent(model, middleware=[SessionMemoryMiddleware(target)])


def _resolutions(monkeypatch) -> list[str]:
    resolved: list[str] = []
    original = TurnService._resolve

    def counting(self, session_id):
        resolved.append(session_id)
        return original(self, session_id)

    monkeypatch.setattr(TurnService, "_resolve", counting)
    return resolved


@pytest.mark.parametrize("history", [0, 200])
@pytest.mark.parametrize("kind", ["session", "manager"])
def test_a_langchain_turn_resolves_its_session_once_and_crosses_at_most_six_times(monkeypatch, kind, history):
    resolved = _resolutions(monkeypatch)
    if kind == "session":
        target = Session(":memory:").for_session("t").with_context("memory", description="Facts", max_tokens=200)
    else:
        target = SessionManager(":memory:").with_context("memory", description="Facts", max_tokens=200)
    session = target if isinstance(target, Session) else target.get_session("t")
    for i in range(history):
        session.append_message(
            {
                "id": f"old{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "parts": [{"type": "text", "text": f"earlier {i}"}],
            }
        )
    agent = _agent(target, ["first", "second"])
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello")]}, config)
    assert resolved == ["t"]
    with crossings("langchain_sessions") as counted:
        agent.invoke({"messages": [HumanMessage("and again")]}, config)
    assert sum(counted.values()) <= MAX_CROSSINGS, counted
    assert resolved == ["t"]  # not resolved again
    assert [m.parts[0].text for m in session.get_history()][-4:] == ["hello", "first", "and again", "second"]


def test_an_async_langchain_turn_crosses_at_most_six_times():
    session = Session(":memory:").for_session("t").with_context("memory", description="Facts", max_tokens=200)
    agent = _agent(session, ["first", "second"])
    config = {"configurable": {"thread_id": "t"}}
    asyncio.run(agent.ainvoke({"messages": [HumanMessage("hello")]}, config))
    with crossings("langchain_sessions") as counted:  # a new loop: its worker threads are profiled too
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("and again")]}, config))
    assert 0 < sum(counted.values()) <= MAX_CROSSINGS, counted
    assert [m.parts[0].text for m in session.get_history()] == ["hello", "first", "and again", "second"]


def test_the_middleware_keeps_no_per_session_state_of_its_own():
    """What the middleware holds per session lives in its turn service; the middleware keeps
    only caches of converted messages and tools, and in-flight tool results."""
    middleware = SessionMemoryMiddleware(Session(":memory:").for_session("t"))
    own = {name for name in vars(middleware) if name.startswith("_")}
    assert own <= {"_name", "_tool_names", "_tool_lock", "_answers", "_converted", "_last_model", "_warned_profile"}
    assert isinstance(middleware.turns, TurnService)


def _function_agent(session, replies):
    from llama_index.core.agent.workflow import FunctionAgent

    from llamaindex_sessions import SessionMemory

    from .llamaindex.scripted import ScriptedLLM

    agent = FunctionAgent(tools=[], llm=ScriptedLLM(list(replies)), system_prompt="You are helpful.")
    return agent, SessionMemory(session=session).bind(agent)


@pytest.mark.parametrize("history", [0, 200])
def test_a_llamaindex_turn_resolves_its_session_once_and_crosses_at_most_six_times(monkeypatch, history):
    resolved = _resolutions(monkeypatch)
    session = Session(":memory:").for_session("t").with_context("memory", description="Facts", max_tokens=200)
    for i in range(history):
        role = "user" if i % 2 == 0 else "assistant"
        session.append_message({"id": f"old{i}", "role": role, "parts": [{"type": "text", "text": f"earlier {i}"}]})
    agent, memory = _function_agent(session, ["first", "second"])

    async def turn(text):
        return await agent.run(user_msg=text, memory=memory)

    asyncio.run(turn("hello"))
    assert resolved == ["t"]
    with crossings("llamaindex_sessions") as counted:  # a new loop: its worker threads are profiled too
        answer = asyncio.run(turn("and again"))
    assert str(answer) == "second"
    assert 0 < sum(counted.values()) <= MAX_CROSSINGS, counted
    assert resolved == ["t"]
    assert [m.parts[0].text for m in session.get_history()][-4:] == ["hello", "first", "and again", "second"]


def test_the_memory_keeps_no_per_session_state_of_its_own():
    """The run's prompt and the cached window live in the turn service; the memory keeps only
    its token counter and the count of the rendered prompt."""
    from llamaindex_sessions import SessionMemory

    memory = SessionMemory(session=Session(":memory:").for_session("t"))
    assert set(memory.__pydantic_private__ or {}) == {"_handle", "_counter", "_prompt_count"}
    assert isinstance(memory._handle.turns, TurnService)


@pytest.fixture
def pg_store():
    from sessions_core.stores.postgres import PostgresStore

    from .postgres import postgres_url, require_postgres, temporary_schema

    require_postgres()
    with temporary_schema() as schema:
        store = PostgresStore(postgres_url(), schema=schema, max_size=1)
        yield store
        store.close()


def test_a_turn_on_postgresql_stores_each_message_in_one_round_trip(pg_store):
    """A message stored under one the turn service stored or read is sent with no read of its
    parent first, the overlays read with the stored branch (pipelined) serve the model's view,
    and the latest leaf is read with its depth: a LangChain turn with a tool call and its result
    takes 6 round trips (11 before), one without tools 3 (6), a LlamaIndex ``FunctionAgent`` turn 5
    (9: its memory's compaction check reads the overlays and the leaf's totals in one pipeline)."""
    from langchain_core.tools import tool

    from .postgres import round_trips

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    def replies(turns):
        for n in range(turns):
            call = {"name": "weather", "args": {"city": "Paris"}, "id": f"call-{n}"}
            yield AIMessage("", id=f"ask-{n}", tool_calls=[call])
            yield AIMessage("It is sunny.", id=f"answer-{n}")

    session = Session(pg_store).for_session("tools")
    model = ScriptedChatModel(responses=list(replies(10)))
    agent = create_agent(model, tools=[weather], middleware=[SessionMemoryMiddleware(session, compact_at=None)])
    plain = _agent(Session(pg_store).for_session("plain"), [f"reply {n}" for n in range(10)])
    for n in range(9):  # past psycopg's prepare threshold
        agent.invoke({"messages": [HumanMessage(f"q{n}", id=f"q-{n}")]})
        plain.invoke({"messages": [HumanMessage(f"q{n}", id=f"p-{n}")]}, {"configurable": {"thread_id": "plain"}})
    tool_turn = round_trips(pg_store, lambda: agent.invoke({"messages": [HumanMessage("again", id="q-last")]}))
    thread = {"configurable": {"thread_id": "plain"}}
    plain_turn = round_trips(pg_store, lambda: plain.invoke({"messages": [HumanMessage("again", id="p-last")]}, thread))
    assert [m.id for m in session.get_history()][-4:] == ["q-last", "ask-9", session.get_history()[-2].id, "answer-9"]
    assert session.get_history()[-2].role == "tool"

    llama_session = Session(pg_store).for_session("llama")
    llama, memory = _function_agent(llama_session, [f"reply {n}" for n in range(10)])

    async def turn(text):
        return await llama.run(user_msg=text, memory=memory)

    for n in range(9):
        asyncio.run(turn(f"q{n}"))
    llama_turn = round_trips(pg_store, lambda: asyncio.run(turn("again")))
    assert [m.parts[0].text for m in llama_session.get_history()][-2:] == ["again", "reply 9"]
    assert (tool_turn, plain_turn, llama_turn) == (6, 3, 5)


def test_a_chat_history_exchange_on_postgresql_is_one_transaction_of_few_round_trips(pg_store):
    """``SessionChatMessageHistory`` on PostgreSQL: reading the history takes 1 round trip, an
    exchange whose answer carries the model's id 2 (which ids are stored, then the insert, in
    one transaction), messages without ids 1."""
    from langchain_sessions import SessionChatMessageHistory

    from .postgres import round_trips

    history = SessionChatMessageHistory(Session(pg_store).for_session("chat"))
    for n in range(9):  # past psycopg's prepare threshold
        history.add_messages([HumanMessage(f"q{n}"), AIMessage(f"a{n}", id=f"run-{n}")])
        assert len(history.messages) == 2 * (n + 1)
    assert round_trips(pg_store, lambda: history.messages) == 1
    exchange = [HumanMessage("q9"), AIMessage("a9", id="run-9")]
    assert round_trips(pg_store, lambda: history.add_messages(exchange)) == 2
    assert round_trips(pg_store, lambda: history.add_messages([HumanMessage("q10"), AIMessage("a10")])) == 1
    assert [m.text for m in history.messages][-4:] == ["q9", "a9", "q10", "a10"]


def test_a_llamaindex_chat_store_reads_its_messages_in_one_round_trip(pg_store):
    """``SessionChatStore.get_messages`` on PostgreSQL: the path from the latest leaf, with its
    contents, in the statement that finds the leaf."""
    from llama_index.core.llms import ChatMessage

    from llamaindex_sessions import SessionChatStore

    from .postgres import round_trips

    chat_store = SessionChatStore(SessionManager(pg_store))
    for n in range(9):  # past psycopg's prepare threshold
        chat_store.add_message("k", ChatMessage(role="user", content=f"q{n}"))
        assert len(chat_store.get_messages("k")) == n + 1
    assert round_trips(pg_store, lambda: chat_store.get_messages("k")) == 1
    assert [m.content for m in chat_store.get_messages("k")][-2:] == ["q7", "q8"]


def test_a_llamaindex_chat_store_adds_a_message_without_reading_the_registry(pg_store):
    """``SessionChatStore.add_message`` on PostgreSQL: the append and the registry's touch, 2
    round trips (3 before: the registry read first); a key the registry does not hold (never
    written, or deleted since) is registered by the add that finds it missing."""
    from llama_index.core.llms import ChatMessage

    from llamaindex_sessions import SessionChatStore

    from .postgres import round_trips

    manager = SessionManager(pg_store)
    chat_store = SessionChatStore(manager)
    for n in range(9):  # past psycopg's prepare threshold
        chat_store.add_message("k", ChatMessage(role="user", content=f"q{n}"))
    assert round_trips(pg_store, lambda: chat_store.add_message("k", ChatMessage(role="user", content="q9"))) == 2
    assert [m.content for m in chat_store.get_messages("k")][-2:] == ["q8", "q9"]
    assert manager.delete("k")
    chat_store.add_message("k", ChatMessage(role="user", content="again"))
    assert manager.get("k") is not None
    assert [m.content for m in chat_store.get_messages("k")] == ["again"]
    assert chat_store.get_keys() == ["k"]


def test_a_thread_deleted_through_the_manager_is_registered_again_by_its_next_turn():
    """The middleware resolves (and registers) a manager's session once; deleting it through
    the manager makes the next turn of that thread register it again, store what it says, and
    leaves no subscription behind on the session it dropped."""
    manager = SessionManager()
    agent = _agent(manager, ["one", "two"])
    thread = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hi")]}, thread)
    old = manager.get_session("t")
    listening = len(old._feed._subscribers)
    assert manager.get("t") is not None
    assert manager.delete("t")
    assert len(old._feed._subscribers) == listening - 1
    agent.invoke({"messages": [HumanMessage("hi again")]}, thread)
    assert manager.get("t") is not None
    assert [m.parts[0].text for m in manager.get_history("t")] == ["hi again", "two"]
    assert [info.id for info in manager.list_sessions()] == ["t"]


def test_a_session_evicted_from_the_service_stops_being_followed():
    """A session leaving the turn service's cache while its manager keeps it: the service's
    subscription goes with it, so cycling through more sessions than the cache holds leaves one
    subscriber per session, not one per time it came back."""
    manager = SessionManager(":memory:")
    service = TurnService(manager, cache_size=1)
    for _ in range(5):
        for session_id in ("a", "b"):
            service.session(session_id)
    followers = {session_id: len(manager.get_session(session_id)._feed._subscribers) for session_id in ("a", "b")}
    assert followers == {"a": 1, "b": 2}  # the manager's own subscriber; "b" (cached) the service's too
