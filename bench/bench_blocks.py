"""Rendering many context blocks: 10,000 writable blocks of one session, on SQLite and PostgreSQL.

Run ``python bench/bench_blocks.py`` (``--blocks N`` to change the count; PostgreSQL from
``SESSIONS_TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``, in a
schema made for the run and dropped after it). Each figure is the median of ``--repeat`` runs
on a fresh ``Session`` over the same store: ``render`` is the first ``freeze_system_prompt()``
(every block read from the store and rendered), ``for_run`` is ``system_prompt_for_run()``
(the frozen prompt, then every block read again to see whether one changed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sessions_core import Session, SqliteStore

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def _session(store, count: int) -> Session:
    session = Session(store).for_session("bench-blocks")
    for number in range(count):
        session.with_context(f"block-{number:05d}", max_tokens=200)
    return session


def _fill(store, count: int) -> None:
    for number in range(count):
        store.set_block("bench-blocks", f"block-{number:05d}", f"note {number}: the user prefers short answers")


def _median(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(store, count: int, repeat: int) -> dict[str, float]:
    _fill(store, count)
    render = _median(lambda: _session(store, count).freeze_system_prompt(), repeat)

    def for_run() -> None:
        session = _session(store, count)
        session.freeze_system_prompt()
        start = time.perf_counter()
        session.system_prompt_for_run()
        for_run.elapsed = time.perf_counter() - start  # type: ignore[attr-defined]

    times = []
    for _ in range(repeat):
        for_run()
        times.append(for_run.elapsed)  # type: ignore[attr-defined]
    return {"render_s": round(render, 3), "for_run_s": round(statistics.median(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        store = SqliteStore(os.path.join(directory, "blocks.db"))
        try:
            figures["sqlite"] = measure(store, args.blocks, args.repeat)
        finally:
            store.close()
    url = os.environ.get("SESSIONS_TEST_POSTGRES_URL", DEFAULT_POSTGRES)
    try:
        import psycopg

        from sessions_core import PostgresStore
    except ImportError:
        print("PostgreSQL skipped: psycopg is not installed", file=sys.stderr)
    else:
        schema = f"bench_blocks_{uuid.uuid4().hex[:8]}"
        store = PostgresStore(url, schema=schema)
        try:
            figures["postgres"] = measure(store, args.blocks, args.repeat)
        finally:
            store.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        for name in ("render_s", "for_run_s"):
            figures["postgres"][name.replace("_s", "_vs_sqlite")] = round(
                figures["postgres"][name] / figures["sqlite"][name], 1
            )
    print(f"{args.blocks:,} context blocks, median of {args.repeat}")
    for backend, row in figures.items():
        print(f"  {backend:9} " + "  ".join(f"{key} {value}" for key, value in row.items()))
    if args.json:
        args.json.write_text(json.dumps({"blocks": args.blocks, **figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
