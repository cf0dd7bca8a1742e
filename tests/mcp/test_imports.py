"""What ``sessions mcp`` imports: the SDK's server without its client (nor uvicorn, over stdio),
no framework, no other command; the ``mcp`` packages entered without their ``__init__`` still
work whole on first use, and where they cannot be entered so, the normal import runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

import sessions_core
from sessions_core.mcp_server import MemoryServer
from sessions_core.memory_config import load_config

from .conftest import server_env

REPORTING_SERVER = """
import atexit, json, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(
    {"modules": sorted(sys.modules), "sessions_core": sys.modules["sessions_core"].__file__})))
from sessions_core.cli import main
main(sys.argv[2:])
"""

NEVER_IMPORTED = (
    "mcp.client",
    "mcp.server.mcpserver",
    "httpx2",
    "uvicorn",
    "langchain",
    "langchain_core",
    "langchain_sessions",
    "llama_index",
    "llamaindex_sessions",
    "openai",
    "tiktoken",
    "psycopg",
    "rich",
    "sessions_core.cli.inspect_commands",
    "sessions_core.cli.transfer_commands",
    "sessions_core.cli.retention_commands",
    "sessions_core.cli.recall_commands",
    "sessions_core.cli.encryption_commands",
)


def test_the_server_process_imports_no_client_no_framework_and_no_other_command(memory_dir):
    report = memory_dir / "modules.json"
    args = ["-c", REPORTING_SERVER, str(report), "mcp", "--store", str(memory_dir / "chat.db")]
    args += ["--config", str(memory_dir / "memory.toml")]

    async def use_every_part() -> None:
        async with Client(StdioServerParameters(command=sys.executable, args=args, env=server_env())) as client:
            await client.list_tools()
            written = await client.call_tool("set_context", {"label": "memory", "content": "Likes green tea."})
            assert written.content[0].text.startswith("Written to memory.")
            await client.call_tool("append_message", {"role": "user", "content": "green tea please"})
            assert "green tea" in (await client.call_tool("session_search", {"query": "green tea"})).content[0].text
            assert (
                "Run the deploy script"
                in (await client.call_tool("load_context", {"label": "skills", "key": "deploy"})).content[0].text
            )
            await client.read_resource("memory://blocks/memory")
            await client.get_prompt("system_prompt")

    anyio.run(use_every_part)
    deadline = time.monotonic() + 30
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    found = json.loads(report.read_text(encoding="utf-8"))
    assert Path(found["sessions_core"]).resolve() == Path(sessions_core.__file__).resolve()
    modules = set(found["modules"])
    assert {"mcp.server.lowlevel", "mcp.server.stdio", "click"} <= modules  # it did serve, through the CLI
    imported = sorted(m for m in modules if any(m == name or m.startswith(f"{name}.") for name in NEVER_IMPORTED))
    assert imported == []


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=server_env())
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_packages_entered_bare_run_their_init_on_first_use():
    code = """
import sys
from sessions_core.mcp_server import require_mcp
require_mcp(lean=True)
assert "mcp.client" not in sys.modules and "mcp.server.mcpserver" not in sys.modules
import mcp, mcp.server
assert mcp.types.Tool.__name__ == "Tool"  # a submodule, without running __init__
assert "mcp.client" not in sys.modules
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer, Server
assert "Client" in mcp.__all__ and "MCPServer" in mcp.server.__all__
assert "mcp.client" in sys.modules and Server.__module__ == "mcp.server.lowlevel.server"
import uvicorn  # left out while the server modules were imported, not after
assert uvicorn.Server
try:
    mcp.no_such_name
except AttributeError as error:
    print(error)
"""
    assert run_python(code) == "module 'mcp' has no attribute 'no_such_name'"


def test_where_the_packages_cannot_be_entered_bare_the_normal_import_runs():
    code = """
import importlib.util, sys
def refuse(spec):
    raise ImportError("not here")
importlib.util.module_from_spec = refuse
from sessions_core.mcp_server import require_mcp
require_mcp(lean=True)
from mcp import Client
print("mcp.client" in sys.modules, hasattr(sys.modules["mcp"], "__getattr__"))
"""
    assert run_python(code) == "True False"


def test_an_imported_mcp_is_left_as_it_is():
    code = """
import sys, mcp
from sessions_core.mcp_server import require_mcp
require_mcp(lean=True)
print(sys.modules["mcp"] is mcp, "mcp.client" in sys.modules)
"""
    assert run_python(code) == "True True"


def test_calls_run_on_the_event_loop_only_over_stdio_on_sqlite_and_without_skill_files(memory_dir):
    server = MemoryServer(memory_dir / "chat.db", load_config(memory_dir / "memory.toml"))
    try:
        assert not server.runs_inline("set_context", {"label": "memory", "content": "x"})  # not serving stdio
        server._inline = True  # as serve_stdio sets it
        assert server.runs_inline("set_context", {"label": "memory", "content": "x"})
        assert server.runs_inline("session_search", {"query": "x"})
        assert server.runs_inline("append_message", {"role": "user", "content": "x"})
        assert not server.runs_inline("load_context", {"label": "skills", "key": "deploy"})
        assert not server.runs_inline("set_context", {"label": "skills", "content": "x"})
        # an append reads every block again first, the skill folder among them
        assert not server.runs_inline("set_context", {"label": "memory", "content": "x", "action": "append"})
    finally:
        server.close()
