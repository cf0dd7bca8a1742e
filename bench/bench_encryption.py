"""Encryption at rest (issue 32): what SQLCipher costs an append and a full-history read.

Run ``python bench/bench_encryption.py`` (``--messages 2000 --history 10000 --rounds 9``). Two
SQLite files in one run, a plain one and one opened with ``key=`` (a passphrase), both WAL with
``synchronous=NORMAL``; rounds alternate between them so that the machine's noise hits both
alike, and each figure is the median round:

- append one by one: ``--messages`` ``Session.append_message`` calls on a new session, the two
  stores taking turns every 50 messages (one store's whole run would meet other noise);
- append as a batch: one ``Session.append_messages`` of ``--messages`` messages;
- full-history read, warm: ``get_history()`` of a ``--history``-message session, read once before
  on the open store;
- full-history read, cold: the same on a store opened afresh (the open, which runs the key
  derivation, is not timed; every page read is then decrypted).

Results: ``results/encryption.json``. The target is within 1.3x of the plain file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessions_core import Session, SqliteStore

HERE = Path(__file__).resolve().parent
KEY = "bench passphrase: correct horse battery staple"
TARGET = 1.3
CHUNK = 50  # messages appended to one store before the other takes its turn
WORDS = (
    "the user asked about deploying the service to the cluster and the database migration failed with a"
    " timeout so we retried the job after checking the connection pool settings and the logs of each worker"
).split()


def text(rng: random.Random) -> str:
    """A chat turn of 20 to 80 words."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80)))


def messages(count: int, tag: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {"id": f"{tag}-{i}", "role": ("user", "assistant")[i % 2], "parts": [{"type": "text", "text": text(rng)}]}
        for i in range(count)
    ]


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def append_one_by_one(stores: dict[str, SqliteStore], batch: list[dict[str, Any]], tag: str) -> dict[str, float]:
    """µs per ``append_message`` on each store, the stores taking turns every ``CHUNK`` messages
    so that a burst of the machine's noise falls on both alike rather than on one store's run."""
    sessions = {kind: Session(store).for_session(f"one-{tag}") for kind, store in stores.items()}
    spent = dict.fromkeys(stores, 0.0)
    for start in range(0, len(batch), CHUNK):
        chunk = batch[start : start + CHUNK]
        kinds = list(sessions) if start // CHUNK % 2 == 0 else list(sessions)[::-1]
        for kind in kinds:
            started = time.perf_counter()
            for message in chunk:
                sessions[kind].append_message(message)
            spent[kind] += time.perf_counter() - started
    return {kind: seconds / len(batch) * 1e6 for kind, seconds in spent.items()}


def append_batch(store: SqliteStore, batch: list[dict[str, Any]], tag: str) -> float:
    session = Session(store).for_session(f"batch-{tag}")
    return timed(lambda: session.append_messages(batch)) / len(batch) * 1e6


def read_warm(store: SqliteStore) -> float:
    session = Session(store).for_session("long")
    session.get_history()  # what the page cache can hold of it is in
    return timed(session.get_history) * 1e3


def read_cold(path: Path, key: str | None) -> float:
    store = SqliteStore(path, key=key)
    store.schema_version()  # opened (and the key derived) before the clock starts
    try:
        return timed(Session(store).for_session("long").get_history) * 1e3
    finally:
        store.close()


def opened(paths: dict[str, Path], keys: dict[str, str | None]) -> dict[str, SqliteStore]:
    """The stores, each opened (and its key derived, about 95 ms with a passphrase) before any
    clock starts: the open is paid once per store, not by the appends the next round times."""
    stores = {kind: SqliteStore(paths[kind], key=keys[kind]) for kind in paths}
    for store in stores.values():
        store.schema_version()
    return stores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--history", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "encryption.json")
    args = parser.parse_args(argv)
    figures = ("append one by one (µs/message)", "append batch (µs/message)", "read warm (ms)", "read cold (ms)")
    runs: dict[str, dict[str, list[float]]] = {"plain": {f: [] for f in figures}, "encrypted": {f: [] for f in figures}}
    with tempfile.TemporaryDirectory(prefix="bench_encryption_") as name:
        paths = {"plain": Path(name) / "plain.db", "encrypted": Path(name) / "encrypted.db"}
        keys = {"plain": None, "encrypted": KEY}
        stores = opened(paths, keys)
        long = messages(args.history, "long", seed=1)
        for store in stores.values():
            Session(store).for_session("long").append_messages(long)
        for r in range(args.rounds):
            batch = messages(args.messages, f"r{r}", seed=100 + r)
            kinds = list(stores) if r % 2 == 0 else list(stores)[::-1]
            for kind, micros in append_one_by_one({kind: stores[kind] for kind in kinds}, batch, f"r{r}").items():
                runs[kind][figures[0]].append(micros)
            for kind in kinds:
                store, bucket = stores[kind], runs[kind]
                bucket[figures[1]].append(append_batch(store, batch, f"r{r}"))
                bucket[figures[2]].append(read_warm(store))
            for kind in kinds:  # with every store closed, so that a cold read finds no page cached
                stores[kind].close()
            for kind in kinds:
                runs[kind][figures[3]].append(read_cold(paths[kind], keys[kind]))
            stores = opened(paths, keys)
        sizes = {kind: os.path.getsize(path) for kind, path in paths.items()}
        for store in stores.values():
            store.close()
    ratios = {f: statistics.median(runs["encrypted"][f]) / statistics.median(runs["plain"][f]) for f in figures}
    print(f"{args.messages} messages appended, a {args.history}-message history read; median of {args.rounds} rounds")
    print(f"{'figure':34} {'plain':>10} {'encrypted':>10} {'ratio':>7}")
    for figure in figures:
        plain, encrypted = (statistics.median(runs[kind][figure]) for kind in ("plain", "encrypted"))
        verdict = "PASS" if ratios[figure] <= TARGET else "FAIL"
        print(f"{figure:34} {plain:10.2f} {encrypted:10.2f} {ratios[figure]:6.2f}x  {verdict}")
    print(f"file bytes: plain {sizes['plain']:,}, encrypted {sizes['encrypted']:,}")
    results = {
        "messages": args.messages,
        "history": args.history,
        "rounds": args.rounds,
        "runs": runs,
        "ratios": ratios,
        "file_bytes": sizes,
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0 if all(ratio <= TARGET for ratio in ratios.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
