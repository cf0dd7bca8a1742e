"""PostgreSQL under concurrent writers (issue 20): appends per second with 1, 2, 4 and 8 processes.

Run ``python bench/bench_pg_writers.py`` (``--appends 300``, ``--url``). Each process opens its own
``PostgresStore`` and appends ``--appends`` messages one by one (a transaction each), either each
to a session of its own or all to one session. The figure is the total of appends over the wall
time from the moment every process is ready to the last one's end. To one session, the appends
are serialised by the session's advisory lock: the bench checks that every message is stored
once and that they form one chain (each under the one before). Results: ``results/pg_writers.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
URL = os.environ.get("SESSIONS_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def writer(url: str, schema: str, session_id: str, appends: int, tag: str, ready: Any, go: Any, out: Any) -> None:
    from sessions_core import Session
    from sessions_core.stores.postgres import PostgresStore

    store = PostgresStore(url, schema=schema, min_size=1, max_size=1)
    session = Session(store).for_session(session_id)
    text = "a message of an ordinary length, about the weather in Lisbon in May and what to pack " * 2
    session.get_history()  # connected, schema ready
    ready.release()
    go.wait()
    started = time.perf_counter()
    for i in range(appends):
        session.append_message(
            {
                "id": f"{tag}-{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "parts": [{"type": "text", "text": text}],
            }
        )
    out.put(time.perf_counter() - started)
    store.close()


def run(url: str, schema: str, processes: int, appends: int, one_session: bool) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(
            target=writer, args=(url, schema, "shared" if one_session else f"own-{p}", appends, f"p{p}", ready, go, out)
        )
        for p in range(processes)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.acquire()
    started = time.perf_counter()
    go.set()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    per_process = [out.get() for _ in workers]
    return {
        "processes": processes,
        "one_session": one_session,
        "appends": processes * appends,
        "seconds": elapsed,
        "appends_per_s": processes * appends / elapsed,
        "per_process_s": per_process,
    }


def check_one_chain(url: str, schema: str, expected: int) -> None:
    from sessions_core import Session
    from sessions_core.stores.postgres import PostgresStore

    store = PostgresStore(url, schema=schema)
    history = Session(store).for_session("shared").get_history()
    store.close()
    ids = [m.id for m in history]
    assert len(ids) == expected == len(set(ids)), (len(ids), expected)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--url", default=URL)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "pg_writers.json")
    args = parser.parse_args(argv)
    import psycopg

    from sessions_core.stores.postgres import PostgresStore

    results = []
    print(f"PostgreSQL, {args.appends} appends per process, a transaction each (appends/s, all processes together)")
    for one_session in (False, True):
        base = None
        for processes in (1, 2, 4, 8):
            schema = f"bench_writers_{uuid.uuid4().hex[:8]}"
            PostgresStore(args.url, schema=schema).setup()
            try:
                figures = run(args.url, schema, processes, args.appends, one_session)
                if one_session:
                    check_one_chain(args.url, schema, processes * args.appends)
            finally:
                with psycopg.connect(args.url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            base = base or figures["appends_per_s"]
            figures["speedup"] = figures["appends_per_s"] / base
            results.append(figures)
            where = "one session" if one_session else "own sessions"
            print(
                f"  {processes} writer(s), {where:12s} {figures['appends_per_s']:8.0f}/s"
                f"  ({figures['speedup']:.2f}x one process)",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "appends_per_process": args.appends,
                "cpus": os.cpu_count(),
                "results": results,
                "load_average": os.getloadavg(),
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
