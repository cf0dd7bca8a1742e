"""The server over stdio, driven by the ``mcp`` SDK's own client: ``python -m sessions_core mcp``
in a subprocess. Tools (schemas equal to the framework tools'), each tool called, a block read
and subscribed to, the prompt, and writes seen by a second client and by a Python ``Session``."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import anyio
import pytest

from sessions_core import Session, SessionManager
from sessions_core.memory_config import configure, load_config

from .conftest import stdio

SESSION = "user-42"


def framework_tools(folder: Path) -> dict:
    """What the adapters give a framework for the same memory: the session's tools and session_search."""
    config = load_config(folder / "memory.toml")
    with Session(folder / "framework.db") as session, SessionManager(folder / "framework.db") as manager:
        tools = configure(session.for_session(SESSION), config).tools() + manager.tools()
        return {tool.name: (tool.description, tool.parameters) for tool in tools}


def test_tools_are_the_framework_tools_and_each_answers(memory_dir, connect):
    client = connect(stdio(memory_dir, "--session", SESSION))
    listed = {tool.name: tool for tool in client("list_tools").tools}
    expected = framework_tools(memory_dir)
    assert list(listed) == [*expected, "append_message", "get_history"]
    for name, (description, schema) in expected.items():
        assert listed[name].input_schema == schema, name
        assert listed[name].description == description, name

    assert client.text("set_context", {"label": "memory", "content": "Likes green tea."}).startswith(
        "Written to memory."
    )
    assert client.text("set_context", {"label": "memory", "content": "Lives in Lisbon.", "action": "append"})
    assert client.text("edit_context", {"label": "memory", "old_text": "green", "new_text": "jasmine"}).startswith(
        "Edited memory."
    )
    indexed = client.text("set_context", {"label": "knowledge", "content": "The VPN password rotates monthly."})
    assert indexed.startswith('Indexed "') and indexed.endswith("in knowledge.")
    assert "rotates monthly" in client.text("search_context", {"label": "knowledge", "query": "vpn password"})
    assert "Run the deploy script" in client.text("load_context", {"label": "skills", "key": "deploy"})
    assert client.text("unload_context", {"label": "skills", "key": "deploy"}) == (
        'Unloaded "deploy" from skills. Context reclaimed.'
    )
    stored = json.loads(client.text("append_message", {"role": "user", "content": "Book a table in Alfama"}))
    assert stored["inserted"] is True
    reply = {"role": "assistant", "parts": [{"type": "text", "text": "Booked for eight."}], "id": "a1"}
    assert json.loads(client.text("append_message", reply)) == {"id": "a1", "inserted": True}
    history = json.loads(client.text("get_history", {"limit": 10}))
    assert [(m["role"], m["parts"][0]["text"]) for m in history] == [
        ("user", "Book a table in Alfama"),
        ("assistant", "Booked for eight."),
    ]
    assert "Alfama" in client.text("session_search", {"query": "alfama table"})

    with Session(memory_dir / "chat.db") as session:  # a Python Session on the same file sees every write
        configure(session.for_session(SESSION), load_config(memory_dir / "memory.toml"))
        assert session.get_context_block("memory").content == "Likes jasmine tea.\nLives in Lisbon."
        assert [m.id for m in session.get_history()][-1] == "a1"


def test_error_results_are_the_framework_ones(memory_dir, connect):
    client = connect(stdio(memory_dir))
    over = client("call_tool", "set_context", {"label": "memory", "content": "word " * 400})
    assert over.is_error and over.content[0].text == 'Error: Block "memory" exceeds maxTokens: 520 > 200'
    expected = {tool.name: tool for tool in configure(Session(), load_config(memory_dir / "memory.toml")).tools()}
    for name, arguments in [
        ("set_context", {"label": "nowhere", "content": "x"}),
        ("set_context", {"label": "memory"}),
        ("set_context", {"label": "memory", "content": 7}),
        ("load_context", {"label": "memory", "key": "deploy"}),
        ("search_context", {"label": "memory", "query": "x"}),
    ]:
        result = client("call_tool", name, arguments)
        assert result.is_error
        assert result.content[0].text == expected[name].invoke(arguments)


def test_a_block_resource_is_read_and_its_subscribers_told_of_a_write(memory_dir, connect):
    client = connect(stdio(memory_dir))
    resources = {r.name: r for r in client("list_resources").resources}
    assert list(resources) == ["soul", "memory", "knowledge", "skills"]
    assert str(resources["memory"].uri) == "memory://blocks/memory"
    assert resources["memory"].description == "Learned facts"
    assert client("read_resource", "memory://blocks/soul").contents[0].text == "You are a helpful assistant."
    assert client("read_resource", "memory://blocks/skills").contents[0].text == "- deploy: How to deploy"

    async def written_while_listening() -> list:
        async with client.client.listen(resource_subscriptions=["memory://blocks/memory"]) as subscription:
            await client.client.call_tool("set_context", {"label": "memory", "content": "Prefers mornings."})
            with anyio.fail_after(5):
                async for event in subscription:
                    return [event]
        return []

    (event,) = client.portal.call(written_while_listening)
    assert event.uri == "memory://blocks/memory"
    assert client("read_resource", "memory://blocks/memory").contents[0].text == "Prefers mornings."


def test_a_legacy_client_subscribes_with_resources_subscribe(memory_dir, connect):
    updates: list[str] = []

    async def on_message(message) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updates.append(root.params.uri)

    client = connect(stdio(memory_dir), mode="legacy", message_handler=on_message)
    assert client.client.protocol_version < "2026"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client("subscribe_resource", "memory://blocks/memory")
    client.text("set_context", {"label": "memory", "content": "Old school."})

    async def told() -> None:
        with anyio.fail_after(5):
            while not updates:
                await anyio.sleep(0.01)

    client.portal.call(told)
    assert updates[0] == "memory://blocks/memory"


def test_the_prompt_is_the_rendered_system_prompt(memory_dir, connect):
    client = connect(stdio(memory_dir, "--session", SESSION))
    client.text("set_context", {"label": "memory", "content": "Allergic to peanuts."})
    (prompt,) = client("list_prompts").prompts
    assert prompt.name == "system_prompt"
    message = client("get_prompt", "system_prompt").messages[0]
    with Session(memory_dir / "chat.db") as session:
        configure(session.for_session(SESSION), load_config(memory_dir / "memory.toml"))
        assert message.content.text == session.system_prompt_for_run()
    assert "Allergic to peanuts." in message.content.text and "You are a helpful assistant." in message.content.text


def test_two_clients_see_each_others_writes(memory_dir, connect):
    """Two servers (one per client, as MCP clients start them) on one SQLite file: a write by one
    is read by the other, whose subscriber is told within the poll interval."""
    writer = connect(stdio(memory_dir))
    reader = connect(stdio(memory_dir))
    reader.text("set_context", {"label": "memory", "content": "First."})
    assert reader("read_resource", "memory://blocks/memory").contents[0].text == "First."

    async def told_of_the_other_write() -> str:
        async with reader.client.listen(resource_subscriptions=["memory://blocks/memory"]) as subscription:
            await writer.client.call_tool("set_context", {"label": "memory", "content": "Second.", "action": "append"})
            with anyio.fail_after(5):
                async for event in subscription:
                    return event.uri
        return ""

    assert reader.portal.call(told_of_the_other_write) == "memory://blocks/memory"
    assert reader("read_resource", "memory://blocks/memory").contents[0].text == "First.\nSecond."
    reader.text(
        "set_context", {"label": "memory", "content": "Third.", "action": "append"}
    )  # appends to the fresh text
    assert writer("read_resource", "memory://blocks/memory").contents[0].text == "First.\nSecond.\nThird."
    writer.text("append_message", {"role": "user", "content": "Where is the castle?"})
    assert "castle" in reader.text("get_history")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_unknown_names_are_mcp_errors_and_the_server_goes_on(memory_dir, connect, mode):
    from mcp import MCPError

    client = connect(stdio(memory_dir), mode=mode)
    with pytest.raises(MCPError, match="Unknown tool"):
        client("call_tool", "drop_tables", {})
    with pytest.raises(MCPError, match="Unknown resource"):
        client("read_resource", "memory://blocks/nowhere")
    with pytest.raises(MCPError, match="Unknown resource"):
        client("read_resource", "file:///etc/passwd")
    with pytest.raises(MCPError, match="Unknown prompt"):
        client("get_prompt", "jailbreak")
    assert client.text("set_context", {"label": "memory", "content": "Still here."}).startswith("Written")


def test_redact_masks_what_a_client_writes_before_it_is_stored(memory_dir, connect):
    client = connect(stdio(memory_dir, "--redact"))
    client.text("set_context", {"label": "memory", "content": "Mail ada.marker@example.com"})
    client.text("append_message", {"role": "user", "content": "My card is 4111 1111 1111 1111"})
    assert client("read_resource", "memory://blocks/memory").contents[0].text == "Mail [EMAIL]"
    assert "ada.marker" not in client.text("session_search", {"query": "ada.marker"})
    session = Session(str(memory_dir / "chat.db")).for_session("default")
    assert [m.text for m in session.get_history()] == ["My card is [CARD]"]
    session.close()
    data = b"".join(file.read_bytes() for file in memory_dir.glob("chat.db*"))
    assert b"ada.marker" not in data and b"4111 1111" not in data


def test_a_redact_salt_from_the_environment_lets_session_search_find_an_address(memory_dir, connect):
    server = stdio(memory_dir, "--redact")
    server.env = {**(server.env or {}), "SESSIONS_REDACT_SALT": "pepper"}
    client = connect(server)
    client.text("append_message", {"role": "user", "content": "Invoice ada.marker@example.com monthly"})
    client.text("append_message", {"role": "user", "content": "Invoice bob.marker@example.com yearly"})
    found = client.text("session_search", {"query": "ada.marker@example.com"})
    assert "monthly" in found and "yearly" not in found and "ada.marker" not in found
    data = b"".join(file.read_bytes() for file in memory_dir.glob("chat.db*"))
    assert b"ada.marker" not in data and b"pepper" not in data
