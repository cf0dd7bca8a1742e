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
"user-N")``, filled by each store's own ``batch`` of puts. At each size, rounds alternate between
ours and theirs, each timing ``--ops`` calls of each operation on random users; the figure is
the median round, per call (a batch: per batch of ``--batch`` puts). Ratio: ours / theirs (at
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


def _time(calls: Callable[[], None], ops: int) -> float:
    start = time.perf_counter()
    calls()
    return (time.perf_counter() - start) / ops


def measure(ours: Workload, theirs: Workload, ops: int, batch: int, seed: int, keyword: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    names = ["put", "put_batch", "get", "search", "search_keyword"]
    figures: dict[str, dict[str, list[float]]] = {op: {"ours": [], "theirs": []} for op in names}
    for _round in range(ROUNDS):
        users = [rng.randrange(USERS) for _ in range(ops)]
        picks = [rng.random() for _ in range(ops)]
        words = [rng.choice(re.findall(r"[A-Za-z]{5,}", rng.choice(ours.texts)) or ["friend"]) for _ in range(ops)]
        for name, load in (("ours", ours), ("theirs", theirs)):
            store = load.store
            keys = [load.keys[u][int(p * len(load.keys[u]))] for u, p in zip(users, picks)]

            def gets(users: list[int] = users, keys: list[str] = keys, store: BaseStore = store) -> None:
                for user, key in zip(users, keys):
                    assert store.get(("memories", f"user-{user}"), key) is not None

            def searches(users: list[int] = users, store: BaseStore = store) -> None:
                for user in users:
                    store.search(("memories", f"user-{user}"), filter={"kind": "Preference"}, limit=10)

            def keywords(users: list[int] = users, words: list[str] = words, store: BaseStore = store) -> None:
                for user, word in zip(users, words):
                    store.search(("memories", f"user-{user}"), query=word, limit=10)

            def puts(load: Workload = load) -> None:
                for _ in range(ops):
                    op = load.next_op()
                    load.store.put(op.namespace, op.key, op.value)  # type: ignore[arg-type]

            def batches(load: Workload = load) -> None:
                for _ in range(max(1, ops // batch)):
                    load.store.batch([load.next_op() for _ in range(batch)])

            figures["get"][name].append(_time(gets, ops))
            figures["search"][name].append(_time(searches, ops))
            if keyword and name == "ours":
                figures["search_keyword"][name].append(_time(keywords, ops))
            figures["put"][name].append(_time(puts, ops))
            figures["put_batch"][name].append(_time(batches, max(1, ops // batch)))
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
            by_size[str(size)] = measure(ours, theirs, ops, batch, seed=size, keyword=keyword)
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
            )
            print(f"{backend} {size}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
