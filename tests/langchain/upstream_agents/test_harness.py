"""The ported agent tests really run with the middleware: an agent from ``memory.create_agent``
stores its whole run, and the graph has the nodes of one without the middleware."""

from __future__ import annotations

from langchain.agents import create_agent as plain_create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from langchain_sessions import to_langchain_messages

from .memory import SESSIONS, create_agent
from .model import FakeToolCallingModel


@tool
def echo(text: str) -> str:
    """Return the input unchanged."""
    return text


def test_an_agent_of_the_harness_stores_its_run():
    model = FakeToolCallingModel(tool_calls=[[{"name": "echo", "args": {"text": "x"}, "id": "tc1"}], []])
    agent = create_agent(model, [echo])
    result = agent.invoke({"messages": [HumanMessage("hi")]})
    (session,) = SESSIONS
    assert [m.id for m in to_langchain_messages(session.get_history())] == [m.id for m in result["messages"]]
    plain = plain_create_agent(FakeToolCallingModel(), [echo])
    assert set(agent.get_graph().nodes) == set(plain.get_graph().nodes)
