"""The server over streamable HTTP on 127.0.0.1 (a free port; started here, stopped at the end),
in one session and in a namespace where each call names its session."""

from __future__ import annotations

import json

import anyio
import pytest

from sessions_core import Session, SessionManager
from sessions_core.memory_config import configure, load_config


def test_tools_resources_prompt_and_two_clients_over_http(memory_dir, http_server, connect):
    url = http_server("--session", "web")
    first, second = connect(url), connect(url, mode="legacy")
    expected = configure(Session(), load_config(memory_dir / "memory.toml")).tools()
    listed = {tool.name: tool.input_schema for tool in first("list_tools").tools}
    assert {tool.name: listed[tool.name] for tool in expected} == {tool.name: tool.parameters for tool in expected}

    async def first_told_of_second_write() -> str:
        async with first.client.listen(resource_subscriptions=["memory://blocks/memory"]) as subscription:
            await second.client.call_tool("set_context", {"label": "memory", "content": "Over HTTP."})
            with anyio.fail_after(5):
                async for event in subscription:
                    return event.uri
        return ""

    assert first.portal.call(first_told_of_second_write) == "memory://blocks/memory"
    assert first("read_resource", "memory://blocks/memory").contents[0].text == "Over HTTP."
    assert "Over HTTP." in first("get_prompt", "system_prompt").messages[0].content.text
    first.text("append_message", {"role": "user", "content": "Remember the blue door", "id": "u1"})
    assert json.loads(second.text("get_history"))[0]["id"] == "u1"
    with Session(memory_dir / "chat.db") as session:
        configure(session.for_session("web"), load_config(memory_dir / "memory.toml"))
        assert session.get_context_block("memory").content == "Over HTTP."
        assert [m.id for m in session.get_history()] == ["u1"]


def test_a_namespace_serves_a_session_per_call(memory_dir, http_server, connect):
    from mcp import MCPError

    client = connect(http_server("--namespace", "team"))
    tools = {tool.name: tool.input_schema for tool in client("list_tools").tools}
    for name, schema in tools.items():
        assert schema["required"][0] == "session_id" and schema["properties"]["session_id"]["type"] == "string", name
    client.text("set_context", {"session_id": "ana", "label": "memory", "content": "Ana likes jazz."})
    client.text("set_context", {"session_id": "ben", "label": "memory", "content": "Ben likes metal."})
    missing = client("call_tool", "set_context", {"label": "memory", "content": "Whose?"})
    assert missing.is_error and "session_id" in missing.content[0].text
    assert client("list_resource_templates").resource_templates[0].uri_template == (
        "memory://sessions/{session_id}/blocks/{label}"
    )
    ana = client("read_resource", "memory://sessions/ana/blocks/memory").contents[0].text
    assert ana == "Ana likes jazz."
    prompt = client("get_prompt", "system_prompt", {"session_id": "ben"}).messages[0].content.text
    assert "Ben likes metal." in prompt and "Ana" not in prompt
    with pytest.raises(MCPError):
        client("get_prompt", "system_prompt")
    client.text("append_message", {"session_id": "ana", "role": "user", "content": "Play some Coltrane"})
    assert "Coltrane" in client.text("session_search", {"session_id": "ben", "query": "coltrane"})
    with SessionManager(memory_dir / "chat.db", namespace="team") as manager:
        configure(manager, load_config(memory_dir / "memory.toml"))
        assert {info.id for info in manager.list_sessions()} == {"ana", "ben"}
        assert manager.get_session("ben").get_context_block("memory").content == "Ben likes metal."
