"""Context-block versions (issue 21): what keeping every write costs a ``set_context`` write, and
whether reading the current block grows with the versions kept.

Run ``python bench/bench_versions.py`` (``--writes 2000``). On a SQLite file, each round times
``--writes`` ``set_context`` calls through the model's tool, on the store as shipped (each write
also records a version) and on the same store with versions left out (the write as it was before
versions); rounds alternate between the two and the figure is the median round. Then it reads
the current block (the blocks loaded afresh, as a new run does) with 1 and with 10,000 versions
kept. Results: ``results/versions.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

from sessions_core import Session, SqliteStore  # noqa: E402
from sessions_core.stores.sqlite import SqliteStore as _Sqlite  # noqa: E402

UNVERSIONED_SET_BLOCK = """
    INSERT INTO context_blocks (session_id, label, updated_at, content) VALUES (:s, :label, :now, :content)
    ON CONFLICT (session_id, label) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at
"""
"""The block write before versions (it leaves the version column, so no version is recorded)."""


BEFORE_VERSIONS_TABLE = """
    CREATE TABLE IF NOT EXISTS context_blocks (
        session_id TEXT NOT NULL, label TEXT NOT NULL, updated_at INTEGER NOT NULL, content TEXT NOT NULL,
        PRIMARY KEY (session_id, label)
    )
"""
"""The block table as it was before versions (schema 7)."""


class WithoutVersions(_Sqlite):
    """The store with a block write as it was before versions: the block row only, in the block
    table of that schema."""

    def setup(self, *args: Any, **kwargs: Any) -> None:
        super().setup(*args, **kwargs)
        self._execute(BEFORE_VERSIONS_TABLE, {})

    def write_block(
        self,
        session_id: str,
        label: str,
        content: str,
        *,
        key: str | None = None,
        at_us: int | None = None,
        **_ignored: Any,
    ) -> None:
        params = {"s": session_id, "label": label, "now": at_us or time.time_ns() // 1000, "content": content}
        self._execute(UNVERSIONED_SET_BLOCK, params)


def writes(store: Any, n: int, tag: str) -> float:
    session = Session(store).for_session(f"bench-{tag}").with_context("memory", description="Facts", max_tokens=4000)
    set_context = {tool.name: tool for tool in session.tools()}["set_context"]
    started = time.perf_counter()
    for i in range(n):
        set_context.invoke({"label": "memory", "content": f"The user likes tea; fact number {i}."})
    return (time.perf_counter() - started) / n * 1e6


def current_read(path: Path, versions: int) -> float:
    store = SqliteStore(path)
    session = Session(store).for_session(f"read-{versions}").with_context("memory", description="Facts")
    for i in range(versions):
        store.write_block(session.session_id, "memory", f"fact {i}")
    times = []
    for _ in range(200):
        fresh = Session(store).for_session(session.session_id).with_context("memory", description="Facts")
        started = time.perf_counter()
        fresh.get_context_block("memory")
        times.append(time.perf_counter() - started)
    store.close()
    return statistics.median(times) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "versions.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_versions_") as name:
        tmp = Path(name)
        versioned, plain = SqliteStore(tmp / "versioned.db"), WithoutVersions(tmp / "plain.db")
        ours, before = [], []
        for r in range(args.rounds):
            pair = [(ours, versioned), (before, plain)]
            for bucket, store in pair if r % 2 == 0 else pair[::-1]:
                bucket.append(writes(store, args.writes, f"{r}"))
        versioned.close()
        plain.close()
        one, many = current_read(tmp / "read.db", 1), current_read(tmp / "read.db", 10_000)
    write_ratio = statistics.median(ours) / statistics.median(before)
    print(
        f"set_context write: {statistics.median(ours):.0f} µs with versions, {statistics.median(before):.0f} µs"
        f" without: {write_ratio:.2f}x (target <= 1.3x: {'PASS' if write_ratio <= 1.3 else 'FAIL'})"
    )
    print(f"reading the current block: {one:.0f} µs with 1 version, {many:.0f} µs with 10,000 ({many / one:.2f}x)")
    results = {
        "writes": args.writes,
        "rounds": args.rounds,
        "write_us_with": ours,
        "write_us_without": before,
        "write_ratio": write_ratio,
        "read_us_1_version": one,
        "read_us_10000_versions": many,
        "load_average": os.getloadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if write_ratio <= 1.3 else 1


if __name__ == "__main__":
    sys.exit(main())
