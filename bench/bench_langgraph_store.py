"""``SessionStore`` against LangGraph's own stores (issue 33): ``put`` (single, and a batch of
puts), ``get``, ``search`` (namespace prefix and filter, limit 10) and, ours only, keyword
``search(query=...)``, with 1k, 10k and 100k items stored, on SQLite (vs ``SqliteStore``) and,
with ``SESSIONS_BENCH_PG`` set, PostgreSQL (vs ``PostgresStore``), in one run.

Run ``python bench/bench_langgraph_store.py`` (``--quick``: 1k only; ``--sizes``, ``--ops 300``,
``--batch 100``, ``--out``, ``--no-sqlite``, ``--ttl MINUTES``: both stores built with LangGraph's
``TTLConfig(default_ttl=MINUTES, refresh_on_read=True)``, so that every put carries a TTL and every
get refreshes it). ``SESSIONS_BENCH_PG`` is the server's URL (``1``: the one of
``SESSIONS_TEST_POSTGRES_URL``). Each store gets its own database (SQLite: a file; PostgreSQL:
a schema of its own) with the same durability: WAL with ``synchronous=NORMAL`` on SQLite
(``SqliteStore``'s connection is given the pragmas our store sets), autocommit on PostgreSQL.
Neither has a vector index. Items are LangMem-like memories, ``{"kind": ..., "content":
"<sentence>"}``, the sentences the turns of the LoCoMo conversations (read at run time from
``/work/shared/data/locomo``, ``--data``), spread over 100 users' namespaces ``("memories",
"user-N")``, filled by each store's own ``batch`` of puts. At each size, each of 5 rounds times
``--ops`` calls of each operation on random users, ours and theirs taking turns every 25 calls
(every batch), who goes first alternating; the figure is the median round, per call (a batch:
per batch of ``--batch`` puts). Before the rounds, one keyword search of each user's items,
timed apart (``index_backlog``), indexes what the fill left waiting, so that a round's keyword
searches pay for the round's puts only. Ratio: ours / theirs (at
most 1.0 is the target). ``--ours langgraph`` puts LangGraph's class on both sides (to check
the harness). Results: ``results/langgraph_store.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

from langgraph.store.base import BaseStore, PutOp  # noqa: E402
from langgraph.store.sqlite import SqliteStore  # noqa: E402

USERS = 100
ROUNDS = 5
KINDS = ("Memory", "Preference", "Episode")
DATA = Path("/work/shared/data/locomo")


def sentences(folder: Path) -> list[str]:
    """Every turn's text of the LoCoMo conversations in ``folder``, in order."""
    texts = []
    for path in sorted(folder.glob("conv-*.json")):
        conversation = json.loads(path.read_text())
        numbers = sorted(int(m.group(1)) for k in conversation if (m := re.fullmatch(r"session_(\d+)", k)))
        for number in numbers:
            texts.extend(turn["text"] for turn in conversation[f"session_{number}"] if turn.get("text"))
    if not texts:
        raise SystemExit(f"no LoCoMo conversations in {folder}")
    return texts


class Workload:
    """One store's memories: how many are stored, and their keys by user."""

    def __init__(self, store: BaseStore, texts: list[str]) -> None:
        self.store = store
        self.texts = texts
        self.count = 0
        self.keys: dict[int, list[str]] = {user: [] for user in range(USERS)}

    def next_op(self) -> PutOp:
        index = self.count
        user = index % USERS
        key = f"mem-{index}"
        self.keys[user].append(key)
        self.count += 1
        value = {"kind": KINDS[index % len(KINDS)], "content": self.texts[index % len(self.texts)]}
        return PutOp(("memories", f"user-{user}"), key, value)

    def fill(self, total: int, batch: int = 1000) -> None:
        while self.count < total:
            self.store.batch([self.next_op() for _ in range(min(batch, total - self.count))])


TURN = 25
"""Calls each store makes before the other takes its turn, within a round (a batch: one)."""
OPERATIONS = ("get", "search", "search_keyword", "put", "put_batch")


class Round:
    """The calls of one round: the same random users, keys' positions and words for both stores."""

    def __init__(self, rng: random.Random, texts: list[str], ops: int, batch: int) -> None:
        self.users = [rng.randrange(USERS) for _ in range(ops)]
        self.picks = [rng.random() for _ in range(ops)]
        self.words = [rng.choice(re.findall(r"[A-Za-z]{5,}", rng.choice(texts)) or ["friend"]) for _ in range(ops)]
        self.batch = batch

    def call(self, op: str, load: Workload, n: int) -> None:
        """The ``n``-th call of ``op`` on ``load``'s store."""
        store, user = load.store, self.users[n]
        namespace = ("memories", f"user-{user}")
        if op == "get":
            keys = load.keys[user]
            assert store.get(namespace, keys[int(self.picks[n] * len(keys))]) is not None
        elif op == "search":
            store.search(namespace, filter={"kind": "Preference"}, limit=10)
        elif op == "search_keyword":
            store.search(namespace, query=self.words[n], limit=10)
        elif op == "put":
            put = load.next_op()
            store.put(put.namespace, put.key, put.value)  # type: ignore[arg-type]
        else:
            store.batch([load.next_op() for _ in range(self.batch)])


def measure(ours: Workload, theirs: Workload, ops: int, batch: int, seed: int, keyword: bool) -> dict[str, Any]:
    """Per call, the median of ``ROUNDS`` rounds; in a round both stores make the same calls of
    each operation, taking turns every ``TURN`` calls (who goes first alternates), so that a burst
    of the machine's noise falls on both rather than on one store's whole round."""
    rng = random.Random(seed)
    figures: dict[str, dict[str, list[float]]] = {op: {"ours": [], "theirs": []} for op in OPERATIONS}
    loads = {"ours": ours, "theirs": theirs}
    for _round in range(ROUNDS):
        calls = Round(rng, ours.texts, ops, batch)
        for op in OPERATIONS:
            if op == "search_keyword" and not keyword:
                continue
            players = ["ours"] if op == "search_keyword" else list(loads)  # LangGraph's have no keyword search
            count, turn = (max(1, ops // batch), 1) if op == "put_batch" else (ops, TURN)
            spent = dict.fromkeys(players, 0.0)
            for start in range(0, count, turn):
                for name in players if start // turn % 2 == 0 else players[::-1]:
                    began = time.perf_counter()
                    for n in range(start, min(start + turn, count)):
                        calls.call(op, loads[name], n)
                    spent[name] += time.perf_counter() - began
            for name in players:
                figures[op][name].append(spent[name] / count)
    result: dict[str, Any] = {}
    for op, by in figures.items():
        if not by["ours"]:
            continue
        ours_us = statistics.median(by["ours"]) * 1e6
        if not by["theirs"]:
            result[op] = {"ours_us": round(ours_us, 1), "theirs_us": None, "ratio": None}
            continue
        theirs_us = statistics.median(by["theirs"]) * 1e6
        ratio = round(ours_us / theirs_us, 2)
        result[op] = {"ours_us": round(ours_us, 1), "theirs_us": round(theirs_us, 1), "ratio": ratio}
    return result


def check_same_items(ours: Workload, theirs: Workload) -> None:
    """Both stores give back the same values, and the same filtered search, for one user."""
    for user in (0, USERS - 1):
        namespace = ("memories", f"user-{user}")
        for key in (ours.keys[user][0], ours.keys[user][-1]):
            a, b = ours.store.get(namespace, key), theirs.store.get(namespace, key)
            assert a is not None and b is not None and a.value == b.value, (key, a, b)
        found = [
            sorted(i.key for i in load.store.search(namespace, filter={"kind": "Preference"}, limit=1_000_000))
            for load in (ours, theirs)
        ]
        assert found[0] == found[1], "filtered search differs"


def index_backlog(load: Workload) -> dict[str, float]:
    """One keyword search of each user's items, timed apart (seconds in all): what indexing the
    fill's waiting items costs, so that the rounds time searches after a round's puts only."""
    start = time.perf_counter()
    for user in range(USERS):
        load.store.search(("memories", f"user-{user}"), query="remember", limit=1)
    return {"searches": USERS, "seconds": round(time.perf_counter() - start, 3)}


def _ours(target: Any, kind: str, ttl: dict[str, Any] | None) -> tuple[BaseStore, Callable[[], None]]:
    if kind == "langgraph":
        raise ValueError("built by the caller")
    from langchain_sessions import SessionStore

    store = SessionStore(target, ttl=ttl)  # type: ignore[arg-type]
    store.setup()
    return store, store.close


@contextmanager
def sqlite_pair(folder: Path, ours_kind: str, ttl: dict[str, Any] | None) -> Iterator[tuple[BaseStore, BaseStore]]:
    def langgraph(path: Path) -> tuple[BaseStore, Callable[[], None]]:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        store = SqliteStore(conn, ttl=ttl)  # type: ignore[arg-type]
        store.setup()
        return store, conn.close

    if ours_kind == "langgraph":
        ours, close_ours = langgraph(folder / "ours.db")
    else:
        from sessions_core import SqliteStore as OurSqliteStore

        ours, close_ours = _ours(OurSqliteStore(folder / "ours.db"), ours_kind, ttl)
    theirs, close_theirs = langgraph(folder / "theirs.db")
    try:
        yield ours, theirs
    finally:
        close_ours()
        close_theirs()


@contextmanager
def postgres_pair(url: str, ours_kind: str, ttl: dict[str, Any] | None) -> Iterator[tuple[BaseStore, BaseStore]]:
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row

    tag = uuid.uuid4().hex[:8]
    ours_schema, theirs_schema = f"bench_store_ours_{tag}", f"bench_store_lg_{tag}"
    opened: list[Any] = []

    def langgraph(schema: str) -> BaseStore:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')
        conn = psycopg.connect(
            url, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-csearch_path={schema}"
        )
        opened.append(conn.close)
        store = PostgresStore(conn, ttl=ttl)  # type: ignore[arg-type]
        store.setup()
        return store

    try:
        if ours_kind == "langgraph":
            ours = langgraph(ours_schema)
        else:
            from sessions_core.stores.postgres import PostgresStore as OurPostgresStore

            ours, close_ours = _ours(OurPostgresStore(url, schema=ours_schema), ours_kind, ttl)
            opened.append(close_ours)
        theirs = langgraph(theirs_schema)
        yield ours, theirs
    finally:
        for close in opened:
            close()
        with psycopg.connect(url, autocommit=True) as admin:
            for schema in (ours_schema, theirs_schema):
                admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(pair: Any, texts: list[str], sizes: list[int], ops: int, batch: int, keyword: bool) -> dict[str, Any]:
    with pair as (ours_store, theirs_store):
        ours, theirs = Workload(ours_store, texts), Workload(theirs_store, texts)
        by_size = {}
        for size in sizes:
            for load in (ours, theirs):
                start = time.perf_counter()
                load.fill(size)
                print(
                    f"  filled {type(load.store).__name__} to {load.count} in {time.perf_counter() - start:.1f} s",
                    file=sys.stderr,
                )
            check_same_items(ours, theirs)
            backlog = index_backlog(ours) if keyword else None
            by_size[str(size)] = measure(ours, theirs, ops, batch, seed=size, keyword=keyword)
            if backlog is not None:
                by_size[str(size)]["index_backlog"] = backlog
            print(f"  {size}: {json.dumps(by_size[str(size)])}", file=sys.stderr)
        return by_size


def postgres_url() -> str | None:
    value = os.environ.get("SESSIONS_BENCH_PG")
    if not value:
        return None
    if "://" in value:
        return value
    return os.environ.get("SESSIONS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--quick", action="store_true", help="1k items only")
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--ours", choices=("sessionstore", "langgraph"), default="sessionstore")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "langgraph_store.json")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only (with SESSIONS_BENCH_PG)")
    parser.add_argument("--ttl", type=float, help="minutes: every put carries this TTL, every get refreshes it")
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [int(size) for size in args.sizes.split(",")]
    texts = sentences(args.data)
    keyword = args.ours != "langgraph"
    results: dict[str, Any] = {
        "sizes": sizes,
        "ops_per_round": args.ops,
        "batch": args.batch,
        "rounds": ROUNDS,
        "users": USERS,
        "sentences": len(texts),
        "ours": args.ours,
        "ttl_minutes": args.ttl,
    }
    ttl = None if args.ttl is None else {"default_ttl": args.ttl, "refresh_on_read": True}
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as folder:
            print("sqlite: SessionStore vs SqliteStore", file=sys.stderr)
            pair = sqlite_pair(Path(folder), args.ours, ttl)
            results["sqlite"] = run(pair, texts, sizes, args.ops, args.batch, keyword)
    url = postgres_url()
    if url is not None:
        print("postgres: SessionStore vs PostgresStore", file=sys.stderr)
        results["postgres"] = run(postgres_pair(url, args.ours, ttl), texts, sizes, args.ops, args.batch, keyword)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for backend in ("sqlite", "postgres"):
        for size, figures in results.get(backend, {}).items():
            line = ", ".join(
                f"{op} {f['ours_us']} us" + ("" if f["ratio"] is None else f" vs {f['theirs_us']} us ({f['ratio']}x)")
                for op, f in figures.items()
                if op != "index_backlog"
            )
            backlog = figures.get("index_backlog")
            if backlog is not None:
                line += f", the fill's waiting items indexed by {USERS} searches in {backlog['seconds']} s"
            print(f"{backend} {size}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
