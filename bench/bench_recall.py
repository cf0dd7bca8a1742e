"""Semantic recall (issue 22): what recall costs an append, and how fast the outbox drains.

Run ``python bench/bench_recall.py`` (``--appends 500 --rounds 15 --drain 5000``).

- **Append.** Each round times ``--appends`` ``Session.append_message`` calls of a typical turn
  on one store, for a session with recall on (the outbox row only: the sender is off, so no
  index work is timed) and for one without; rounds alternate and the figure is the median
  round. A third series runs the same appends on a store whose recall triggers are dropped: what
  the outbox's triggers cost sessions that never turn recall on. SQLite file and PostgreSQL.
- **Drain.** ``--drain`` messages appended with recall on, then ``drain()`` times sending them
  all, with LangChain's ``InMemoryVectorStore`` and LlamaIndex's ``SimpleVectorStore`` on the
  offline synonym embedding; the floor is the same texts added straight to a fresh store of the
  same kind in the same batches (the framework alone).

Results: ``results/recall.json``.
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
from typing import Any

HERE = Path(__file__).resolve().parent

from sessions_core import SemanticRecall, Session, SqliteStore  # noqa: E402

TURN = (
    "Could you check whether the automobile lease we signed in March covers winter tyres, and if not "
    "what it would cost to add them before the first snow?"
)
DROP_TRIGGERS_SQLITE = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in (
        "recall_message_insert",
        "recall_message_update",
        "recall_message_delete",
        "recall_entry_insert",
        "recall_entry_update",
        "recall_entry_delete",
    )
]
DROP_TRIGGERS_PG = [
    "DROP TRIGGER IF EXISTS recall_message ON {schema}.session_messages",
    "DROP TRIGGER IF EXISTS recall_entry ON {schema}.search_entries",
]
PG_URL = os.environ.get("SESSIONS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


class NoIndex:
    """An index never called: the append series times the outbox write alone."""

    def add(self, ids: Any, texts: Any, metadatas: Any) -> None:
        raise AssertionError("the append bench sends nothing")

    def delete(self, ids: Any) -> None:
        raise AssertionError("the append bench sends nothing")

    def search(self, query: Any, k: Any, where: Any) -> list:
        return []


def message(n: int) -> dict[str, Any]:
    return {
        "id": f"m{n}",
        "role": "user" if n % 2 == 0 else "assistant",
        "parts": [{"type": "text", "text": f"{TURN} (turn {n})"}],
    }


def appends(store: Any, n: int, recall: bool) -> float:
    """Microseconds per ``append_message`` of a new session (recall on or off)."""
    session = Session(store).for_session(f"bench-{uuid.uuid4().hex[:8]}")
    if recall:
        session.with_semantic_recall(SemanticRecall(NoIndex(), background=False))
    session.append_message(message(-1))  # the first write enables recall (one statement, once)
    started = time.perf_counter()
    for i in range(n):
        session.append_message(message(i))
    return (time.perf_counter() - started) / n * 1e6


def append_series(open_store: Callable[[str], Any], n: int, rounds: int) -> dict[str, Any]:
    on_store, off_store, bare_store = open_store("on"), open_store("off"), open_store("bare")
    bare_store.drop_recall_triggers()
    on, off, bare = [], [], []
    for r in range(rounds):
        order = [(on, on_store, True), (off, off_store, False), (bare, bare_store, False)]
        for bucket, store, recall in order if r % 2 == 0 else order[::-1]:
            bucket.append(appends(store, n, recall))
    for store in (on_store, off_store, bare_store):
        store.close()
    result = {
        "on_us": on,
        "off_us": off,
        "no_triggers_us": bare,
        "on_vs_off": statistics.median(on) / statistics.median(off),
        "off_vs_no_triggers": statistics.median(off) / statistics.median(bare),
    }
    return result


def sqlite_opener(folder: Path) -> Callable[[str], Any]:
    def open_store(tag: str) -> Any:
        store = SqliteStore(folder / f"{tag}.db")
        store.setup()

        def drop() -> None:
            for statement in DROP_TRIGGERS_SQLITE:
                store._execute(statement, {})

        store.drop_recall_triggers = drop
        return store

    return open_store


def postgres_opener() -> Callable[[str], Any] | None:
    try:
        import psycopg

        from sessions_core import PostgresStore

        psycopg.connect(PG_URL, connect_timeout=3).close()
    except Exception as error:  # no server here: the PostgreSQL series is left out, and said so
        print(f"PostgreSQL series left out: {error}")
        return None
    schemas: list[str] = []

    def open_store(tag: str) -> Any:
        schema = f"bench_recall_{tag}_{uuid.uuid4().hex[:6]}"
        schemas.append(schema)
        store = PostgresStore(PG_URL, schema=schema)
        store.setup()

        def drop() -> None:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                for statement in DROP_TRIGGERS_PG:
                    conn.execute(statement.format(schema=schema))

        store.drop_recall_triggers = drop
        return store

    open_store.schemas = schemas
    return open_store


def drop_schemas(schemas: list[str]) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def indexes() -> dict[str, tuple[Callable[[], Any], Callable[[Any, list[str], list[str], list[dict]], None]]]:
    """Each index kind: a new empty index, and the floor (adding texts straight to its store)."""
    found: dict[str, Any] = {}
    try:
        from langchain_core.vectorstores import InMemoryVectorStore

        from langchain_sessions import SynonymEmbeddings, VectorStoreRecall

        def lc_floor(index: Any, ids: list[str], texts: list[str], metadatas: list[dict]) -> None:
            index.vector_store.add_texts(texts, metadatas=metadatas, ids=ids)

        found["langchain InMemoryVectorStore"] = (
            lambda: VectorStoreRecall(InMemoryVectorStore(SynonymEmbeddings())),
            lc_floor,
        )
    except ImportError as error:
        print(f"LangChain left out: {error}")
    try:
        from llama_index.core.schema import TextNode
        from llama_index.core.vector_stores import SimpleVectorStore

        from llamaindex_sessions import SynonymEmbedding
        from llamaindex_sessions import VectorStoreRecall as LlamaRecall

        def li_floor(index: Any, ids: list[str], texts: list[str], metadatas: list[dict]) -> None:
            embeddings = index.embed_model.get_text_embedding_batch(texts)
            index.vector_store.add(
                [
                    TextNode(id_=i, text=t, metadata=m, embedding=e)
                    for i, t, m, e in zip(ids, texts, metadatas, embeddings)
                ]
            )

        found["llamaindex SimpleVectorStore"] = (lambda: LlamaRecall(SimpleVectorStore(), SynonymEmbedding()), li_floor)
    except ImportError as error:
        print(f"LlamaIndex left out: {error}")
    return found


def drain_series(folder: Path, n: int) -> dict[str, Any]:
    results = {}
    for name, (make, floor) in indexes().items():
        store = SqliteStore(folder / f"drain-{len(results)}.db")
        index = make()
        recall = SemanticRecall(index, background=False)
        session = Session(store).for_session("drain").with_semantic_recall(recall)
        session.append_messages([message(i) for i in range(n)])
        started = time.perf_counter()
        report = recall.drain()
        drained = time.perf_counter() - started
        assert report.added == n and recall.backlog().pending == 0, report
        bare = make()
        texts = [f"{TURN} (turn {i})" for i in range(n)]
        metadatas = [{"session_id": "drain", "message_id": f"m{i}"} for i in range(n)]
        ids = [str(uuid.uuid4()) for _ in range(n)]
        started = time.perf_counter()
        for start in range(0, n, recall.batch_size):
            end = start + recall.batch_size
            floor(bare, ids[start:end], texts[start:end], metadatas[start:end])
        alone = time.perf_counter() - started
        store.close()
        results[name] = {
            "messages": n,
            "drain_s": drained,
            "messages_per_s": n / drained,
            "framework_alone_s": alone,
            "ratio_to_framework": drained / alone,
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--drain", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "recall.json")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"appends": args.appends, "rounds": args.rounds}
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench_recall_") as name:
        folder = Path(name)
        series = {"sqlite file": sqlite_opener(folder)}
        pg = postgres_opener()
        if pg is not None:
            series["postgresql"] = pg
        for label, opener in series.items():
            try:
                found = results[label] = append_series(opener, args.appends, args.rounds)
            finally:
                if label == "postgresql":
                    drop_schemas(pg.schemas)
            passed = found["on_vs_off"] <= 1.2
            ok &= passed
            print(
                f"{label}: append {statistics.median(found['on_us']):.0f} µs with recall on,"
                f" {statistics.median(found['off_us']):.0f} µs off: {found['on_vs_off']:.2f}x"
                f" (target <= 1.2x: {'PASS' if passed else 'FAIL'}); off vs no recall triggers at all:"
                f" {found['off_vs_no_triggers']:.2f}x"
            )
        results["drain"] = drain_series(folder, args.drain)
    for label, found in results["drain"].items():
        print(
            f"drain into {label}: {found['messages']} messages in {found['drain_s']:.2f} s"
            f" ({found['messages_per_s']:.0f}/s); the framework alone adds them in"
            f" {found['framework_alone_s']:.2f} s ({found['ratio_to_framework']:.2f}x)"
        )
    results["load_average"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
