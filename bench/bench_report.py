"""The performance report: every store on the same workload, in one run.

    python bench/bench_report.py            # full run (~25 min; builds the 1M search database once)
    python bench/bench_report.py --quick    # 1k and 10k only, search over 100k (~5 min)

Subjects: ours on SQLite (file, WAL) and on PostgreSQL; LangChain's ``SQLChatMessageHistory``;
LlamaIndex's ``SQLAlchemyChatStore`` and ``Memory``; and the raw ``sqlite3`` floor with our schema
and durability (``bench_core``). The workload is ``bench_core.ChatGenerator``'s conversation,
converted for each peer before any timing. Results: ``bench/results/report.json`` (every figure,
ratios within the run) and ``bench/results/report.png`` (cost against history length).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_core as core  # noqa: E402
import peers  # noqa: E402

from sessions_core import Session  # noqa: E402
from sessions_core.stores.sqlite import SqliteStore  # noqa: E402
from sessions_core.tokens import TiktokenCounter, estimate_message_tokens  # noqa: E402

RESULTS = HERE / "results"
POSTGRES_URL = os.environ.get("SESSIONS_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
RECENT = 50  # messages in a "recent history" read
APPEND_BUDGET_S = 2.0  # time spent timing single appends per subject and size (at least 5 appends)
APPEND_SAMPLES = 1_000  # single appends timed at most: several WAL checkpoints' worth, so each subject pays its share
APPEND_ROUNDS = 5  # the single appends are timed in rounds, the subjects taking turns


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def repeat(fn: Callable[[], Any], *, reps: int = 7, budget_s: float = 3.0) -> list[float]:
    """Seconds per call over up to ``reps`` calls (at least 2) within about ``budget_s``."""
    out: list[float] = []
    started = time.perf_counter()
    while len(out) < reps and (len(out) < 2 or time.perf_counter() - started < budget_s):
        gc.collect()
        out.append(core.timed(fn))
    return out


# ------------------------------------------------------------------------------------------------
# Subjects: one interface over ours, the floor and the peers
# ------------------------------------------------------------------------------------------------


class Ours:
    """``Session`` over one store; one ``Session`` per session id."""

    kind = "ours"

    def __init__(self, name: str, store: Any) -> None:
        self.name = name
        self.store = store
        self._sessions: dict[str, Session] = {}

    def convert(self, message: dict[str, Any]) -> dict[str, Any]:
        return message

    def session(self, session_id: str) -> Session:
        if session_id not in self._sessions:
            self._sessions[session_id] = Session(self.store).for_session(session_id)
        return self._sessions[session_id]

    def prepare(self, session_id: str) -> None:
        self.session(session_id)

    def append_one(self, session_id: str, message: dict[str, Any]) -> None:
        self.session(session_id).append_message(message)

    def append_batch(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        self.session(session_id).append_messages(messages)

    def read_all(self, session_id: str) -> list[Any]:
        return self.session(session_id).get_history()

    def read_recent(self, session_id: str, n: int) -> list[Any]:
        return self.session(session_id).get_recent_history(0, min_recent_messages=n).messages

    def stream(self, session_id: str) -> int:
        return sum(1 for _ in self.session(session_id).history())

    def threshold_check(self, session_id: str) -> int:
        """What ``compact_after`` reads after an append: the active branch's estimate."""
        return self.session(session_id).get_token_estimate()

    def close(self) -> None:
        self.store.close()


class OursPostgres(Ours):
    def __init__(self) -> None:
        from sessions_core.stores.postgres import PostgresStore

        self.schema = f"bench_{uuid.uuid4().hex[:8]}"
        super().__init__("ours: PostgreSQL", PostgresStore(POSTGRES_URL, schema=self.schema))

    def close(self) -> None:
        import psycopg

        super().close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


FLOOR_RECENT = """
    WITH RECURSIVE path(seq, id, parent_id, n) AS (
        SELECT seq, id, parent_id, 0 FROM session_messages WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, path.n + 1
        FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
        WHERE path.n + 1 < :limit
    )
    SELECT seq FROM path ORDER BY n DESC
"""
FLOOR_LATEST_LEAF = """
    SELECT id FROM session_messages m WHERE session_id = ? AND NOT EXISTS
        (SELECT 1 FROM session_messages c WHERE c.session_id = m.session_id AND c.parent_id = m.id)
    ORDER BY created_at DESC, seq DESC LIMIT 1
"""


class Floor:
    """Raw ``sqlite3`` over our schema and durability: the same SQL, ``json.loads`` for rows."""

    kind = "floor"
    name = "raw sqlite3 floor"

    def __init__(self, path: Path) -> None:
        self.conn = core.floor_connect(path)
        core.apply_schema(self.conn)
        self._appenders: dict[str, core.FloorAppender] = {}

    def convert(self, message: dict[str, Any]) -> dict[str, Any]:
        return message

    def prepare(self, session_id: str) -> None:
        self._appenders.setdefault(session_id, core.FloorAppender(self.conn, session_id))

    def append_one(self, session_id: str, message: dict[str, Any]) -> None:
        self._appenders[session_id].append(message)

    def append_batch(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        appender = self._appenders[session_id]
        self.conn.execute("BEGIN")
        for message in messages:
            appender.append(message)
        self.conn.execute("COMMIT")

    def _leaf(self, session_id: str) -> str:
        return self.conn.execute(FLOOR_LATEST_LEAF, (session_id,)).fetchone()[0]

    def _fetch(self, seqs: list[int], chunk: int = 200) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(0, len(seqs), chunk):
            part = seqs[i : i + chunk]
            rows = dict(
                self.conn.execute(
                    f"SELECT seq, content FROM session_messages WHERE seq IN ({','.join('?' * len(part))})", part
                ).fetchall()
            )
            out.extend(json.loads(rows[s]) for s in part)
        return out

    def read_all(self, session_id: str) -> list[Any]:
        seqs = [r[0] for r in self.conn.execute(core.FLOOR_PATH, {"s": session_id, "leaf": self._leaf(session_id)})]
        return self._fetch(seqs)

    def read_recent(self, session_id: str, n: int) -> list[Any]:
        params = {"s": session_id, "leaf": self._leaf(session_id), "limit": n}
        return self._fetch([r[0] for r in self.conn.execute(FLOOR_RECENT, params)])

    def threshold_check(self, session_id: str) -> int:
        return self.conn.execute(
            "SELECT path_tokens FROM session_messages WHERE session_id = ? AND id = ?",
            (session_id, self._leaf(session_id)),
        ).fetchone()[0]

    def close(self) -> None:
        self.conn.close()


class Peer:
    """A ``peers`` class, with the threshold check its framework performs before a model call."""

    kind = "peer"

    def __init__(self, key: str, path: Path) -> None:
        self.impl = peers.PEERS[key](path)
        self.name = key

    def __getattr__(self, name: str) -> Any:  # convert, prepare, append_*, read_*: the peer's own
        return getattr(self.impl, name)

    def threshold_check(self, session_id: str) -> int:
        messages = self.impl.read_all(session_id)
        if self.name == "langchain-sql":
            from langchain_core.messages.utils import count_tokens_approximately

            return count_tokens_approximately(messages)  # what SummarizationMiddleware counts
        return llamaindex_token_count(messages)  # what Memory counts on every put

    def close(self) -> None:
        self.impl.close()


@functools.lru_cache(maxsize=1)
def _llamaindex_memory() -> Any:
    from llama_index.core.memory import Memory

    return Memory.from_defaults(session_id="bench-token-count")


def llamaindex_token_count(messages: list[Any]) -> int:
    """LlamaIndex ``Memory``'s own estimate (its default tokenizer: tiktoken)."""
    return _llamaindex_memory()._estimate_token_count(messages)


def as_shipped_append_us(tmp: Path, key: str, messages: list[Any]) -> float:
    """A peer's single append with SQLite's own defaults (rollback journal, synchronous=FULL),
    as a user who passes a ``sqlite:///`` URL gets it; the matrix gives peers our durability."""
    peer = peers.PEERS[key](tmp / f"{key}-as-shipped.db", durability="default")
    peer.prepare("shipped")
    for message in messages[:5]:
        peer.append_one("shipped", message)
    times = [core.timed(lambda m=m: peer.append_one("shipped", m)) * 1e6 for m in messages[5:]]
    peer.close()
    return statistics.mean(times)


def make_subjects(tmp: Path, tag: str, with_postgres: bool) -> list[Any]:
    subjects: list[Any] = [Floor(tmp / f"floor-{tag}.db"), Ours("ours: SQLite", SqliteStore(tmp / f"ours-{tag}.db"))]
    if with_postgres:
        subjects.append(OursPostgres())
    subjects += [Peer(key, tmp / f"{key}-{tag}.db") for key in peers.PEERS]
    return subjects


# ------------------------------------------------------------------------------------------------
# The workload matrix: sizes x layouts, every subject
# ------------------------------------------------------------------------------------------------


def workload(n: int, sessions: int) -> dict[str, list[dict[str, Any]]]:
    """``n`` messages over ``sessions`` conversations (each its own generator)."""
    per = n // sessions
    return {
        f"s{i:03d}": core.take(
            core.ChatGenerator(core.SEED + i, prefix=f"s{i:03d}-"), per + extra_per_session(sessions)
        )
        for i in range(sessions)
    }


def extra_per_session(sessions: int) -> int:
    """Messages kept back from each session for the single appends."""
    return -(-APPEND_SAMPLES // sessions)


def run_cell(tmp: Path, n: int, sessions: int, with_postgres: bool, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every subject on one workload: each builds its store (batched append) and is read at the
    nominal size; then the single appends run in rounds, the subjects taking turns, so that the
    machine's noise falls on all of them alike."""
    data = workload(n, sessions)
    per = n // sessions
    subjects = make_subjects(tmp, f"{n}-{sessions}", with_postgres)
    rows: dict[str, dict[str, Any]] = {}
    singles: dict[str, Iterator[tuple[str, Any]]] = {}
    sids = list(data)
    probe = sids[: min(len(sids), 10)]  # read a sample of sessions when there are many
    for subject in subjects:
        row: dict[str, Any] = {"subject": subject.name, "kind": subject.kind, "messages": n, "sessions": sessions}
        converted = {sid: [subject.convert(m) for m in msgs] for sid, msgs in data.items()}
        for sid in converted:
            subject.prepare(sid)
        # Batched append builds the store: batches of 1,000 per call (a whole session when smaller).
        batch = min(per, 1_000)
        started = time.perf_counter()
        for sid, msgs in converted.items():
            for i in range(0, per, batch):
                subject.append_batch(sid, msgs[i : i + batch])
        row["append_batched_us"] = (time.perf_counter() - started) / n * 1e6
        # Kept back for the single appends, round-robin over the sessions.
        singles[subject.name] = iter(
            [(sid, msgs[i]) for i in range(per, per + extra_per_session(sessions)) for sid, msgs in converted.items()]
        )
        if subject.kind == "peer" and sessions == 1 and n == 1_000:
            row["append_one_us_as_shipped"] = as_shipped_append_us(tmp, subject.name, converted[sids[0]][:40])
        del converted
        # The build's pages written back now, so that no later timing waits behind their
        # write-back at a checkpoint's fsync.
        os.sync()
        reads = repeat(lambda subject=subject: [subject.read_all(sid) for sid in probe], reps=5, budget_s=4.0)
        row["read_all_ms"] = median(reads) * 1000 / len(probe)
        row["read_all_us_per_message"] = median(reads) * 1e6 / (per * len(probe))
        recent = repeat(
            lambda subject=subject: [subject.read_recent(sid, RECENT) for sid in probe], reps=7, budget_s=2.0
        )
        row["read_recent_ms"] = median(recent) * 1000 / len(probe)
        check = repeat(lambda subject=subject: subject.threshold_check(sids[0]), reps=7, budget_s=2.0)
        row["threshold_check_ms"] = median(check) * 1000
        rows[subject.name] = row
    # One commit per message, into the filled stores.
    times: dict[str, list[float]] = {subject.name: [] for subject in subjects}
    for r in range(APPEND_ROUNDS):
        for subject in subjects[r % len(subjects) :] + subjects[: r % len(subjects)]:
            taken = times[subject.name]
            quota = len(taken) + APPEND_SAMPLES // APPEND_ROUNDS
            started = time.perf_counter()
            while len(taken) < quota and (not taken or time.perf_counter() - started < APPEND_BUDGET_S / APPEND_ROUNDS):
                sid, message = next(singles[subject.name])
                taken.append(
                    core.timed(lambda subject=subject, sid=sid, message=message: subject.append_one(sid, message)) * 1e6
                )
    for subject in subjects:
        row = rows[subject.name]
        row["append_one_us"] = statistics.mean(times[subject.name])
        row["append_one_count"] = len(times[subject.name])
        assert len(subject.read_all(sids[0])) >= per, f"{subject.name} lost messages"
        subject.close()
        log(
            f"    {subject.name:24s} batched {row['append_batched_us']:8.1f} µs/msg"
            f" | one {row['append_one_us']:9.1f} µs"
            f" | read_all {row['read_all_ms']:9.2f} ms/session | recent {row['read_recent_ms']:8.2f} ms"
            f" | threshold {row['threshold_check_ms']:8.3f} ms"
        )
    return list(rows.values())


# ------------------------------------------------------------------------------------------------
# Path read at depth 10,000, search, token counting, memory
# ------------------------------------------------------------------------------------------------


def path_read(tmp: Path, depth: int, log: Callable[[str], None]) -> dict[str, Any]:
    figure = core.bench_history(tmp, depth, reps=11, do_profile=False)
    log(
        f"    path read at depth {depth:,}: ours {figure['ours']:.1f} ms, floor {figure['baseline']:.1f} ms,"
        f" {figure['ratio']:.2f}x"
    )
    return figure


BM25_OF = """
    SELECT f.rowid, bm25(session_messages_fts) FROM session_messages_fts f
    WHERE session_messages_fts MATCH ? AND f.rowid IN ({})
"""


def ndcg(ours_scores: list[float], ideal_scores: list[float]) -> float:
    """nDCG of our ranking with each result's bm25 score as its gain, against the best ranking."""
    import math

    def dcg(scores: list[float]) -> float:
        return sum(s / math.log2(i + 2) for i, s in enumerate(scores))

    best = dcg(ideal_scores)
    return dcg(ours_scores) / best if best else 1.0


def search(tmp: Path, n: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Ours against the naive full ranking (the floor a hand-written query gives) and against the
    same windowed plan by hand; relevance of our top 10 as nDCG over bm25 scores."""
    figures = core.bench_search(tmp, n, reps=15, do_profile=False)
    path, _ = core.cached_db(n)
    conn = core.floor_connect(path)
    session = Session(SqliteStore(path)).for_session(core.SESSION)
    floor = core.FloorSearch(conn)
    for figure in figures:
        expression = floor.expression(figure["query"])
        ours_seqs = [
            conn.execute(
                "SELECT seq FROM session_messages WHERE session_id = ? AND id = ?", (core.SESSION, r.id)
            ).fetchone()[0]
            for r in session.search(figure["query"], limit=10)
        ]
        ideal = conn.execute(
            "SELECT rowid, bm25(session_messages_fts) FROM session_messages_fts WHERE session_messages_fts MATCH ?"
            " ORDER BY rank LIMIT 10",
            (expression,),
        ).fetchall()
        scores = dict(conn.execute(BM25_OF.format(",".join("?" * len(ours_seqs))), (expression, *ours_seqs)).fetchall())
        figure["ndcg10_bm25"] = ndcg([-scores[s] for s in ours_seqs], [-s for _, s in ideal])
        figure["overlap_top10_with_full_ranking"] = len(set(ours_seqs) & {r for r, _ in ideal})
        figure["ratio_to_full_ranking"] = figure["ours"] / figure["full_ranking_floor_ms"]
        log(
            f"    search {n:,} {figure['figure'].split(': ')[-1]:13s} ours {figure['ours']:7.2f} ms | same plan by hand"
            f" {figure['baseline']:7.2f} ms | naive full ranking {figure['full_ranking_floor_ms']:7.2f} ms"
            f" | nDCG@10 {figure['ndcg10_bm25']:.3f} ({figure['overlap_top10_with_full_ranking']}/10 shared)"
        )
    session.close()
    conn.close()
    return figures


def search_postgres(n: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    path, _ = core.cached_db(n)
    conn = core.floor_connect(path)
    queries = core.search_queries(conn, n)
    rows = conn.execute("SELECT content, created_at FROM session_messages ORDER BY seq").fetchall()
    conn.close()
    subject = OursPostgres()
    session = subject.session(core.SESSION)
    started = time.perf_counter()
    for i in range(0, len(rows), 5_000):
        session.append_messages([json.loads(c) for c, _ in rows[i : i + 5_000]])
    log(f"    PostgreSQL: {n:,} messages loaded in {time.perf_counter() - started:.0f} s")
    out = []
    for kind, query in queries.items():
        times = repeat(lambda q=query: session.search(q, limit=20), reps=15, budget_s=5.0)
        out.append(
            {
                "figure": f"search {n // 1000:,}k msgs (PostgreSQL): {kind}",
                "query": query,
                "ours": median(times) * 1000,
                "unit": "ms",
                "returned": len(session.search(query, limit=20)),
            }
        )
        log(f"    PostgreSQL search {n:,} {kind:13s} {out[-1]['ours']:7.2f} ms")
    subject.close()
    return out


def token_counting(n: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Counting the tokens of ``n`` messages: heuristic and tiktoken, ours against the peers'
    counters and against tiktoken on the bare text (the floor)."""
    from langchain_core.messages.utils import count_tokens_approximately

    from sessions_core.messages import parse_message

    raw = core.take(core.ChatGenerator(core.SEED), n)
    ours = [parse_message(m) for m in raw]
    langchain = [peers.to_langchain(m) for m in raw]
    llamaindex = [peers.to_llamaindex(m) for m in raw]
    counter = TiktokenCounter()
    encoding = counter._encoding
    texts = [core.text_of(m) + json.dumps([p for p in m["parts"] if p["type"] != "text"]) for m in raw]
    contenders = {
        "ours heuristic (estimate_message_tokens)": lambda: estimate_message_tokens(ours),
        "langchain count_tokens_approximately": lambda: count_tokens_approximately(langchain),
        "ours tiktoken (TiktokenCounter)": lambda: counter(ours),
        "llamaindex Memory._estimate_token_count (tiktoken)": lambda: llamaindex_token_count(llamaindex),
        "floor: tiktoken encode of text and tool JSON": lambda: sum(
            len(encoding.encode(t, disallowed_special=())) for t in texts
        ),
    }
    result: dict[str, Any] = {"messages": n}
    for name, fn in contenders.items():
        times = repeat(fn, reps=5, budget_s=5.0)
        result[name] = {"ms": median(times) * 1000, "tokens": fn()}
        log(
            f"    tokens of {n:,} messages: {name:46s} {result[name]['ms']:8.1f} ms ({result[name]['tokens']:,} tokens)"
        )
    return result


MEMORY_PROBE = """
import json, sys, tracemalloc
from sessions_core import Session
mode, target, postgres_url = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "sqlite":
    from sessions_core.stores.sqlite import SqliteStore
    session = Session(SqliteStore(target)).for_session({session!r})
else:
    from sessions_core.stores.postgres import PostgresStore
    session = Session(PostgresStore(postgres_url, schema=target)).for_session({session!r})
session.get_token_estimate()  # connected, schema checked
import os
def resident_kib():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
before = resident_kib()
count = sum(1 for _ in session.history())  # RSS first, without tracemalloc's own bookkeeping
# The address space's high-water mark (ru_maxrss would carry the parent's over exec).
after = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
tracemalloc.start()
assert sum(1 for _ in session.history()) == count
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
tracemalloc.start()
full = len(session.get_history())
_, full_peak = tracemalloc.get_traced_memory()
print(json.dumps({{"messages": count, "stream_peak_python_mb": peak / 2**20,
                  "stream_peak_rss_delta_mb": (after - before) / 1024,
                  "get_history_peak_python_mb": full_peak / 2**20}}))
"""


def memory(tmp: Path, n: int, with_postgres: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """Peak memory of streaming an ``n``-message history, measured in a fresh process (Python
    allocations by tracemalloc; the whole process, SQLite's page cache included, by max RSS)."""
    source, _ = core.cached_db(n)
    path = core.copy_db(source, tmp / "memory.db")
    script = MEMORY_PROBE.format(session=core.SESSION)
    out: dict[str, Any] = {}
    targets = [("sqlite", str(path))]
    if with_postgres:
        subject = OursPostgres()
        session = subject.session(core.SESSION)
        conn = sqlite3.connect(path)
        contents = [c for (c,) in conn.execute("SELECT content FROM session_messages ORDER BY seq")]
        conn.close()
        for i in range(0, len(contents), 5_000):
            session.append_messages([json.loads(c) for c in contents[i : i + 5_000]])
        targets.append(("postgres", subject.schema))
    for mode, target in targets:
        proc = subprocess.run(
            [sys.executable, "-c", script, mode, target, POSTGRES_URL], capture_output=True, text=True, check=True
        )
        out[mode] = json.loads(proc.stdout)
        log(
            f"    streaming {n:,} messages ({mode}): peak {out[mode]['stream_peak_python_mb']:.1f} MB of Python"
            f" allocations, max RSS +{out[mode]['stream_peak_rss_delta_mb']:.1f} MB"
            f" (get_history() holding them all: {out[mode]['get_history_peak_python_mb']:.0f} MB)"
        )
    if with_postgres:
        subject.close()
    return out


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


def summarise(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ratios within the run: each subject against the floor and ours against each peer."""
    out = []
    by_key: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}
    for row in cells:
        by_key.setdefault((row["messages"], row["sessions"]), {})[row["subject"]] = row
    metrics = ("append_one_us", "append_batched_us", "read_all_ms", "read_recent_ms", "threshold_check_ms")
    for (n, sessions), rows in sorted(by_key.items()):
        floor = rows.get(Floor.name)
        ours = rows.get("ours: SQLite")
        for metric in metrics:
            entry: dict[str, Any] = {"messages": n, "sessions": sessions, "metric": metric}
            for name, row in rows.items():
                entry[name] = row[metric]
            if floor and ours:
                entry["ours_over_floor"] = ours[metric] / floor[metric]
            for name, row in rows.items():
                if row["kind"] == "peer" and ours:
                    entry[f"{name}_over_ours"] = row[metric] / ours[metric]
            out.append(entry)
    return out


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, checked against this run's figures."""
    out: list[dict[str, Any]] = []

    def check(target: str, measured: str, ok: bool) -> None:
        out.append({"target": target, "measured": measured, "pass": bool(ok)})

    cells = report.get("matrix", [])
    by = {(r["subject"], r["messages"], r["sessions"]): r for r in cells}
    layouts = sorted({(r["messages"], r["sessions"]) for r in cells})
    if cells:
        ratios = [
            by[("ours: SQLite", n, s)]["append_one_us"] / by[(Floor.name, n, s)]["append_one_us"] for n, s in layouts
        ]
        check(
            "append (a commit per message) within 1.5x of the floor",
            ", ".join(f"{r:.2f}x" for r in ratios),
            max(ratios) <= 1.5,
        )
        reads = [by[("ours: SQLite", n, s)]["read_all_ms"] / by[(Floor.name, n, s)]["read_all_ms"] for n, s in layouts]
        check("full-history read within 1.5x of the floor", ", ".join(f"{r:.2f}x" for r in reads), max(reads) <= 1.5)
        for peer in ("langchain-sql", "llamaindex-sqlalchemy"):
            shipped = [
                (n, r["append_one_us_as_shipped"])
                for (name, n, s), r in by.items()
                if name == peer and s == 1 and "append_one_us_as_shipped" in r
            ]
            for n, peer_us in shipped:
                ours_us = by[("ours: SQLite", n, 1)]["append_one_us"]
                check(
                    f"append as shipped at least 5x faster than {peer} ({n:,} stored)",
                    f"{peer_us:.0f} / {ours_us:.0f} µs = {peer_us / ours_us:.1f}x",
                    peer_us / ours_us >= 5,
                )
        for peer in ("langchain-sql", "llamaindex-sqlalchemy"):
            for metric, goal, label in (
                ("append_one_us", 5, "append at equal durability"),
                ("read_all_ms", 3, "full-history read"),
            ):
                speedups = [by[(peer, n, s)][metric] / by[("ours: SQLite", n, s)][metric] for n, s in layouts]
                check(
                    f"{label} at least {goal}x faster than {peer}",
                    ", ".join(f"{x:.1f}x" for x in speedups),
                    min(speedups) >= goal,
                )
        sizes = sorted({n for n, s in layouts if s == 1})
        flat = by[("ours: SQLite", sizes[-1], 1)]["append_one_us"] / by[("ours: SQLite", sizes[0], 1)]["append_one_us"]
        check(f"append flat from {sizes[0]:,} to {sizes[-1]:,} stored (within 1.2x)", f"{flat:.2f}x", flat <= 1.2)
    searches = [f for f in report.get("search", []) if "full_ranking_floor_ms" in f]
    if searches:
        largest = max(f["messages"] for f in searches)
        for f in (f for f in searches if f["messages"] == largest):
            check(
                f"search over {largest:,}: {f['figure'].split(': ')[-1]} at or below the floor (naive full ranking)",
                f"{f['ours']:.2f} ms vs {f['full_ranking_floor_ms']:.2f} ms; nDCG@10 {f['ndcg10_bm25']:.3f}",
                f["ours"] <= f["full_ranking_floor_ms"] * 1.05,
            )
        check(
            f"search over {largest:,}: p50 across query kinds under 20 ms",
            f"{report['search_p50_ms']:.2f} ms",
            report["search_p50_ms"] < 20,
        )
    for mode, figures in report.get("memory", {}).items():
        peak = max(figures["stream_peak_python_mb"], figures["stream_peak_rss_delta_mb"])
        check(
            f"streaming {figures['messages']:,} messages ({mode}) under 50 MB above the baseline",
            f"{figures['stream_peak_python_mb']:.1f} MB Python, +{figures['stream_peak_rss_delta_mb']:.1f} MB RSS",
            peak < 50,
        )
    return out


def plot(cells: list[dict[str, Any]], target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    panels = [
        ("append_one_us", "append, one commit per message (µs)"),
        ("append_batched_us", "append, batched (µs per message)"),
        ("read_all_us_per_message", "full-history read (µs per message)"),
    ]
    names = list(dict.fromkeys(r["subject"] for r in cells))
    colours = {name: f"C{i}" for i, name in enumerate(names)}  # one colour per subject, a line style per layout
    for ax, (metric, title) in zip(axes, panels):
        for sessions, style in ((1, "-o"), (100, "--s")):
            for name in names:
                points = sorted(
                    (r["messages"], r[metric]) for r in cells if r["subject"] == name and r["sessions"] == sessions
                )
                if points:
                    ax.plot(
                        *zip(*points),
                        style,
                        color=colours[name],
                        label=f"{name} ({sessions} session{'s' if sessions > 1 else ''})",
                    )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("messages stored")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("session-memory against the SQLite floor and the frameworks' stores (lower is better)")
    fig.tight_layout()
    fig.savefig(target, dpi=110)


METRICS = [
    ("append_one_us", "append, a commit per message", "µs"),
    ("append_batched_us", "append, batched (1,000 per call)", "µs/msg"),
    ("read_all_ms", "full-history read", "ms/session"),
    ("read_recent_ms", f"recent-history read (last {RECENT})", "ms"),
    ("threshold_check_ms", "compaction threshold check", "ms"),
]


def markdown(report: dict[str, Any]) -> str:
    """The README tables of a report: per metric, every subject per workload, and ratios."""
    cells = report.get("matrix", [])
    lines: list[str] = []
    subjects = list(dict.fromkeys(r["subject"] for r in cells))
    layouts = sorted({(r["messages"], r["sessions"]) for r in cells}, key=lambda k: (k[1], k[0]))
    by = {(r["subject"], r["messages"], r["sessions"]): r for r in cells}
    for metric, title, unit in METRICS:
        lines += [
            f"**{title}** ({unit}; in brackets: ours on SQLite over the floor, and each peer over ours)",
            "",
            "| workload | " + " | ".join(subjects) + " |",
            "|---" * (len(subjects) + 1) + "|",
        ]
        for n, sessions in layouts:
            ours = by.get(("ours: SQLite", n, sessions))
            cols = []
            for name in subjects:
                row = by.get((name, n, sessions))
                if row is None:
                    cols.append("")
                    continue
                value = row[metric]
                text = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
                if name == "ours: SQLite":
                    text += f" ({value / by[(Floor.name, n, sessions)][metric]:.2f}x)"
                elif row["kind"] == "peer" and ours:
                    text += f" ({value / ours[metric]:.1f}x)"
                cols.append(text)
            lines.append(f"| {n:,} msgs, {sessions} session{'s' if sessions > 1 else ''} | " + " | ".join(cols) + " |")
        lines.append("")
    return "\n".join(lines)


def isolated(arguments: list[str]) -> Any:
    """Run one part of the report in a fresh interpreter and return what it wrote: each part
    starts with a small heap, so no part pays for the objects an earlier one left behind."""
    with tempfile.TemporaryDirectory(prefix="bench-part-") as tmp_name:
        out = Path(tmp_name) / "part.json"
        subprocess.run([sys.executable, str(Path(__file__).resolve()), *arguments, "--part-out", str(out)], check=True)
        return json.loads(out.read_text())


def run_part(part: str, args: argparse.Namespace, log: Callable[[str], None]) -> Any:
    """One part, in this process (``--part``): a matrix cell ``N:S``, or a named phase."""
    with_postgres = not args.no_postgres
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp_name:
        tmp = Path(tmp_name)
        if ":" in part:
            n, sessions = (int(x) for x in part.split(":"))
            return run_cell(tmp, n, sessions, with_postgres, log)
        if part == "path":
            return path_read(tmp, 10_000, log)
        if part == "search-postgres":
            return search_postgres(100_000, log)
        if part.startswith("search"):
            return search(tmp, int(part[len("search") :]), log)
        if part == "tokens":
            return token_counting(10_000, log)
        if part == "memory":
            return memory(tmp, 100_000, with_postgres, log)
    raise ValueError(f"unknown part {part!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1k and 10k only, search over 100k")
    parser.add_argument("--no-postgres", action="store_true", help="skip ours on PostgreSQL")
    parser.add_argument(
        "--only",
        action="append",
        choices=["matrix", "path", "search", "tokens", "memory"],
        help="run these parts and update them in an existing results file",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", type=Path, default=None, help="print the README tables of a results file and exit")
    parser.add_argument("--part", help=argparse.SUPPRESS)
    parser.add_argument("--part-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def log(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f}s] {text}", flush=True)

    if args.table:
        print(markdown(json.loads(args.table.read_text())))
        return 0
    if args.part:
        args.part_out.write_text(json.dumps(run_part(args.part, args, log), default=str))
        return 0
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    search_sizes = (100_000,) if args.quick else (100_000, 1_000_000)
    with_postgres = not args.no_postgres
    only = set(args.only or ["matrix", "path", "search", "tokens", "memory"])
    out_path = args.out or RESULTS / ("report-quick.json" if args.quick else "report.json")
    common = ["--no-postgres"] if args.no_postgres else []

    # A partial run (--only) updates its parts of an earlier report in place.
    report: dict[str, Any] = json.loads(out_path.read_text()) if args.only and out_path.exists() else {}
    report |= {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
    }
    for n in search_sizes:  # built once, outside any timing
        core.cached_db(n, label=f"{n:,}-message search database")
    if "matrix" in only:
        cells = []
        for n in sizes:
            for sessions in (1, 100):
                log(f"{n:,} messages in {sessions} session{'s' if sessions > 1 else ''}")
                cells += isolated(["--part", f"{n}:{sessions}", *common])
        report["matrix"] = cells
        report["ratios"] = summarise(cells)
        plot(cells, out_path.with_suffix(".png"))
    if "path" in only:
        log("path read")
        report["path_read"] = isolated(["--part", "path", *common])
    if "search" in only:
        report["search"] = []
        for n in search_sizes:
            log(f"search over {n:,} messages")
            report["search"] += isolated(["--part", f"search{n}", *common])
        if with_postgres:
            report["search"] += isolated(["--part", "search-postgres", *common])
        kinds = [
            f["ours"]
            for f in report["search"]
            if "(PostgreSQL)" not in f["figure"] and f["messages"] == search_sizes[-1]
        ]
        report["search_p50_ms"] = median(kinds)
    if "tokens" in only:
        log("token counting")
        report["tokens"] = isolated(["--part", "tokens", *common])
    if "memory" in only:
        log("memory")
        report["memory"] = isolated(["--part", "memory", *common])
    report["targets"] = targets(report)
    for target in report["targets"]:
        log(f"  {'PASS' if target['pass'] else 'MISS'}  {target['target']}: {target['measured']}")
    report["seconds"] = round(time.perf_counter() - started)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1, default=str))
    log(f"results written to {out_path.relative_to(HERE.parent) if out_path.is_relative_to(HERE.parent) else out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
