"""Ported from langchain 1.5.2 (sdist), tests/unit_tests/agents/test_return_direct_graph.py.

Upstream compares each agent's mermaid diagram with a syrupy snapshot (made with an older
langgraph, which did not yet label the tools node). Here each diagram with
``SessionMemoryMiddleware`` added must have the nodes and edges of the same agent without it,
plus only the ``model -.-> model`` edge ``create_agent`` draws for any ``wrap_model_call``
middleware, and the edges the upstream snapshot shows.
"""

from __future__ import annotations

from langchain.agents import create_agent as plain_create_agent
from langchain_core.tools import tool

from .memory import create_agent
from .model import FakeToolCallingModel


@tool
def normal_tool(input_string: str) -> str:
    """A normal tool without return_direct."""
    return input_string


@tool(return_direct=True)
def return_direct_tool(input_string: str) -> str:
    """A tool with return_direct=True."""
    return input_string


def diagrams(tools: list) -> tuple[str, str]:
    """The mermaid diagram of the agent with the middleware (without the edge drawn for any
    ``wrap_model_call`` middleware), and without it."""
    options = {"tools": tools, "system_prompt": "You are a helpful assistant."}
    with_memory = create_agent(model=FakeToolCallingModel(), **options).get_graph().draw_mermaid()
    plain = plain_create_agent(model=FakeToolCallingModel(), **options).get_graph().draw_mermaid()
    assert "\tmodel -.-> model;\n" in with_memory
    return with_memory.replace("\tmodel -.-> model;\n", ""), plain


def test_agent_graph_without_return_direct_tools() -> None:
    """Test that graph WITHOUT return_direct tools does NOT have edge from tools to end."""
    with_memory, plain = diagrams([normal_tool])
    assert with_memory == plain
    assert "tools -.-> model;" in with_memory and "tools -.-> __end__;" not in with_memory


def test_agent_graph_with_return_direct_tool() -> None:
    """Test that graph WITH return_direct tools has correct edge from tools to end."""
    with_memory, plain = diagrams([return_direct_tool])
    assert with_memory == plain
    assert "tools -.-> __end__;" in with_memory and "tools -.-> model;" in with_memory


def test_agent_graph_with_mixed_tools() -> None:
    """Test that graph with mixed tools (some return_direct, some not) has correct edges."""
    with_memory, plain = diagrams([return_direct_tool, normal_tool])
    assert with_memory == plain
    assert "tools -.-> __end__;" in with_memory and "tools -.-> model;" in with_memory
