"""Reads of a short session on PostgreSQL, in round trips and time: what a chat app pays per turn.

Run ``python bench/bench_pg_reads.py`` (``--messages 10 --calls 300 --rounds 7``), optionally
``--tree /path/to/other/checkout`` to time another version of the library in the same way (run
both, alternating, to compare trees). One ``Session`` of ``--messages`` messages on a schema of
its own (dropped at the end); each figure is the median of ``--rounds`` rounds of ``--calls``
calls, after 50 warm-up calls (psycopg prepares a statement at its fifth use):

- ``get_history()``, and ``get_history(raw=True)``;
- ``get_token_estimate()`` (the compaction threshold check) and ``get_path_length()``.

The server is ``SESSIONS_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
Results: ``results/pg_reads.json`` (with ``--tree``: not written).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

URL = os.environ.get("SESSIONS_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
RESULTS = Path(__file__).parent / "results" / "pg_reads.json"


def _timed(call: Callable[[], Any], calls: int, rounds: int) -> float:
    """Median µs per call over ``rounds`` rounds of ``calls`` calls."""
    for _ in range(50):
        call()
    per_round = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(calls):
            call()
        per_round.append((time.perf_counter() - began) / calls * 1e6)
    return statistics.median(per_round)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Reads of a short session on PostgreSQL, in round trips and time.")
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tree", help="a checkout of the project whose library to time instead of this one")
    args = parser.parse_args(argv)
    if args.tree:
        sys.path[:0] = [str(Path(args.tree) / "core"), args.tree]
    import psycopg

    from sessions_core import Session
    from sessions_core.stores.postgres import PostgresStore

    schema = f"bench_reads_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(URL, schema=schema)
    try:
        session = Session(store).for_session("s")
        for n in range(args.messages):
            role = "user" if n % 2 == 0 else "assistant"
            session.append_message({"id": f"m{n}", "role": role, "parts": [{"type": "text", "text": f"message {n}"}]})
        figures = {
            "get_history": _timed(session.get_history, args.calls, args.rounds),
            "get_history_raw": _timed(lambda: session.get_history(raw=True), args.calls, args.rounds),
            "get_token_estimate": _timed(session.get_token_estimate, args.calls, args.rounds),
            "get_path_length": _timed(session.get_path_length, args.calls, args.rounds),
        }
    finally:
        store.close()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # type: ignore[arg-type]  # our own name
    tree = args.tree or str(Path(__file__).resolve().parent.parent)
    for name, value in figures.items():
        print(f"{name:>20}: {value:8.0f} µs  ({tree})")
    if not args.tree:
        RESULTS.parent.mkdir(exist_ok=True)
        report = {"machine": platform.platform(), "python": platform.python_version(), "args": vars(args)}
        RESULTS.write_text(json.dumps({**report, "microseconds": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
