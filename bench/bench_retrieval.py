"""Retrieval on LoCoMo: how often search surfaces the turns that answer a question.

Run ``python bench/bench_retrieval.py`` (``--data PATH`` or ``LOCOMO_DIR``; default
``../shared/data/locomo`` from the repository root; ``--conversations conv-26,conv-30`` and
``--limit-questions N`` for a slice).

The data: the LoCoMo conversations (see the README of the data folder), read where they are and
never copied. Each question outside category 5 (adversarial: no answer in the conversation) with at
least one evidence turn is asked; evidence ids are read as written, a few malformed ones mended
(``"D8:6; D9:17"`` is two ids, ``"D:11:26"`` is ``D11:26``) and ids naming no turn dropped.

Retrievers, each over one store per conversation (so that a word's rarity is the conversation's):

- ``search all`` / ``search any``: ``Session.search(question, limit=10, match=...)`` with the
  whole conversation as ONE session, imported in order (``import_messages``: each turn under the
  one before, created at its LoCoMo session's date plus one second per turn).
- ``manager.search``: a ``SessionManager`` with one session per LoCoMo session, the same turns
  appended (``append_all``, ``created_at`` in each message); ``manager.search(question, limit=10)``.
- ``session_search``: the manager's tool, ``tool.invoke({"query": question})``; a hit when the raw
  text of an evidence turn appears in its output.
- ``bm25``: ``rank_bm25.BM25Okapi`` over lowercased ``\\w+`` tokens of ``"<speaker>: <text>"``,
  the top k by ``get_scores`` (the anchor; the data's README gives 50.4% recall_any@5, 58.8% @10).

The library's retrievers run on SQLite and on PostgreSQL (a temporary schema per store, left out
with a note if no server answers). Figures: recall_any@k (an evidence turn among the top k),
recall_all@k (every evidence turn among them), k = 1, 5, 10, and the share of questions with no
result at all; per category and overall; the median time per query. Results:
``results/retrieval.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
PG_URL = os.environ.get("SESSIONS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")

from sessions_core import Session, SessionManager, SqliteStore  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10)
LIMIT = max(KS)
TARGETS = [  # (retriever, metric, floor)
    ("search any", "recall_any@5", 0.60),
    ("search any", "recall_all@10", 0.55),
    ("session_search", "hit", 0.70),
]


# -- data -----------------------------------------------------------------------------------------


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    session: int
    created_at: datetime

    @property
    def content(self) -> str:
        """The message text stored for this turn."""
        text = f"{self.speaker}: {self.text}"
        return f"{text} [shares a photo: {self.caption}]" if self.caption else text


@dataclass
class Question:
    question: str
    answer: Any
    evidence: list[str]
    category: int


@dataclass
class Conversation:
    name: str
    speaker_a: str
    speaker_b: str
    sessions: dict[int, tuple[str, list[Turn]]]  # K -> (date_time as written, turns in order)
    questions: list[Question]
    mended: list[str] = field(default_factory=list)  # notes on evidence ids read differently
    left_out: int = 0  # questions outside category 5 without any evidence turn

    @property
    def turns(self) -> list[Turn]:
        return [turn for _, turns in self.sessions.values() for turn in turns]

    def message(self, turn: Turn) -> dict[str, Any]:
        return {
            "id": turn.dia_id,
            "role": "user" if turn.speaker == self.speaker_a else "assistant",
            "parts": [{"type": "text", "text": turn.content}],
        }


def data_folder(given: str | Path | None = None) -> Path:
    """``--data``, else ``LOCOMO_DIR``, else ``../shared/data/locomo`` from the repository root."""
    return Path(given or os.environ.get("LOCOMO_DIR") or DEFAULT_DATA).expanduser().resolve()


def parse_date(text: str) -> datetime:
    """``"1:47 pm on 18 May, 2023"`` as a UTC datetime."""
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def evidence_ids(raw: Iterable[str], known: set[str], notes: list[str]) -> list[str]:
    """The evidence ids naming turns of the conversation, in order, each once."""
    found: list[str] = []
    for entry in raw:
        read = []
        for piece in re.split(r"[;,\s]+", entry.strip()):
            match = re.fullmatch(r"D:?(\d+):(\d+)", piece)
            read.append(f"D{match.group(1)}:{match.group(2)}" if match else piece)
        kept = [dia_id for dia_id in read if dia_id in known]
        if read != [entry] or not kept:
            notes.append(f"{entry!r} read as {', '.join(kept) or 'nothing (names no turn): dropped'}")
        found += [dia_id for dia_id in kept if dia_id not in found]
    return found


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text())
    keys = sorted(int(m.group(1)) for key in data if (m := re.fullmatch(r"session_(\d+)", key)))
    sessions: dict[int, tuple[str, list[Turn]]] = {}
    for k in keys:
        written = data[f"session_{k}_date_time"]
        start = parse_date(written)
        turns = [
            Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption"), k, start + timedelta(seconds=i))
            for i, t in enumerate(data[f"session_{k}"])
        ]
        sessions[k] = (written, turns)
    conversation = Conversation(path.stem, data["speaker_a"], data["speaker_b"], sessions, [])
    known = {turn.dia_id for turn in conversation.turns}
    for qa in data["qa"]:
        if qa["category"] not in CATEGORIES:
            continue
        evidence = evidence_ids(qa.get("evidence", []), known, conversation.mended)
        if not evidence:
            conversation.left_out += 1
            continue
        conversation.questions.append(Question(qa["question"], qa.get("answer"), evidence, qa["category"]))
    return conversation


def load(folder: Path, names: list[str] | None = None, limit_questions: int | None = None) -> list[Conversation]:
    paths = (
        [folder / f"{name}.json" for name in names]
        if names
        else sorted(folder.glob("conv-*.json"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    )
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        raise FileNotFoundError(f"LoCoMo conversations not found: {', '.join(missing) or folder}")
    conversations = [load_conversation(path) for path in paths]
    if limit_questions is not None:
        for conversation in conversations:
            conversation.questions = conversation.questions[:limit_questions]
    return conversations


# -- stores ---------------------------------------------------------------------------------------


class Stores:
    """New stores, one per call, and their cleanup: SQLite files in a temporary folder, or
    PostgreSQL schemas dropped at the end."""

    def __init__(self, backend: str, folder: Path | None = None) -> None:
        self.backend, self.folder = backend, folder
        self.opened: list[Any] = []
        self.schemas: list[str] = []

    def new(self, tag: str) -> Any:
        if self.backend == "sqlite":
            store = SqliteStore(self.folder / f"{tag}-{uuid.uuid4().hex[:6]}.db")
        else:
            from sessions_core import PostgresStore

            schema = f"bench_retrieval_{uuid.uuid4().hex[:10]}"
            self.schemas.append(schema)
            store = PostgresStore(PG_URL, schema=schema)
        store.setup()
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()
        self.opened.clear()
        if self.schemas:
            import psycopg

            with psycopg.connect(PG_URL, autocommit=True) as conn:
                for schema in self.schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            self.schemas.clear()


def postgres_unavailable() -> str | None:
    """Why PostgreSQL cannot be used here, or ``None``."""
    try:
        import psycopg

        from sessions_core import PostgresStore  # noqa: F401

        psycopg.connect(PG_URL, connect_timeout=3).close()
    except Exception as error:
        return f"{type(error).__name__}: {error}".strip()
    return None


def one_session(conversation: Conversation, store: Any) -> Session:
    """The conversation as one session: every turn in order, each under the one before."""
    session = Session(store).for_session(conversation.name)
    session.import_messages([(conversation.message(t), t.created_at) for t in conversation.turns], parent_id=None)
    return session


def one_manager(conversation: Conversation, store: Any) -> SessionManager:
    """A manager with one session per LoCoMo session, named after it and its date."""
    manager = SessionManager(store, namespace=conversation.name)
    for k, (written, turns) in conversation.sessions.items():
        info = manager.create(f"session_{k} ({written})")
        manager.append_all(info.id, [conversation.message(t) | {"created_at": t.created_at} for t in turns], None)
    return manager


# -- retrievers -----------------------------------------------------------------------------------

# A retriever, built for one conversation: question -> ranked ids (or, for the tool, its output).
Ranker = Callable[[str], Any]


def bm25_ranker(conversation: Conversation) -> Ranker:
    import numpy as np
    from rank_bm25 import BM25Okapi

    turns = conversation.turns
    index = BM25Okapi([tokens(f"{t.speaker}: {t.text}") for t in turns])
    ids = [t.dia_id for t in turns]

    def rank(question: str) -> list[str]:
        scores = index.get_scores(tokens(question))
        order = np.argsort(-scores, kind="stable")[:LIMIT]
        return [ids[i] for i in order]

    return rank


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def library_rankers(conversation: Conversation, stores: Stores) -> dict[str, Ranker]:
    """The library's retrievers over new stores for this conversation."""
    session = one_session(conversation, stores.new(f"{conversation.name}-session"))
    manager = one_manager(conversation, stores.new(f"{conversation.name}-manager"))
    [tool] = manager.tools()
    return {
        "search all": lambda q: [r.id for r in session.search(q, limit=LIMIT, match="all")],
        "search any": lambda q: [r.id for r in session.search(q, limit=LIMIT)],
        "manager.search": lambda q: [r.id for r in manager.search(q, limit=LIMIT)],
        "session_search": lambda q: tool.invoke({"query": q}),
    }


# -- scoring --------------------------------------------------------------------------------------


def score_ranked(ranked: list[str], evidence: list[str]) -> dict[str, float]:
    figures: dict[str, float] = {}
    for k in KS:
        top = set(ranked[:k])
        figures[f"recall_any@{k}"] = float(any(e in top for e in evidence))
        figures[f"recall_all@{k}"] = float(all(e in top for e in evidence))
    figures["no_result"] = float(not ranked)
    return figures


def score_tool(output: str, evidence: list[str], texts: dict[str, str]) -> dict[str, float]:
    return {
        "hit": float(any(texts[e] in output for e in evidence)),
        "no_result": float(output.strip() == "No results found."),
    }


@dataclass
class Tally:
    """Per-question figures of one retriever, and the time each query took."""

    rows: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    build_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        def mean(rows: list[dict[str, float]]) -> dict[str, float]:
            return {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]} if rows else {}

        by_category = {}
        for number, name in CATEGORIES.items():
            rows = [r for c, r in self.rows if c == number]
            by_category[f"{number} {name}"] = {"questions": len(rows), **mean(rows)}
        return {
            "questions": len(self.rows),
            "overall": mean([r for _, r in self.rows]),
            "by_category": by_category,
            "p50_ms": statistics.median(self.seconds) * 1e3 if self.seconds else None,
            "build_s": self.build_s,
        }


def ask(tally: Tally, conversation: Conversation, rank: Ranker, tool: bool = False) -> None:
    texts = {t.dia_id: t.text for t in conversation.turns}
    for q in conversation.questions:
        started = time.perf_counter()
        found = rank(q.question)
        tally.seconds.append(time.perf_counter() - started)
        figures = score_tool(found, q.evidence, texts) if tool else score_ranked(found, q.evidence)
        tally.rows.append((q.category, figures))


def run(
    conversations: list[Conversation],
    backends: Iterable[str] = ("sqlite", "postgresql"),
    bm25: bool = True,
    folder: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Every retriever over every conversation: ``{retriever: summary}`` (``Tally.summary``)."""
    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory(prefix="bench_retrieval_") as name:
        for backend in backends:
            stores = Stores(backend, Path(folder or name))
            try:
                for conversation in conversations:
                    started = time.perf_counter()
                    rankers = library_rankers(conversation, stores)
                    built = time.perf_counter() - started
                    for label, rank in rankers.items():
                        tally = tallies.setdefault(f"{backend} {label}", Tally())
                        tally.build_s += built
                        ask(tally, conversation, rank, tool=label == "session_search")
            finally:
                stores.close()
    if bm25:
        tally = tallies["bm25"] = Tally()
        for conversation in conversations:
            started = time.perf_counter()
            rank = bm25_ranker(conversation)
            tally.build_s += time.perf_counter() - started
            ask(tally, conversation, rank)
    return {label: tally.summary() for label, tally in tallies.items()}


# -- report ---------------------------------------------------------------------------------------

RANKED = [f"recall_any@{k}" for k in KS] + [f"recall_all@{k}" for k in KS] + ["no_result"]


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def overall_table(results: dict[str, dict[str, Any]]) -> str:
    headers = ["retriever", "any@1", "any@5", "any@10", "all@1", "all@5", "all@10", "empty", "tool hit", "p50 ms"]
    rows = []
    for label, found in results.items():
        o = found["overall"]
        rows.append([label, *(pct(o.get(m)) for m in RANKED), pct(o.get("hit")), f"{found['p50_ms']:.2f}"])
    return table(headers, rows)


def category_table(results: dict[str, dict[str, Any]]) -> str:
    shown = ["recall_any@5", "recall_any@10", "recall_all@10"]
    first = next(iter(results.values()))["by_category"]
    headers = ["retriever"] + list(first)
    rows = []
    for label, found in results.items():
        cells = []
        for figures in found["by_category"].values():
            if not figures.get("questions"):
                cells.append("-")
            elif "hit" in figures:  # the tool: one figure
                cells.append(f"hit {pct(figures['hit'])}")
            else:
                cells.append(" / ".join(pct(figures[metric]) for metric in shown))
        rows.append([label, *cells])
    counts = ", ".join(f"{name}: {figures['questions']}" for name, figures in first.items())
    return (
        f"cells: recall_any@5 / recall_any@10 / recall_all@10 (the tool: its hit share)\n"
        f"questions per category: {counts}\n" + table(headers, rows)
    )


def check_targets(results: dict[str, dict[str, Any]], backends: Iterable[str]) -> list[dict[str, Any]]:
    checks = []
    for backend in backends:
        for retriever, metric, floor in TARGETS:
            label = f"{backend} {retriever}"
            if label in results:
                value = results[label]["overall"][metric]
                checks.append(
                    {"retriever": label, "metric": metric, "target": floor, "value": value, "pass": value >= floor}
                )
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the LoCoMo folder (default: $LOCOMO_DIR, else ../shared/data/locomo)")
    parser.add_argument("--conversations", help="comma-separated names, e.g. conv-26,conv-30 (default: all)")
    parser.add_argument("--limit-questions", type=int, help="the first N questions of each conversation")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--out", type=Path, default=RESULTS / "retrieval.json")
    parser.add_argument(
        "--speed",
        action="store_true",
        help="also time 10-word questions over 1,000,000 messages (bench_search_speed.py)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    folder = data_folder(args.data)
    names = [n.strip() for n in args.conversations.split(",") if n.strip()] if args.conversations else None
    try:
        conversations = load(folder, names, args.limit_questions)
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 2
    questions = sum(len(c.questions) for c in conversations)
    print(
        f"LoCoMo at {folder}: {len(conversations)} conversations, {sum(len(c.turns) for c in conversations)}"
        f" turns, {questions} questions (category 5 left out; {sum(c.left_out for c in conversations)}"
        f" without evidence left out)"
    )
    for conversation in conversations:
        for note in conversation.mended:
            print(f"  {conversation.name} evidence: {note}")
    backends = ["sqlite"]
    if args.no_postgres:
        print("PostgreSQL left out (--no-postgres)")
    elif (reason := postgres_unavailable()) is not None:
        print(f"PostgreSQL left out: no server answers at {PG_URL} ({reason})")
    else:
        backends.append("postgresql")
    results = run(conversations, backends)
    print()
    print("Overall (%; empty: share of questions with no result; tool hit: evidence text in the tool's output)")
    print(overall_table(results))
    print()
    print("Per category (%)")
    print(category_table(results))
    print()
    checks = check_targets(results, backends)
    for check in checks:
        print(
            f"target {check['retriever']} {check['metric']} >= {check['target'] * 100:.0f}%:"
            f" {check['value'] * 100:.1f}% {'PASS' if check['pass'] else 'FAIL'}"
        )
    bm25 = results["bm25"]["overall"]
    print(
        f"anchor: bm25 recall_any@5 {bm25['recall_any@5'] * 100:.1f}%, @10 {bm25['recall_any@10'] * 100:.1f}%"
        " (the data's README: 50.4%, 58.8% over all six)"
    )
    speed = None
    if args.speed:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_search_speed

        print("\nSearch speed over 1,000,000 messages")
        speed = bench_search_speed.run(postgres="postgresql" in backends)
    elapsed = time.perf_counter() - started
    print(f"run time: {elapsed:.1f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "data": str(folder),
                "conversations": [c.name for c in conversations],
                "questions": questions,
                "limit_questions": args.limit_questions,
                "backends": backends,
                "evidence_notes": {c.name: c.mended for c in conversations if c.mended},
                "retrievers": results,
                "targets": checks,
                "speed": speed,
                "run_s": elapsed,
                "load_average": os.getloadavg(),
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
