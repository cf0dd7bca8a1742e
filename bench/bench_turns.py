"""What memory costs an agent per turn, against how much it has stored (issue 20).

Run ``python bench/bench_turns.py`` (``--sizes 1000,10000,100000,1000000``, ``--turns 15``,
``--peers-up-to 10000``, ``--postgres-up-to 10000``, ``--uncompacted-up-to 100000``). A LangChain
``create_agent`` agent and a LlamaIndex ``FunctionAgent`` answer with scripted models (no tools,
nothing to wait for), so a turn's time is the agent's own work plus its memory's. Each figure runs
in a fresh process: the median of ``--turns`` turns (after one warm-up) with one new user message,
less the median turn of the same agent without memory, whose turns alternate with the subject's
(the same call, ``invoke``/``ainvoke``/``run``): the memory's overhead.

Subjects, each over the same generated conversation of N stored messages (user turns, assistant
replies, tool rounds):

- ``session-memory``: ``SessionMemoryMiddleware`` (sync and ``ainvoke``) and ``SessionMemory``
  over a SQLite file, and the middleware over PostgreSQL; no checkpointer (the memory reads the
  stored history each run); uncompacted, and compacted as in use (one overlay over all but the
  first three and about the last 40 messages);
- LangGraph's ``SqliteSaver`` and ``PostgresSaver`` checkpointers, the thread's checkpoint holding
  the N messages, alone and with ``SummarizationMiddleware`` (its trigger above N messages, so it
  counts tokens every call and never summarises);
- LlamaIndex's ``Memory`` over its SQL chat store (SQLite through aiosqlite).

Results: ``results/turns.json``; the plot: ``turns.png`` (``--plot``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_core as core  # noqa: E402  (the generated conversation and its cached databases)
from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402

from langchain_sessions import SessionMemoryMiddleware  # noqa: E402
from sessions_core import Session  # noqa: E402

VISIBLE_TAIL = 40


class Replier(FakeMessagesListChatModel):
    """Answers every call with a short reply under a new id; binds tools by ignoring them."""

    responses: list[Any] = [AIMessage("ok")]

    def bind_tools(self, tools: Any, **kwargs: Any) -> Replier:
        return self

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("Noted.", id=f"r-{uuid.uuid4().hex}"))])

    @property
    def _llm_type(self) -> str:
        return "bench-replier"


def turn_input(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"And what about point {i}?", id=f"q-{uuid.uuid4().hex}")]}


class Turns:
    """The turns to time (``count``, after one warm-up) and, after each, one turn of the same
    framework's agent without memory: both share the machine's noise, and the memory's overhead
    is the difference of their medians."""

    def __init__(self, count: int, framework: str) -> None:
        self.count = count
        self.framework = framework
        self.bare_ms: list[float] = []
        self._agent = create_agent(Replier(), tools=[]) if framework == "langchain" else llama_agent()
        self._warm = False

    def bare(self, i: int) -> None:
        """One timed turn without memory (LangChain, ``invoke``)."""
        if not self._warm:
            self._agent.invoke(turn_input(-1), {})
            self._warm = True
        started = time.perf_counter()
        self._agent.invoke(turn_input(i), {})
        self.bare_ms.append((time.perf_counter() - started) * 1000)

    async def abare(self, i: int) -> None:
        """One timed turn without memory (LangChain's ``ainvoke``, LlamaIndex's ``run``)."""

        async def turn(j: int) -> None:
            if self.framework == "langchain":
                await self._agent.ainvoke(turn_input(j), {})
            else:
                await self._agent.run(user_msg=f"And what about point {j}?")

        if not self._warm:
            await turn(-1)
            self._warm = True
        started = time.perf_counter()
        await turn(i)
        self.bare_ms.append((time.perf_counter() - started) * 1000)


def median_turn(agent: Any, config: dict[str, Any], turns: Turns) -> float:
    agent.invoke(turn_input(-1), config)  # warm-up: first-use work is not a turn's
    times = []
    for i in range(turns.count):
        started = time.perf_counter()
        agent.invoke(turn_input(i), config)
        times.append(time.perf_counter() - started)
        turns.bare(i)
    return statistics.median(times) * 1000


def stored_database(n: int, tmp: Path) -> tuple[Path, dict[str, Any]]:
    cached, meta = core.cached_db(n, label=f"{n:,}-message database")
    path = tmp / f"turns-{n}.db"
    shutil.copyfile(cached, path)
    return path, meta


def compact_middle(path: Path) -> str:
    """One overlay over all but the first three and about the last ``VISIBLE_TAIL`` messages,
    its end before a user message (so no tool call is cut from its result)."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT id, role FROM session_messages WHERE session_id = ? ORDER BY depth", (core.SESSION,)
    ).fetchall()
    conn.close()
    end = len(rows) - VISIBLE_TAIL
    while end > 4 and rows[end][1] != "user":
        end -= 1
    session = Session(str(path)).for_session(core.SESSION)
    session.add_compaction(
        "Summary: the user and the assistant went through the project plan.", rows[3][0], rows[end - 1][0]
    )
    visible = len(session.get_history())
    session.store.close()
    return f"{visible} messages visible"


def ours(path: Path, turns: Turns, *, use_async: bool = False) -> float:
    session = Session(str(path)).for_session(core.SESSION).with_context("notes", description="Notes", max_tokens=500)
    agent = create_agent(Replier(), tools=[], middleware=[SessionMemoryMiddleware(session, compact_at=None)])
    config = {"configurable": {"session_id": core.SESSION}}
    try:
        return amedian_turn(agent, config, turns) if use_async else median_turn(agent, config, turns)
    finally:
        session.store.close()


def amedian_turn(agent: Any, config: dict[str, Any], turns: Turns) -> float:
    import asyncio

    async def run() -> float:
        await agent.ainvoke(turn_input(-1), config)
        times = []
        for i in range(turns.count):
            started = time.perf_counter()
            await agent.ainvoke(turn_input(i), config)
            times.append(time.perf_counter() - started)
            await turns.abare(i)
        return statistics.median(times) * 1000

    return asyncio.run(run())


def as_langchain(messages: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for message in messages:
        text = " ".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")
        if message["role"] == "user":
            out.append(HumanMessage(text, id=message["id"]))
        elif message["role"] == "tool":
            part = message["parts"][0]
            out.append(ToolMessage(json.dumps(part["output"]), tool_call_id=part["toolCallId"], id=message["id"]))
        else:
            calls = [
                {"name": p["toolName"], "args": p["input"], "id": p["toolCallId"]}
                for p in message["parts"]
                if p["type"] == "tool-call"
            ]
            out.append(AIMessage(text, tool_calls=calls, id=message["id"]))
    return out


def langgraph(n: int, tmp: Path, turns: Turns, *, summarization: bool) -> float:
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp / f"checkpoints-{n}-{summarization}.db", check_same_thread=False)
    middleware = [SummarizationMiddleware(Replier(), trigger=("messages", n * 10))] if summarization else []
    agent = create_agent(Replier(), tools=[], middleware=middleware, checkpointer=SqliteSaver(conn))
    config = {"configurable": {"thread_id": "bench"}}
    agent.update_state(config, {"messages": as_langchain(core.take(core.ChatGenerator(core.SEED), n))})
    try:
        return median_turn(agent, config, turns)
    finally:
        conn.close()


# -- PostgreSQL ----------------------------------------------------------------------------------

POSTGRES_URL = os.environ.get("SESSIONS_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def ours_postgres(n: int, turns: Turns) -> tuple[float, float, str]:
    """The middleware over ``PostgresStore``: uncompacted and compacted, in a schema of its own."""
    import psycopg

    from sessions_core.stores.postgres import PostgresStore

    schema = f"bench_turns_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        session = Session(store).for_session(core.SESSION).with_context("notes", description="Notes", max_tokens=500)
        messages = core.take(core.ChatGenerator(core.SEED), n)
        for start in range(0, n, 1000):
            session.append_messages(messages[start : start + 1000])

        def turn() -> float:
            agent = create_agent(Replier(), tools=[], middleware=[SessionMemoryMiddleware(session, compact_at=None)])
            return median_turn(agent, {"configurable": {"session_id": core.SESSION}}, turns)

        uncompacted = turn()
        roles = [(m.id, m.role) for m in session.get_history()]
        end = len(roles) - VISIBLE_TAIL
        while end > 4 and roles[end][1] != "user":
            end -= 1
        session.add_compaction("Summary: the project plan.", roles[3][0], roles[end - 1][0])
        note = f"{len(session.get_history())} messages visible"
        return uncompacted, turn(), note
    finally:
        store.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def langgraph_postgres(n: int, turns: Turns, *, summarization: bool) -> float:
    import psycopg
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.postgres import PostgresSaver

    schema = f"bench_saver_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with psycopg.connect(
            POSTGRES_URL, autocommit=True, prepare_threshold=0, options=f"-c search_path={schema}"
        ) as conn:
            saver = PostgresSaver(conn)
            saver.setup()
            middleware = [SummarizationMiddleware(Replier(), trigger=("messages", n * 10))] if summarization else []
            agent = create_agent(Replier(), tools=[], middleware=middleware, checkpointer=saver)
            config = {"configurable": {"thread_id": "bench"}}
            agent.update_state(config, {"messages": as_langchain(core.take(core.ChatGenerator(core.SEED), n))})
            return median_turn(agent, config, turns)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


# -- LlamaIndex --------------------------------------------------------------------------------


def llama_agent() -> Any:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    llm = MockFunctionCallingLLM(
        response_generator=lambda messages, **kwargs: ChatMessage(role="assistant", content="Noted.")
    )
    return FunctionAgent(tools=[], llm=llm)


async def llama_turns(agent: Any, memory: Any, turns: Turns) -> float:
    async def turn(i: int) -> None:
        await agent.run(user_msg=f"And what about point {i}?", memory=memory)

    await turn(-1)
    times = []
    for i in range(turns.count):
        started = time.perf_counter()
        await turn(i)
        times.append(time.perf_counter() - started)
        await turns.abare(i)
    return statistics.median(times) * 1000


def ours_llamaindex(path: Path, turns: Turns) -> float:
    import asyncio

    from llamaindex_sessions import SessionMemory

    session = Session(str(path)).for_session(core.SESSION).with_context("notes", description="Notes", max_tokens=500)
    memory = SessionMemory(session=session, compaction=False)
    try:
        return asyncio.run(llama_turns(llama_agent(), memory, turns))
    finally:
        session.store.close()


def llamaindex_memory(n: int, tmp: Path, turns: Turns) -> float:
    """LlamaIndex's ``Memory`` over its SQL chat store (SQLite through aiosqlite)."""
    import asyncio

    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import Memory

    from llamaindex_sessions.conversion import to_chat_messages
    from sessions_core import SessionMessage

    async def run() -> float:
        memory = Memory.from_defaults(
            session_id="bench", token_limit=30_000, async_database_uri=f"sqlite+aiosqlite:///{tmp}/llama-{n}.db"
        )
        stored = [SessionMessage.model_validate(m) for m in core.take(core.ChatGenerator(core.SEED), n)]
        chat = [ChatMessage(role=m.role, content=m.content) for m in to_chat_messages(stored)]
        for start in range(0, len(chat), 1000):
            await memory.aput_messages(chat[start : start + 1000])
        return await llama_turns(llama_agent(), memory, turns)

    return asyncio.run(run())


def plot(results: list[dict[str, Any]], target: Path) -> None:
    """Per-turn overhead against stored messages, one line a subject, both axes logarithmic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 5.5), dpi=110)
    subjects = list(dict.fromkeys(r["subject"] for r in results))
    colours = plt.cm.tab20.colors
    for index, subject in enumerate(subjects):
        points = [(r["messages"], max(r["overhead_ms"], 0.05)) for r in results if r["subject"] == subject]
        ours_ = subject.startswith("session-memory")
        axes.plot(
            *zip(*points),
            marker="o" if ours_ else "s",
            linestyle="-" if ours_ else "--",
            color=colours[(2 * index) % 20 + (index * 2 >= 20)],
            label=subject,
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("stored messages")
    axes.set_ylabel("memory's overhead per agent turn (ms)")
    axes.set_title("What memory costs an agent per turn")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(target)


def _sqlite_subject(run: Any, *, compacted: bool) -> Any:
    def measure(n: int, tmp: Path, turns: Turns) -> tuple[float, str]:
        path, _meta = stored_database(n, tmp)
        note = compact_middle(path) if compacted else ""
        return run(path, turns), note

    return measure


SUBJECTS: dict[str, tuple[str, Any]] = {
    # name: (framework, measure(n, tmp, turns) -> (turn ms, note))
    "session-memory middleware, uncompacted": ("langchain", _sqlite_subject(ours, compacted=False)),
    "session-memory middleware, compacted": ("langchain", _sqlite_subject(ours, compacted=True)),
    "session-memory middleware, compacted, async": (
        "langchain",
        _sqlite_subject(lambda path, turns: ours(path, turns, use_async=True), compacted=True),
    ),
    "session-memory SessionMemory, compacted": ("llamaindex", _sqlite_subject(ours_llamaindex, compacted=True)),
    "session-memory middleware on PostgreSQL, uncompacted": (
        "langchain",
        lambda n, tmp, turns: (ours_postgres(n, turns)[0], ""),
    ),
    "session-memory middleware on PostgreSQL, compacted": (
        "langchain",
        lambda n, tmp, turns: ours_postgres(n, turns)[1:],
    ),
    "LangGraph PostgresSaver": (
        "langchain",
        lambda n, tmp, turns: (langgraph_postgres(n, turns, summarization=False), ""),
    ),
    "LangGraph PostgresSaver + SummarizationMiddleware": (
        "langchain",
        lambda n, tmp, turns: (langgraph_postgres(n, turns, summarization=True), ""),
    ),
    "LangGraph SqliteSaver": ("langchain", lambda n, tmp, turns: (langgraph(n, tmp, turns, summarization=False), "")),
    "LangGraph SqliteSaver + SummarizationMiddleware": (
        "langchain",
        lambda n, tmp, turns: (langgraph(n, tmp, turns, summarization=True), ""),
    ),
    "LlamaIndex Memory (SQL chat store)": ("llamaindex", lambda n, tmp, turns: (llamaindex_memory(n, tmp, turns), "")),
}


def measure_case(subject: str, n: int, count: int) -> dict[str, Any]:
    """One figure, in this (fresh) process: the subject's turn and, after each, the same agent's
    turn without memory."""
    framework, measure = SUBJECTS[subject]
    turns = Turns(count, framework)
    with tempfile.TemporaryDirectory(prefix="bench_turns_") as name:
        total, note = measure(n, Path(name), turns)
    floor = statistics.median(turns.bare_ms)
    return {
        "subject": subject,
        "framework": framework,
        "messages": n,
        "turn_ms": total,
        "floor_ms": floor,
        "overhead_ms": total - floor,
        "note": note,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--peers-up-to", type=int, default=10_000)
    parser.add_argument("--uncompacted-up-to", type=int, default=100_000)
    parser.add_argument("--postgres-up-to", type=int, default=10_000, help="0: no PostgreSQL subjects")
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "turns.json")
    parser.add_argument("--plot", type=Path, default=HERE / "turns.png", help="where the plot goes (needs matplotlib)")
    parser.add_argument("--replot", action="store_true", help="only draw the plot again from --out")
    parser.add_argument("--case", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(measure_case(args.case[0], int(args.case[1]), args.turns)))
        return 0
    if args.replot:
        plot(json.loads(args.out.read_text())["results"], args.plot)
        return 0
    sizes = [int(size) for size in args.sizes.split(",")]
    print(
        "per-turn overhead of memory, ms (each figure in a fresh process, less the same agent's turn"
        " without memory there)"
    )
    results: list[dict[str, Any]] = []
    for n in sizes:
        core.cached_db(n, label=f"{n:,}-message database")  # built once, before the cases copy it
        for subject in SUBJECTS:
            if (
                ("uncompacted" in subject and n > args.uncompacted_up_to)
                or ("PostgreSQL" in subject or "PostgresSaver" in subject)
                and n > args.postgres_up_to
                or (not subject.startswith("session-memory") and n > args.peers_up_to)
            ):
                continue
            done = subprocess.run(
                [sys.executable, __file__, "--turns", str(args.turns), "--case", subject, str(n)],
                check=True,
                capture_output=True,
                text=True,
            )
            figure = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(figure)
            print(
                f"  {subject:52s} {n:>9,}  {figure['overhead_ms']:9.2f}  (floor {figure['floor_ms']:.2f})"
                f"  {figure['note']}",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.plot is not None:
        plot(results, args.plot)
    args.out.write_text(
        json.dumps({"turns": args.turns, "results": results, "load_average": os.getloadavg()}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
