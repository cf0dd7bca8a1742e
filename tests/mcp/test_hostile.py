"""Hostile input over MCP: whatever a client sends as tool arguments (wrong types, huge
strings, unknown labels, NULs, lone surrogates), the server answers with an MCP error or an
``Error: ...`` result and the next call still works; a closed store gives ``Error:`` results."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sessions_core.mcp_server import MemoryServer
from sessions_core.memory_config import load_config

from .conftest import stdio

TOOLS = [
    "set_context",
    "edit_context",
    "load_context",
    "unload_context",
    "search_context",
    "session_search",
    "append_message",
    "get_history",
]
NAMES = ["label", "content", "action", "metadata", "old_text", "new_text", "key", "query", "role", "parts", "id"]
NAMES += ["parent_id", "limit", "leaf_id", "session_id"]

text = st.text(st.characters(codec="utf-8") | st.sampled_from(["\x00", "\ud800", "'", '"', ";", "*"]), max_size=40)
scalar = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | text
    | st.sampled_from(["memory", "skills", "x" * 200_000])
)
value = st.recursive(
    scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=8
)
arguments = st.dictionaries(st.sampled_from(NAMES) | text, value, max_size=5)

PROBE = ("set_context", {"label": "memory", "content": "still alive"})
NAMESPACED_PROBE = ("set_context", {"session_id": "probe", "label": "memory", "content": "still alive"})


@pytest.fixture
def client(memory_dir, connect):
    return connect(stdio(memory_dir))


@pytest.fixture(params=["one session", "a namespace"])
def any_client(request, memory_dir, connect):
    """A server of one session, or of a namespace's sessions (each call names its session)."""
    if request.param == "one session":
        return connect(stdio(memory_dir)), PROBE
    return connect(stdio(memory_dir, "--namespace", "team")), NAMESPACED_PROBE


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(TOOLS) | text, args=arguments)
@example(name="\ud800", args={})
@example(name="set_context", args={"label": {"a": 1}, "content": "x"})
@example(name="set_context", args={"label": {"\ud800": None}})
def test_no_tool_arguments_crash_the_server(any_client, name: str, args: dict[str, Any]):
    from mcp import MCPError
    from mcp.types import INTERNAL_ERROR

    client, probe = any_client

    try:
        result = client("call_tool", name, args)
    except MCPError as error:  # an unknown tool, or arguments the protocol itself refuses
        assert error.error.code < 0
        assert error.error.code != INTERNAL_ERROR, error  # never the server failing
    except UnicodeEncodeError:
        # The SDK's client cannot send a tool name that is no UTF-8 (a lone surrogate): it puts
        # the name in a header first; nor a nested mapping's key that is none (pydantic encodes
        # it while dumping the request). Nothing reached the server.
        assert not _utf8(name) or not all(_utf8(part) for part in _strings(args))
    else:
        text = result.content[0].text
        assert isinstance(text, str)
        if result.is_error:
            assert text.startswith("Error:")
    assert client.text(*probe).startswith("Written to memory.")


def _strings(value: Any) -> list[str]:
    """Every string in ``value``: its mappings' keys, their values, its lists' items."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(text for inner in value.values() for text in _strings(inner))]
    if isinstance(value, list):
        return [text for inner in value for text in _strings(inner)]
    return []


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.parametrize("label", [{"a": 1}, ["memory"], 3, None])
def test_a_label_of_the_wrong_type_is_an_error_result(client, label):
    # Not an internal error of the server: a label is looked up among the skill blocks' labels
    # before the call is run, and a dict or a list is no label.
    result = client("call_tool", "set_context", {"label": label, "content": "x"})
    assert result.is_error
    assert result.content[0].text.startswith("Error: invalid arguments for set_context")
    assert client.text(*PROBE).startswith("Written to memory.")


def test_oversize_arguments_are_refused_before_the_store(client):
    result = client("call_tool", "append_message", {"role": "user", "content": "x" * 200_000})
    assert result.is_error
    assert result.content[0].text == (
        'Error: invalid arguments for append_message: "content" is 200000 bytes, over the limit of 100000'
    )
    assert client.text(*PROBE).startswith("Written")


def test_a_closed_store_gives_error_results_and_the_server_goes_on(memory_dir, connect):
    from mcp import MCPError

    server = MemoryServer(memory_dir / "closed.db", load_config(memory_dir / "memory.toml"))
    client = connect(server.server)
    assert client.text(*PROBE).startswith("Written")
    server.manager.store.close()
    for name, args in [PROBE, ("get_history", {}), ("append_message", {"role": "user", "content": "hi"})]:
        result = client("call_tool", name, args)
        assert result.is_error and result.content[0].text.startswith("Error:"), name
    with pytest.raises(MCPError):
        client("read_resource", "memory://blocks/memory")
    assert [tool.name for tool in client("list_tools").tools] or True  # still answering
    assert client("list_prompts").prompts[0].name == "system_prompt"
