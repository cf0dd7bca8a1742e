"""The MCP server's costs (issue 34): startup to the first tool result, and a tool call's
overhead over the direct Python call, over stdio with the ``mcp`` SDK's own client.

    python bench/bench_mcp.py          # writes bench/results/mcp.json

Startup: from spawning ``python -m sessions_core mcp`` (the client's handshake included) to the
first ``set_context`` result, on a new file and on one that exists. Overhead: the median of a
call over stdio minus the median of ``Tool.invoke`` on the same store and tool, in-process.
Targets: startup <= 1 s, overhead <= 2 ms.

The server runs this checkout's ``sessions_core`` (``PYTHONPATH``, which the SDK's client leaves
out of a server's environment), its modules compiled to bytecode first, as an install has them.
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

import sessions_core
from sessions_core.mcp_server import MemoryServer

RESULTS = Path(__file__).parent / "results" / "mcp.json"
STARTS = 7
CALLS = int(os.environ.get("BENCH_CALLS", "400"))
CASES = {
    "set_context": {"label": "memory", "content": "Likes green tea."},
    "session_search": {"query": "green tea"},
    "get_history": {"limit": 20},
}


PACKAGE = Path(sessions_core.__file__).resolve().parent


def params(db: Path) -> StdioServerParameters:
    env = {**get_default_environment(), "PYTHONPATH": str(PACKAGE.parent)}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "sessions_core", "mcp", "--store", str(db)], env=env
    )


async def startup(db: Path) -> float:
    started = time.perf_counter()
    async with Client(params(db)) as client:
        await client.call_tool("set_context", CASES["set_context"])
        return time.perf_counter() - started


async def over_stdio(db: Path) -> dict[str, float]:
    medians = {}
    async with Client(params(db)) as client:
        for name, arguments in CASES.items():
            for _ in range(20):
                await client.call_tool(name, arguments)
            times = []
            for _ in range(CALLS):
                started = time.perf_counter()
                await client.call_tool(name, arguments)
                times.append(time.perf_counter() - started)
            medians[name] = statistics.median(times)
    return medians


def direct(db: Path) -> dict[str, float]:
    server = MemoryServer(db)
    tools = {tool.name: tool for tool in server.session_tools()}
    medians = {}
    for name, arguments in CASES.items():
        for _ in range(20):
            tools[name].invoke(arguments)
        times = []
        for _ in range(CALLS):
            started = time.perf_counter()
            tools[name].invoke(arguments)
            times.append(time.perf_counter() - started)
        medians[name] = statistics.median(times)
    server.close()
    return medians


def main() -> None:
    compileall.compile_dir(PACKAGE, quiet=1)
    with tempfile.TemporaryDirectory() as folder:
        fresh = [anyio.run(startup, Path(folder) / f"new-{i}.db") for i in range(STARTS)]
        db = Path(folder) / "chat.db"
        anyio.run(startup, db)
        for i in range(30):
            MemoryServer(db).session().append_message(
                {
                    "id": f"m{i}",
                    "role": "user",
                    "parts": [{"type": "text", "text": f"Message {i} about green tea and the weather"}],
                }
            )
        existing = [anyio.run(startup, db) for _ in range(STARTS)]
        remote = anyio.run(over_stdio, db)
        local = direct(db)
    result = {
        "startup_s": {
            "new_file_median": round(statistics.median(fresh), 3),
            "new_file_max": round(max(fresh), 3),
            "existing_file_median": round(statistics.median(existing), 3),
            "existing_file_max": round(max(existing), 3),
            "target": 1.0,
        },
        "call_ms": {
            name: {
                "stdio_median": round(remote[name] * 1000, 3),
                "direct_median": round(local[name] * 1000, 3),
                "overhead": round((remote[name] - local[name]) * 1000, 3),
            }
            for name in CASES
        },
        "overhead_target_ms": 2.0,
        "calls_per_case": CALLS,
        "python": sys.version.split()[0],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
