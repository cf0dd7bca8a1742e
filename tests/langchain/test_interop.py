"""One conversation, two frameworks: what the LlamaIndex adapter stores reads as valid LangChain
messages, and what this adapter stores reads in LlamaIndex."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_sessions import SessionMemoryMiddleware, to_langchain_messages, to_session_messages
from sessions_core import Session

from .helpers import ScriptedChatModel

llama = pytest.importorskip("llama_index.core.llms")
llamaindex_sessions = pytest.importorskip("llamaindex_sessions")


def llama_conversation():
    ChatMessage, Role = llama.ChatMessage, llama.MessageRole
    return [
        ChatMessage(role=Role.USER, content="What's the weather in Paris?"),
        ChatMessage(
            role=Role.ASSISTANT,
            content="",
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                    }
                ]
            },
        ),
        ChatMessage(role=Role.TOOL, content="21C", additional_kwargs={"tool_call_id": "call_1", "name": "weather"}),
        ChatMessage(role=Role.ASSISTANT, content="It's 21C in Paris."),
    ]


def test_a_conversation_stored_by_llamaindex_continues_in_a_langchain_agent():
    session = Session(":memory:").for_session("shared")
    for message in llamaindex_sessions.from_chat_messages(llama_conversation()):
        session.append_message(message)
    human, call, result, answer = to_langchain_messages(session.get_history())
    assert isinstance(human, HumanMessage) and human.content == "What's the weather in Paris?"
    assert [(c["name"], c["args"], c["id"]) for c in call.tool_calls] == [("weather", {"city": "Paris"}, "call_1")]
    assert isinstance(result, ToolMessage) and (result.tool_call_id, result.content) == ("call_1", "21C")
    assert answer.content == "It's 21C in Paris."

    model = ScriptedChatModel(responses=[AIMessage("Take an umbrella anyway.")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)])
    agent.invoke({"messages": [HumanMessage("Should I take an umbrella?")]}, {"configurable": {"thread_id": "shared"}})
    assert [m.type for m in model.calls[0]] == ["human", "ai", "tool", "ai", "human"]
    assert len(session.get_history()) == 6


def test_a_langchain_conversation_reads_in_llamaindex():
    conversation = [
        HumanMessage("hi", id="h"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}], id="a"),
        ToolMessage("21C", tool_call_id="c1", name="weather", id="t"),
        AIMessage("It's 21C.", id="a2"),
    ]
    session = Session(":memory:").for_session("s")
    for message in to_session_messages(conversation):
        session.append_message(message)
    read = [m for stored in session.get_history() for m in llamaindex_sessions.to_chat_messages(stored)]
    assert [m.role.value for m in read] == ["user", "assistant", "tool", "assistant"]
    calls = [(b.tool_call_id, b.tool_name, b.tool_kwargs) for b in read[1].blocks if b.block_type == "tool_call"]
    assert calls == [("c1", "weather", {"city": "Paris"})]
    assert read[2].content == "21C" and read[3].content == "It's 21C."
