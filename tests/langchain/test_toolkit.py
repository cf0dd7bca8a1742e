"""SessionToolkit: StructuredTools with pydantic schemas, sync and async, bound to a session or
finding it per call."""

from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseToolkit, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from langchain_sessions import SessionToolkit
from sessions_core import Session, SessionManager, StoreSearchContext
from sessions_core.testing.builders import plain_hits

from .helpers import ScriptedChatModel, call


class Skills:
    """A skill provider: get() lists the skills, load(key) returns one."""

    docs = {"brew-tea": "Boil water, steep three minutes."}

    def get(self):
        return "\n".join(f"- {key}" for key in self.docs)

    def load(self, key):
        return self.docs.get(key)


@pytest.fixture
def full_session():
    with (
        Session(":memory:")
        .for_session("s1")
        .with_context("memory", description="Facts", max_tokens=20)
        .with_context("skills", description="How-tos", provider=Skills())
        .with_context("notes", description="Searchable notes", provider=StoreSearchContext())
    ) as session:
        yield session


def as_openai(tools):
    return {t["function"]["name"]: t["function"] for t in map(convert_to_openai_tool, tools)}


def test_tools_are_structured_tools_with_pydantic_schemas(full_session):
    toolkit = SessionToolkit(full_session)
    assert isinstance(toolkit, BaseToolkit)
    tools = toolkit.get_tools()
    assert [t.name for t in tools] == ["set_context", "load_context", "unload_context", "search_context"]
    for tool in tools:
        assert isinstance(tool, StructuredTool)
        assert tool.func is not None and tool.coroutine is not None
        assert isinstance(tool.args_schema, type) and issubclass(tool.args_schema, BaseModel)

    schemas = as_openai(tools)
    set_context = schemas["set_context"]["parameters"]
    assert set_context["required"] == ["label", "content"]
    assert set_context["properties"]["label"]["enum"] == ["memory", "notes"]
    assert set_context["properties"]["action"]["anyOf"][0]["enum"] == ["replace", "append"]
    assert "title" in str(set_context["properties"]["metadata"])
    assert schemas["load_context"]["parameters"]["properties"]["label"]["enum"] == ["skills"]
    assert set(schemas["search_context"]["parameters"]["properties"]) == {"label", "query"}
    assert schemas["set_context"]["description"] == full_session.tools()[0].description
    # Injected arguments never reach the model.
    for schema in schemas.values():
        assert not {"runtime", "config"} & set(schema["parameters"]["properties"])


def test_calls_sync_and_async_with_the_core_tool_strings(full_session):
    tools = {t.name: t for t in SessionToolkit(full_session).get_tools()}
    reply = tools["set_context"].invoke(
        {"type": "tool_call", "id": "c1", "name": "set_context", "args": {"label": "memory", "content": "likes tea"}}
    )
    assert isinstance(reply, ToolMessage) and reply.status == "success"
    assert reply.content == "Written to memory. Usage: 15% (3/20 tokens)"
    assert full_session.get_context_block("memory").content == "likes tea"

    indexed = asyncio.run(
        tools["set_context"].ainvoke(
            {"label": "notes", "content": "The kettle is green.", "metadata": {"title": "Kettle"}}
        )
    )
    assert indexed == 'Indexed "kettle" in notes.'
    assert "kettle is green" in asyncio.run(tools["search_context"].ainvoke({"label": "notes", "query": "kettle"}))
    assert tools["load_context"].invoke({"label": "skills", "key": "brew-tea"}) == "Boil water, steep three minutes."


def test_errors_are_error_tool_messages_never_exceptions(full_session):
    tools = {t.name: t for t in SessionToolkit(full_session).get_tools()}

    def run(name, args):
        return tools[name].invoke({"type": "tool_call", "id": "c", "name": name, "args": args})

    unknown = run("set_context", {"label": "nope", "content": "x"})
    assert (unknown.status, unknown.content) == ("error", 'Error: block "nope" not found')
    too_long = run("set_context", {"label": "memory", "content": "word " * 50})
    assert too_long.status == "error" and too_long.content.startswith('Error: Block "memory" exceeds maxTokens')
    not_skill = run("load_context", {"label": "memory", "key": "x"})
    assert not_skill.content == 'Error: "memory" is not a skill block. Skill blocks: skills'


def test_a_manager_toolkit_finds_the_session_per_call():
    manager = SessionManager(":memory:").with_context("memory")
    tools = {t.name: t for t in SessionToolkit(manager).get_tools()}
    assert set(tools) == {"set_context", "session_search"}
    tools["set_context"].invoke({"label": "memory", "content": "from thread"}, {"configurable": {"thread_id": "t1"}})
    asyncio.run(
        tools["set_context"].ainvoke({"label": "memory", "content": "by id"}, {"configurable": {"session_id": "s2"}})
    )
    assert manager.get_session("t1").get_context_block("memory").content == "from thread"
    assert manager.get_session("s2").get_context_block("memory").content == "by id"
    manager.append("t1", {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "the blue teapot"}]})
    found = tools["session_search"].invoke({"query": "teapot"}, {"configurable": {"thread_id": "t9"}})
    assert plain_hits(found) == ["[user] the blue teapot"]

    missing = tools["set_context"].invoke(
        {"type": "tool_call", "id": "c", "name": "set_context", "args": {"label": "memory", "content": "x"}}
    )
    assert missing.status == "error" and "no session for this run" in missing.content
    fixed = SessionToolkit(manager, default_session_id="default").get_tools()[0]
    fixed.invoke({"label": "memory", "content": "fallback"})
    assert manager.get_session("default").get_context_block("memory").content == "fallback"


def test_toolkit_tools_in_a_plain_agent_use_the_thread():
    manager = SessionManager(":memory:").with_context("memory")
    model = ScriptedChatModel(
        responses=[call("set_context", {"label": "memory", "content": "likes tea"}, "c1"), AIMessage("ok")]
    )
    agent = create_agent(model, tools=SessionToolkit(manager).get_tools())
    agent.invoke({"messages": [HumanMessage("remember tea")]}, {"configurable": {"thread_id": "th"}})
    assert manager.get_session("th").get_context_block("memory").content == "likes tea"


def test_a_factory_gives_one_session_per_id(tmp_path):
    made = []

    def factory(session_id):
        made.append(session_id)
        return Session(str(tmp_path / "f.db")).for_session(session_id).with_context("memory")

    tool = SessionToolkit(factory).get_tools()[0]
    for _ in range(2):
        tool.invoke({"label": "memory", "content": "x"}, {"configurable": {"thread_id": "a"}})
    assert made == ["", "a"]


def test_malformed_tool_arguments_in_an_agent_are_an_error_for_the_model_and_the_run_goes_on():
    # A model that sends a label of the wrong type, then none at all: create_agent's tool node
    # gives each back as an error ToolMessage (the model can correct itself), nothing is stored,
    # and the next call with good arguments writes the block.
    manager = SessionManager(":memory:").with_context("memory")
    model = ScriptedChatModel(
        responses=[
            call("set_context", {"label": {"name": "memory"}, "content": "likes tea"}, "c1"),
            call("set_context", {"content": "likes tea"}, "c2"),
            call("set_context", {"label": "memory", "content": "likes tea"}, "c3"),
            AIMessage("noted"),
        ]
    )
    agent = create_agent(model, tools=SessionToolkit(manager).get_tools())
    result = agent.invoke({"messages": [HumanMessage("remember tea")]}, {"configurable": {"thread_id": "th"}})
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in tool_messages] == ["error", "error", "success"]
    assert "label" in tool_messages[0].content and "label" in tool_messages[1].content
    assert result["messages"][-1].content == "noted"
    assert manager.get_session("th").get_context_block("memory").content == "likes tea"
