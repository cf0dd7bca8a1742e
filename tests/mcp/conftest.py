"""Fixtures for the MCP server tests: a memory config, the server over stdio and over HTTP,
and clients of the ``mcp`` SDK kept open across a test (through an anyio blocking portal)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'session-memory[mcp]')")
pytest.importorskip("click", reason="the cli extra is not installed (pip install 'session-memory[cli]')")

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

import sessions_core

CONFIG = """
edit_tool = true
poll_interval = 0.2
max_argument_bytes = 100000

[[blocks]]
label = "soul"
kind = "static"
content = "You are a helpful assistant."

[[blocks]]
label = "memory"
description = "Learned facts"
max_tokens = 200

[[blocks]]
label = "knowledge"
kind = "searchable"
description = "Searchable notes"

[[blocks]]
label = "skills"
kind = "skills"
description = "Playbooks"
path = "skills"
"""

SKILL = "---\ndescription: How to deploy\n---\n\nRun the deploy script, then check the dashboard.\n"


@pytest.fixture
def memory_dir(tmp_path: Path) -> Path:
    """A folder with ``memory.toml`` (every kind of block, the edit tool) and a skill."""
    (tmp_path / "memory.toml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "deploy.md").write_text(SKILL, encoding="utf-8")
    return tmp_path


def server_args(folder: Path, *extra: str) -> list[str]:
    return [
        "-m",
        "sessions_core",
        "mcp",
        "--store",
        str(folder / "chat.db"),
        "--config",
        str(folder / "memory.toml"),
        *extra,
    ]


def server_env() -> dict[str, str]:
    """The environment of a server a client starts: the SDK's default one (which leaves out
    ``PYTHONPATH``) with this ``sessions_core`` first on the path, so the code under test is
    what serves, not another installed copy."""
    paths = [str(Path(sessions_core.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    return {**get_default_environment(), "PYTHONPATH": os.pathsep.join(path for path in paths if path)}


def stdio(folder: Path, *extra: str) -> StdioServerParameters:
    """The server started by the client, over stdio: ``python -m sessions_core mcp ...``."""
    return StdioServerParameters(command=sys.executable, args=server_args(folder, *extra), env=server_env())


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as running:
        yield running


class Connected:
    """An ``mcp.Client`` driven from sync test code through a portal."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.portal.call(lambda: getattr(self.client, method)(*args, **kwargs))

    def text(self, tool: str, arguments: dict[str, Any] | None = None) -> str:
        result = self("call_tool", tool, arguments or {})
        return result.content[0].text


@pytest.fixture
def connect(portal: BlockingPortal) -> Iterator[Any]:
    """``connect(server, **options)``: an open client, closed at the end of the test."""
    managers: list[Any] = []

    def open_client(server: Any, **options: Any) -> Connected:
        manager = portal.wrap_async_context_manager(Client(server, **options))
        client = manager.__enter__()
        managers.append(manager)
        return Connected(portal, client)

    yield open_client
    for manager in reversed(managers):
        manager.__exit__(None, None, None)


@pytest.fixture
def http_server(memory_dir: Path) -> Iterator[Any]:
    """``http_server(*options)``: start ``sessions mcp --http 127.0.0.1:0`` and give its URL;
    every server started is stopped at the end of the test."""
    processes: list[subprocess.Popen[str]] = []

    def start(*extra: str) -> str:
        process = subprocess.Popen(
            [sys.executable, *server_args(memory_dir, "--http", "127.0.0.1:0", *extra)],
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/mcp", line)
        assert found, f"the server did not start: {line}{process.stderr.read() if process.poll() is not None else ''}"
        return found.group(0)

    yield start
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
