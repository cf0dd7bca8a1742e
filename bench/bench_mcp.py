"""The MCP server's costs (issue 34): startup to the first tool result, and a tool call's
overhead over the direct Python call, over stdio with the ``mcp`` SDK's own client.

    python bench/bench_mcp.py          # writes bench/results/mcp.json

Startup: from spawning ``python -m sessions_core mcp`` (the client's handshake included) to the
first ``set_context`` result, on a new file and on one that exists. Overhead: the median of a
call over stdio minus the median of ``Tool.invoke`` on the same store and tool, in-process.
Targets: startup <= 1 s, overhead <= 2 ms. Wall times wait for a CPU on a loaded machine, so
beside them: the CPU seconds the server used to its first result (``server_cpu_median``), and
the CPU a call costs client and server together beyond the direct call's (``overhead_cpu``,
Linux), with the load average at the end of the run.

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


def server_cpu() -> float | None:
    """CPU seconds (user + system) the live child processes have used (Linux ``/proc``)."""
    try:
        total = 0
        for task in os.listdir("/proc/self/task"):
            for pid in Path(f"/proc/self/task/{task}/children").read_text().split():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


async def startup(db: Path) -> tuple[float, float | None]:
    """Wall seconds to the first tool result, and the CPU seconds the server used meanwhile."""
    started = time.perf_counter()
    async with Client(params(db)) as client:
        await client.call_tool("set_context", CASES["set_context"])
        return time.perf_counter() - started, server_cpu()


async def over_stdio(db: Path) -> tuple[dict[str, float], dict[str, float | None]]:
    """The median wall time of a call, and the CPU time a call costs client and server together."""
    medians, cpu = {}, {}
    async with Client(params(db)) as client:
        for name, arguments in CASES.items():
            for _ in range(20):
                await client.call_tool(name, arguments)
            times = []
            server_before, client_before = server_cpu(), time.process_time()
            for _ in range(CALLS):
                started = time.perf_counter()
                await client.call_tool(name, arguments)
                times.append(time.perf_counter() - started)
            server_after, client_after = server_cpu(), time.process_time()
            medians[name] = statistics.median(times)
            cpu[name] = (
                None
                if server_before is None or server_after is None
                else (server_after - server_before + client_after - client_before) / CALLS
            )
    return medians, cpu


def direct(db: Path) -> tuple[dict[str, float], dict[str, float]]:
    server = MemoryServer(db)
    tools = {tool.name: tool for tool in server.session_tools()}
    medians, cpu = {}, {}
    for name, arguments in CASES.items():
        for _ in range(20):
            tools[name].invoke(arguments)
        times = []
        cpu_before = time.process_time()
        for _ in range(CALLS):
            started = time.perf_counter()
            tools[name].invoke(arguments)
            times.append(time.perf_counter() - started)
        cpu[name] = (time.process_time() - cpu_before) / CALLS
        medians[name] = statistics.median(times)
    server.close()
    return medians, cpu


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
        remote, remote_cpu = anyio.run(over_stdio, db)
        local, local_cpu = direct(db)
    starts_cpu = [cpu for _, cpu in fresh + existing if cpu is not None]
    result = {
        "startup_s": {
            "new_file_median": round(statistics.median(wall for wall, _ in fresh), 3),
            "new_file_max": round(max(wall for wall, _ in fresh), 3),
            "existing_file_median": round(statistics.median(wall for wall, _ in existing), 3),
            "existing_file_max": round(max(wall for wall, _ in existing), 3),
            "server_cpu_median": round(statistics.median(starts_cpu), 3) if starts_cpu else None,
            "target": 1.0,
        },
        "call_ms": {
            name: {
                "stdio_median": round(remote[name] * 1000, 3),
                "direct_median": round(local[name] * 1000, 3),
                "overhead": round((remote[name] - local[name]) * 1000, 3),
                "overhead_cpu": None if (cpu := remote_cpu[name]) is None else round((cpu - local_cpu[name]) * 1000, 3),
            }
            for name in CASES
        },
        "overhead_target_ms": 2.0,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "calls_per_case": CALLS,
        "python": sys.version.split()[0],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
