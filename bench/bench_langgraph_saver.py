"""``SessionSaver`` against LangGraph's own savers (issue 33): ``put`` and ``get_tuple`` with
1k, 10k and 100k checkpoints stored, on SQLite (vs ``SqliteSaver``) and PostgreSQL (vs
``PostgresSaver``), in one run.

Run ``python bench/bench_langgraph_saver.py`` (``--sizes 1000,10000,100000``, ``--ops 300``;
``--no-postgres`` leaves PostgreSQL out; the server is ``SESSIONS_TEST_POSTGRES_URL``). Each
saver gets its own database (SQLite: a file; PostgreSQL: a schema of its own) with the same
durability: WAL with ``synchronous=NORMAL`` on SQLite (``SqliteSaver``'s connection is given
the pragmas our store sets), autocommit on PostgreSQL. The databases are filled, by each
saver's own ``put``, with threads of 10 checkpoints of an agent's state (4 chat messages); at
each size, each of 5 rounds times, on both savers, ``--ops`` ``get_tuple`` of the latest
checkpoint of a random thread (with 2 pending writes) and ``--ops`` puts (each the next
checkpoint of a random thread), the two savers taking turns every 25 calls; the figure is the
median round, per call. Ratio: ours / theirs (at most 1.0 is the target). Results:
``results/langgraph_saver.json``.

``--delta 10,30,100`` measures instead ``get_delta_channel_history`` (what a graph with a
``DeltaChannel`` reads to rebuild its value) over that many ancestors: ours, the base class's
walk on our saver, and LangGraph's saver's own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint  # noqa: E402
from langgraph.checkpoint.base.id import uuid6  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from langchain_sessions import SessionSaver  # noqa: E402
from sessions_core import SqliteStore  # noqa: E402

PER_THREAD = 10
ROUNDS = 5
TURN = 25
"""Calls one saver makes before the other takes its turn."""
STATE = {
    "messages": [
        HumanMessage("What is the capital of France?", id="m1"),
        AIMessage("Paris is the capital of France. " * 4, id="m2"),
        HumanMessage("And how many people live there?", id="m3"),
        AIMessage("About 2.1 million people live in the city proper. " * 3, id="m4"),
    ]
}


class Workload:
    """The threads of one saver and their latest checkpoint configs."""

    def __init__(self, saver: BaseCheckpointSaver, prefix: str) -> None:
        self.saver = saver
        self.prefix = prefix
        self.latest: dict[str, dict[str, Any]] = {}
        self.count = 0

    def put(self, thread_id: str) -> None:
        parent = self.latest.get(thread_id)
        config = parent or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=-1))
        checkpoint["channel_values"] = dict(STATE)
        checkpoint["channel_versions"] = {"messages": self.saver.get_next_version(None, None)}
        metadata = {"source": "loop", "step": self.count, "parents": {}, "run_id": str(uuid.uuid4())}
        stored = self.saver.put(config, checkpoint, metadata, dict(checkpoint["channel_versions"]))  # type: ignore[arg-type]
        self.latest[thread_id] = stored
        self.count += 1

    def fill(self, total: int) -> None:
        """Put checkpoints until ``total`` are stored: threads of ``PER_THREAD``, each latest with 2 writes."""
        while self.count < total:
            thread_id = f"{self.prefix}-{self.count // PER_THREAD}"
            self.put(thread_id)
            if self.count % PER_THREAD == 0:
                self.saver.put_writes(self.latest[thread_id], [("messages", "w1"), ("branch:to:agent", None)], "task-1")

    def threads(self) -> list[str]:
        return list(self.latest)


def _time(calls: Callable[[], None], ops: int) -> float:
    start = time.perf_counter()
    calls()
    return (time.perf_counter() - start) / ops


def measure(ours: Workload, theirs: Workload, ops: int, seed: int) -> dict[str, Any]:
    """Per call, the median of ``ROUNDS`` rounds; in a round both savers make the same ``ops``
    calls, taking turns every ``TURN`` calls (who goes first alternates), so that a burst of the
    machine's noise falls on both rather than on one saver's whole round."""
    rng = random.Random(seed)
    figures: dict[str, dict[str, list[float]]] = {
        "put": {"ours": [], "theirs": []},
        "get_tuple": {"ours": [], "theirs": []},
    }
    loads = {"ours": ours, "theirs": theirs}
    for _round in range(ROUNDS):
        picks = [rng.randrange(len(ours.latest)) for _ in range(ops)]
        chosen = {name: [load.threads()[i % len(load.threads())] for i in picks] for name, load in loads.items()}
        for op in ("get_tuple", "put"):
            spent = dict.fromkeys(loads, 0.0)
            for start in range(0, ops, TURN):
                order = list(loads) if start // TURN % 2 == 0 else list(loads)[::-1]
                for name in order:
                    load, threads = loads[name], chosen[name][start : start + TURN]
                    began = time.perf_counter()
                    if op == "get_tuple":
                        for thread_id in threads:
                            load.saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
                    else:
                        for thread_id in threads:
                            load.put(thread_id)
                    spent[name] += time.perf_counter() - began
            for name in loads:
                figures[op][name].append(spent[name] / ops)
    result = {}
    for op, by in figures.items():
        ours_us, theirs_us = (statistics.median(by[k]) * 1e6 for k in ("ours", "theirs"))
        result[op] = {
            "ours_us": round(ours_us, 1),
            "theirs_us": round(theirs_us, 1),
            "ratio": round(ours_us / theirs_us, 2),
        }
    return result


def check_same_state(ours: Workload, theirs: Workload) -> None:
    """Both savers give back the same state and writes for a thread's latest checkpoint."""
    a = ours.saver.get_tuple({"configurable": {"thread_id": f"{ours.prefix}-0", "checkpoint_ns": ""}})
    b = theirs.saver.get_tuple({"configurable": {"thread_id": f"{theirs.prefix}-0", "checkpoint_ns": ""}})
    assert a is not None and b is not None
    assert a.checkpoint["channel_values"] == b.checkpoint["channel_values"] == STATE
    assert [w[1:] for w in a.pending_writes or []] == [w[1:] for w in b.pending_writes or []]


@contextmanager
def sqlite_pair(folder: Path) -> Iterator[tuple[BaseCheckpointSaver, BaseCheckpointSaver]]:
    ours = SessionSaver(SqliteStore(folder / "ours.db"))
    conn = sqlite3.connect(folder / "theirs.db", check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    theirs = SqliteSaver(conn)
    try:
        yield ours, theirs
    finally:
        ours.manager.store.close()
        conn.close()


@contextmanager
def postgres_pair(url: str) -> Iterator[tuple[BaseCheckpointSaver, BaseCheckpointSaver]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from sessions_core.stores.postgres import PostgresStore

    tag = uuid.uuid4().hex[:8]
    ours_schema, theirs_schema = f"bench_ours_{tag}", f"bench_lg_{tag}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{theirs_schema}"')
    store = PostgresStore(url, schema=ours_schema)
    ours = SessionSaver(store)
    conn = psycopg.connect(
        url, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-csearch_path={theirs_schema}"
    )
    theirs = PostgresSaver(conn)  # type: ignore[arg-type]
    theirs.setup()
    try:
        yield ours, theirs
    finally:
        store.close()
        conn.close()
        with psycopg.connect(url, autocommit=True) as admin:
            for schema in (ours_schema, theirs_schema):
                admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(pair: Any, sizes: list[int], ops: int) -> dict[str, Any]:
    with pair as (ours_saver, theirs_saver):
        ours, theirs = Workload(ours_saver, "t"), Workload(theirs_saver, "t")
        by_size = {}
        for size in sizes:
            for load in (ours, theirs):
                start = time.perf_counter()
                load.fill(size)
                print(
                    f"  filled {type(load.saver).__name__} to {size} in {time.perf_counter() - start:.1f} s",
                    file=sys.stderr,
                )
            check_same_state(ours, theirs)
            by_size[str(size)] = measure(ours, theirs, ops, seed=size)
            print(f"  {size}: {json.dumps(by_size[str(size)])}", file=sys.stderr)
        return by_size


def delta_chain(saver: BaseCheckpointSaver, thread_id: str, depth: int) -> dict[str, Any]:
    """A chain of ``depth + 1`` checkpoints, each with a task's write of one message to
    ``messages``, whose value is stored only at the root (as a ``DeltaChannel`` stores it between
    snapshots); the config of its last checkpoint."""
    parent: str | None = None
    for n in range(depth + 1):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=n))
        checkpoint["channel_values"] = {"messages": [HumanMessage("seed")]} if n == 0 else {"step": n}
        configurable = {"thread_id": thread_id, "checkpoint_ns": "", **({"checkpoint_id": parent} if parent else {})}
        stored = saver.put({"configurable": configurable}, checkpoint, {"source": "loop", "step": n, "parents": {}}, {})
        saver.put_writes(stored, [("messages", [HumanMessage(f"message {n}")])], "task")
        parent = checkpoint["id"]
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": parent}}


def measure_delta(pair: Any, depths: list[int], calls: int = 30) -> dict[str, Any]:
    """``get_delta_channel_history`` of ``messages`` over ``depth`` ancestors: ours, the base
    class's walk (one ``get_tuple`` an ancestor, what a saver without its own method does) on
    our saver, and LangGraph's saver's own; median ms of ``calls``, the three taking turns."""
    found: dict[str, Any] = {}
    with pair as (ours, theirs):
        for depth in depths:
            ours_config = delta_chain(ours, f"delta-{depth}", depth)
            theirs_config = delta_chain(theirs, f"delta-{depth}", depth)
            ways: dict[str, Callable[[], Any]] = {
                "ours": partial(ours.get_delta_channel_history, config=ours_config, channels=["messages"]),
                "base_walk": partial(
                    BaseCheckpointSaver.get_delta_channel_history, ours, config=ours_config, channels=["messages"]
                ),
                "theirs": partial(theirs.get_delta_channel_history, config=theirs_config, channels=["messages"]),
            }
            assert ways["ours"]() == ways["base_walk"]()
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(calls):
                for name, way in ways.items():
                    start = time.perf_counter()
                    way()
                    times[name].append((time.perf_counter() - start) * 1000)
            found[str(depth)] = {name: round(statistics.median(values), 2) for name, values in times.items()}
            print(f"  delta history over {depth} ancestors (ms): {json.dumps(found[str(depth)])}", file=sys.stderr)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--delta", default=None, metavar="DEPTHS", help="only get_delta_channel_history over these numbers of ancestors"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "langgraph_saver.json")
    args = parser.parse_args(argv)
    if args.delta:
        depths = [int(depth) for depth in args.delta.split(",")]
        delta: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as folder:
            delta["sqlite"] = measure_delta(sqlite_pair(Path(folder)), depths)
        if not args.no_postgres:
            url = os.environ.get("SESSIONS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
            delta["postgres"] = measure_delta(postgres_pair(url), depths)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"delta_history_ms": delta}, indent=2) + "\n")
        for backend, by_depth in delta.items():
            for depth, ms in by_depth.items():
                line = f"ours {ms['ours']} ms, base walk {ms['base_walk']} ms, theirs {ms['theirs']} ms"
                print(f"{backend} {depth} ancestors: {line}")
        return 0
    sizes = [int(size) for size in args.sizes.split(",")]
    results: dict[str, Any] = {"sizes": sizes, "ops_per_round": args.ops, "rounds": ROUNDS, "per_thread": PER_THREAD}
    with tempfile.TemporaryDirectory() as folder:
        print("sqlite: SessionSaver vs SqliteSaver", file=sys.stderr)
        results["sqlite"] = run(sqlite_pair(Path(folder)), sizes, args.ops)
    if not args.no_postgres:
        url = os.environ.get("SESSIONS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
        print("postgres: SessionSaver vs PostgresSaver", file=sys.stderr)
        results["postgres"] = run(postgres_pair(url), sizes, args.ops)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for backend in ("sqlite", "postgres"):
        for size, ops in results.get(backend, {}).items():
            line = ", ".join(f"{op} {f['ours_us']} vs {f['theirs_us']} us ({f['ratio']}x)" for op, f in ops.items())
            print(f"{backend} {size}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
