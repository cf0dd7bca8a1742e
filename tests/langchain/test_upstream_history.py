"""Port of langchain-core's ``RunnableWithMessageHistory`` and chat-history tests over
``SessionChatMessageHistory``.

Sources (langchain-core 1.8.3 sdist): ``tests/unit_tests/runnables/test_history.py`` and
``tests/unit_tests/chat_history/test_chat_history.py``. Each test keeps the upstream name and
its assertions; the history is ours (sessions of a ``SessionManager``, registered on first use)
instead of ``InMemoryChatMessageHistory``.

Differences, where the upstream test relies on the class it replaces:
- upstream compares ``store == {"1": InMemoryChatMessageHistory(messages=[...])}``; here the
  stored history is compared as (type, content) pairs, because our history gives every stored
  message an id (on the stored copy, not on the caller's message), and pydantic equality
  includes ids. For the same reason outputs are compared without their ids.
- not ported, as they test ``RunnableWithMessageHistory`` or ``BaseChatMessageHistory`` alone,
  whatever the history: the schema tests (``test_get_input_schema_*``,
  ``test_get_output_schema``), ``test_get_output_messages_*_value_error`` and the
  ``test_*_implementation_only`` / ``test_chat_history_deprecated`` tests of the base class.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.runnables.utils import ConfigurableFieldSpec

from langchain_sessions import SessionChatMessageHistory
from sessions_core import Session, SessionManager

# Upstream runs with asyncio_mode = "auto"; the module mark does the same here.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function .* is marked with"),
    pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated"),
]


@pytest.fixture
def manager():
    with SessionManager(":memory:") as manager:
        yield manager


@pytest.fixture
def get_session_history(manager):
    def get_session_history(session_id: str, **_kwargs: Any) -> SessionChatMessageHistory:
        return SessionChatMessageHistory.from_manager(manager, session_id)

    return get_session_history


def said(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in messages]


def stored(manager: SessionManager) -> dict[str, list[tuple[str, Any]]]:
    """Every session of the manager as (type, content) pairs: upstream's ``store == {...}``."""
    return {
        info.id: said(SessionChatMessageHistory.from_manager(manager, info.id).messages)
        for info in manager.list_sessions()
    }


def without_ids(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return value.model_copy(update={"id": None})
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items()}
    return value


def you_said(messages: list[BaseMessage], *extra: str) -> str:
    return "you said: " + "\n".join([str(m.content) for m in messages if isinstance(m, HumanMessage)] + list(extra))


def test_interfaces():
    with Session(":memory:").for_session("s") as session:
        history = SessionChatMessageHistory(session)
        history.add_message(SystemMessage(content="system"))
        history.add_message(HumanMessage(content="human 1"))
        history.add_message(AIMessage(content="ai"))
        assert str(history) == "System: system\nHuman: human 1\nAI: ai"


THREE_TURNS = [
    ("human", "hello"),
    ("ai", "you said: hello"),
    ("human", "good bye"),
    ("ai", "you said: hello\ngood bye"),
    ("human", "hi again"),
    ("ai", "you said: hello\ngood bye\nhi again"),
]


def test_input_messages(manager, get_session_history):
    runnable = RunnableLambda(lambda messages: you_said(messages))
    with_history = RunnableWithMessageHistory(runnable, get_session_history)
    config = {"configurable": {"session_id": "1"}}
    assert with_history.invoke([HumanMessage(content="hello")], config) == "you said: hello"
    assert with_history.invoke([HumanMessage(content="good bye")], config) == "you said: hello\ngood bye"
    output = [*with_history.stream([HumanMessage(content="hi again")], config)]
    assert output == ["you said: hello\ngood bye\nhi again"]
    assert stored(manager) == {"1": THREE_TURNS}


async def test_input_messages_async(manager, get_session_history):
    runnable = RunnableLambda(lambda messages: you_said(messages))
    with_history = RunnableWithMessageHistory(runnable, get_session_history)
    config = {"session_id": "1_async"}
    assert await with_history.ainvoke([HumanMessage(content="hello")], config) == "you said: hello"
    assert await with_history.ainvoke([HumanMessage(content="good bye")], config) == "you said: hello\ngood bye"
    output = [c async for c in with_history.astream([HumanMessage(content="hi again")], config)]
    assert output == ["you said: hello\ngood bye\nhi again"]
    assert stored(manager) == {"1_async": THREE_TURNS}


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_input_dict(get_session_history, mode):
    runnable = RunnableLambda(lambda params: you_said(params["messages"]))
    with_history = RunnableWithMessageHistory(runnable, get_session_history, input_messages_key="messages")
    config = {"configurable": {"session_id": "2"}}
    run = _runner(with_history, mode)
    assert await run({"messages": [HumanMessage(content="hello")]}, config) == "you said: hello"
    assert await run({"messages": [HumanMessage(content="good bye")]}, config) == "you said: hello\ngood bye"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_input_dict_with_history_key(get_session_history, mode):
    runnable = RunnableLambda(lambda params: you_said(params["history"], params["input"]))
    with_history = RunnableWithMessageHistory(
        runnable, get_session_history, input_messages_key="input", history_messages_key="history"
    )
    config = {"configurable": {"session_id": "3"}}
    run = _runner(with_history, mode)
    assert await run({"input": "hello"}, config) == "you said: hello"
    assert await run({"input": "good bye"}, config) == "you said: hello\ngood bye"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_output_message(get_session_history, mode):
    runnable = RunnableLambda(lambda params: AIMessage(content=you_said(params["history"], params["input"])))
    with_history = RunnableWithMessageHistory(
        runnable, get_session_history, input_messages_key="input", history_messages_key="history"
    )
    config = {"configurable": {"session_id": "4"}}
    run = _runner(with_history, mode)
    assert without_ids(await run({"input": "hello"}, config)) == AIMessage(content="you said: hello")
    assert without_ids(await run({"input": "good bye"}, config)) == AIMessage(content="you said: hello\ngood bye")


class LengthChatModel(BaseChatModel):
    """A fake chat model that returns the length of the messages passed in."""

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=str(len(messages))))])

    @property
    def _llm_type(self) -> str:
        return "length-fake-chat-model"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_input_messages_output_message(get_session_history, mode):
    with_history = RunnableWithMessageHistory(LengthChatModel(), get_session_history)
    config = {"configurable": {"session_id": "5"}}
    run = _runner(with_history, mode)
    assert (await run([HumanMessage(content="hi")], config)).content == "1"
    assert (await run([HumanMessage(content="hi")], config)).content == "3"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_output_messages(get_session_history, mode):
    runnable = RunnableLambda(lambda params: [AIMessage(content=you_said(params["history"], params["input"]))])
    with_history = RunnableWithMessageHistory(
        runnable, get_session_history, input_messages_key="input", history_messages_key="history"
    )
    config = {"configurable": {"session_id": "6"}}
    run = _runner(with_history, mode)
    assert without_ids(await run({"input": "hello"}, config)) == [AIMessage(content="you said: hello")]
    assert without_ids(await run({"input": "good bye"}, config)) == [AIMessage(content="you said: hello\ngood bye")]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_output_dict(get_session_history, mode):
    runnable = RunnableLambda(
        lambda params: {"output": [AIMessage(content=you_said(params["history"], params["input"]))]}
    )
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
        output_messages_key="output",
    )
    config = {"configurable": {"session_id": "7"}}
    run = _runner(with_history, mode)
    first = without_ids(await run({"input": "hello"}, config))
    assert first == {"output": [AIMessage(content="you said: hello")]}
    second = without_ids(await run({"input": "good bye"}, config))
    assert second == {"output": [AIMessage(content="you said: hello\ngood bye")]}


def _fake_llm(params: dict[str, Any]) -> list[BaseMessage]:
    return [AIMessage(content=you_said(params["messages"]))]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_using_custom_config_specs(manager, mode):
    def get_session_history(user_id: str, conversation_id: str) -> SessionChatMessageHistory:
        return SessionChatMessageHistory.from_manager(manager, f"{user_id}/{conversation_id}")

    with_message_history = RunnableWithMessageHistory(
        RunnableLambda(_fake_llm),
        get_session_history=get_session_history,
        input_messages_key="messages",
        history_messages_key="history",
        history_factory_config=[
            ConfigurableFieldSpec(id="user_id", annotation=str, name="User ID", default="", is_shared=True),
            ConfigurableFieldSpec(
                id="conversation_id", annotation=str, name="Conversation ID", default=None, is_shared=True
            ),
        ],
    )
    run = _runner(with_message_history, mode)
    user1 = {"configurable": {"user_id": "user1", "conversation_id": "1"}}
    result = await run({"messages": [HumanMessage(content="hello")]}, user1)
    assert without_ids(result) == [AIMessage(content="you said: hello")]
    assert stored(manager) == {"user1/1": [("human", "hello"), ("ai", "you said: hello")]}

    result = await run({"messages": [HumanMessage(content="goodbye")]}, user1)
    assert without_ids(result) == [AIMessage(content="you said: goodbye")]
    assert stored(manager)["user1/1"] == [
        ("human", "hello"),
        ("ai", "you said: hello"),
        ("human", "goodbye"),
        ("ai", "you said: goodbye"),
    ]

    user2 = {"configurable": {"user_id": "user2", "conversation_id": "1"}}
    result = await run({"messages": [HumanMessage(content="meow")]}, user2)
    assert without_ids(result) == [AIMessage(content="you said: meow")]
    assert stored(manager)["user2/1"] == [("human", "meow"), ("ai", "you said: meow")]
    assert len(stored(manager)["user1/1"]) == 4


def test_ignore_session_id():
    """Test without config."""
    with Session(":memory:").for_session("s") as session:
        history = SessionChatMessageHistory(session)
        with_message_history = RunnableWithMessageHistory(RunnableLambda(_fake_llm_messages), lambda: history)
        _ = with_message_history.invoke("hello")
        _ = with_message_history.invoke("hello again")
        assert len(history.messages) == 4


def _fake_llm_messages(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [AIMessage(content=you_said(messages))]


def _runner(runnable: Any, mode: str):
    async def run(value: Any, config: Any) -> Any:
        return runnable.invoke(value, config) if mode == "sync" else await runnable.ainvoke(value, config)

    return run


# -- chat_history/test_chat_history.py ---------------------------------------------------------


async def test_in_memory_history_initialization(manager):
    # Upstream builds the history with messages=[...]; ours starts from what the store holds.
    messages = [HumanMessage(content="Hello")]
    history = SessionChatMessageHistory.from_manager(manager, "a")
    await history.aadd_messages(messages)
    assert said(await history.aget_messages()) == said(messages)
    other_history = SessionChatMessageHistory.from_manager(manager, "b")
    await other_history.aadd_messages([HumanMessage(content="World")])
    assert said(history.messages) == said(messages)
    await history.aclear()
    assert history.messages == []
    assert said(other_history.messages) == [("human", "World")]


async def test_async_interface(manager):
    """Test async interface for BaseChatMessageHistory."""
    chat_history = SessionChatMessageHistory.from_manager(manager, "c")
    await chat_history.aadd_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
    assert said(await chat_history.aget_messages()) == [("human", "Hello"), ("human", "World")]
    await chat_history.aadd_messages([HumanMessage(content="!")])
    assert said(await chat_history.aget_messages()) == [("human", "Hello"), ("human", "World"), ("human", "!")]
    await chat_history.aclear()
    assert await chat_history.aget_messages() == []
