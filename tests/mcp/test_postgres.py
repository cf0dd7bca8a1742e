"""The server over a PostgreSQL store: two clients (two servers, as MCP clients start them) on
one schema see each other's writes, and so does a Python ``Session`` on the same schema."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from sessions_core import PostgresStore, Session
from sessions_core.mcp_server import DEFAULT_SESSION
from sessions_core.memory_config import configure, load_config
from tests.postgres import postgres_url, require_postgres, temporary_schema

from .conftest import server_env


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    with temporary_schema() as name:
        yield name


def over_postgres(folder: Path, schema: str) -> StdioServerParameters:
    args = ["-m", "sessions_core", "--schema", schema, "mcp", "--store", postgres_url()]
    return StdioServerParameters(
        command=sys.executable, args=[*args, "--config", str(folder / "memory.toml")], env=server_env()
    )


def test_two_clients_and_a_python_session_share_one_schema(memory_dir, connect, schema):
    writer = connect(over_postgres(memory_dir, schema))
    reader = connect(over_postgres(memory_dir, schema))
    writer.text("set_context", {"label": "memory", "content": "Allergic to peanuts."})
    writer.text("append_message", {"role": "user", "content": "Where is the castle?"})

    assert reader("read_resource", "memory://blocks/memory").contents[0].text == "Allergic to peanuts."
    assert "castle" in reader.text("get_history")
    assert "castle" in reader.text("session_search", {"query": "castle"})

    store = PostgresStore(postgres_url(), schema=schema)
    try:
        session = configure(Session(store).for_session(DEFAULT_SESSION), load_config(memory_dir / "memory.toml"))
        assert [m.text for m in session.get_history()] == ["Where is the castle?"]
        block = session.get_context_block("memory")
        assert block is not None and block.content == "Allergic to peanuts."
    finally:
        store.close()
