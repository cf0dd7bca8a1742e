"""SessionToolSpec: FunctionTools with the core's exact schemas and sync + async functions."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.tools import FunctionTool
from llama_index.core.tools.tool_spec.base import BaseToolSpec

from llamaindex_sessions import SessionMemory, SessionToolSpec
from sessions_core import Session, SessionManager, StoreSearchContext, to_openai_tools


@pytest.fixture
def rich_session():
    with (
        Session()
        .for_session("s")
        .with_context("memory", description="Learned facts", max_tokens=50)
        .with_context("notes", provider=StoreSearchContext(), description="Searchable notes")
    ) as session:
        yield session


def test_schemas_match_the_core_tools_exactly(rich_session):
    spec = SessionToolSpec(rich_session)
    assert isinstance(spec, BaseToolSpec)
    tools = spec.to_tool_list()
    core = rich_session.tools()
    assert [t.metadata.name for t in tools] == [t.name for t in core] == ["set_context", "search_context"]
    for tool, core_tool in zip(tools, core):
        assert isinstance(tool, FunctionTool)
        assert tool.metadata.description == core_tool.description
        assert tool.metadata.get_parameters_dict() == core_tool.parameters
        assert tool.metadata.to_openai_tool() == core_tool.to_openai() | {"type": "function"}
    assert [t.metadata.to_openai_tool() for t in tools] == to_openai_tools(core)
    set_schema = tools[0].metadata.get_parameters_dict()
    assert set_schema["properties"]["label"]["enum"] == ["memory", "notes"]
    assert set_schema["required"] == ["label", "content"]
    assert "metadata" in set_schema["properties"]


def test_sync_and_async_functions(rich_session):
    set_context, search_context = SessionToolSpec(rich_session).to_tool_list()
    assert set_context.call(label="memory", content="User is Ada.").content.startswith("Written to memory.")
    assert rich_session.get_context_block("memory").content == "User is Ada."

    async def go():
        written = await set_context.acall(
            label="notes", content="Trams in Lisbon are yellow.", metadata={"title": "trams"}
        )
        found = await search_context.acall(label="notes", query="yellow trams")
        return written.content, found.content

    written, found = asyncio.run(go())
    assert written == 'Indexed "trams" in notes.'
    assert "yellow" in found


def test_errors_come_back_as_strings(rich_session):
    set_context = SessionToolSpec(rich_session).to_tool_list()[0]
    output = set_context.call(label="memory", content="word " * 200)
    assert output.content.startswith('Error: Block "memory" exceeds maxTokens')
    assert set_context.call(label="memory").content.startswith("Error: invalid arguments for set_context")


def test_manager_memory_and_filters(rich_session):
    manager = SessionManager().with_context("memory")
    info = manager.create("chat")
    assert [t.metadata.name for t in SessionToolSpec(manager).to_tool_list()] == ["session_search"]
    tools = SessionToolSpec(manager, session_id=info.id).to_tool_list()
    assert [t.metadata.name for t in tools] == ["set_context", "session_search"]
    assert [
        t.metadata.name
        for t in SessionToolSpec(SessionMemory(session=rich_session)).to_tool_list(spec_functions=["search_context"])
    ] == ["search_context"]
    manager.append(info.id, {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "I love trams"}]})
    assert "I love trams" in tools[1].call(query="trams").content
    with pytest.raises(TypeError, match="a SQLite path or a postgresql:// URL"):
        SessionToolSpec(42)


def test_spec_methods_run_the_tools(rich_session):
    spec = SessionToolSpec(rich_session)
    assert spec.set_context(label="memory", content="Hi").startswith("Written")
    assert asyncio.run(spec.asearch_context(label="notes", query="nothing")) == "No results found."
    assert spec.load_context(label="x", key="y").startswith("Error: tool 'load_context' is not available")


# -- issue 18 ------------------------------------------------------------------------------------


def test_metadata_and_schema_by_function_name_as_base_tool_spec_documents(rich_session):
    spec = SessionToolSpec(rich_session)
    tools = {t.metadata.name: t for t in spec.to_tool_list()}
    for fn_name, tool_name in [("set_context", "set_context"), ("asearch_context", "search_context")]:
        metadata = spec.get_metadata_from_fn_name(fn_name)
        assert metadata == tools[tool_name].metadata
        schema = spec.get_fn_schema_from_fn_name(fn_name)
        assert schema.model_json_schema() == tools[tool_name].metadata.fn_schema.model_json_schema()
        assert metadata.get_parameters_dict() == next(t for t in rich_session.tools() if t.name == tool_name).parameters
    # BaseToolSpec.to_tool_list builds its tools from these two methods: it works too.
    assert [t.metadata.name for t in BaseToolSpec.to_tool_list(spec, spec_functions=["set_context"])] == ["set_context"]
    with pytest.raises(ValueError, match=r"not available for these blocks \(available now: set_context"):
        spec.get_metadata_from_fn_name("load_context")
    with pytest.raises(ValueError, match="has no function 'forget'"):
        spec.get_fn_schema_from_fn_name("forget")


def test_a_path_opens_a_manager(db):
    manager = SessionManager(db)
    manager.create("chat")
    spec = SessionToolSpec(db)
    assert isinstance(spec.target, SessionManager)
    assert [t.metadata.name for t in spec.to_tool_list()] == ["session_search"]
