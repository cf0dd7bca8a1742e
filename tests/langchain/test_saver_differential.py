"""``SessionSaver`` against LangGraph's ``SqliteSaver`` on random operations (issue 33): the same
checkpoints (parents, metadata), pending writes and thread deletions go to both, over threads and
checkpoint namespaces with spaces, ``|`` and non-ASCII letters, and every ``get_tuple`` and
``list`` (by thread, namespace, metadata filter, ``before``, ``limit``, and across threads) gives
the same checkpoints in the same order, with the same parents and writes. (``InMemorySaver``
orders a thread's namespaces differently, so it is not the reference here.)"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_sessions import SessionSaver

from ..postgres import sqlite_or_postgres

THREADS = ("t1", "t2", "ü 3")
NAMESPACES = ("", "child:1", "a|b")
FILTERS: tuple[dict[str, Any] | None, ...] = (
    None,
    {"source": "loop"},
    {"step": 1},
    {"user": "a"},
    {"user": None},
    {"source": "input", "step": 0},
)
STEPS = 200


@pytest.fixture(params=["sqlite", "postgres"])
def ours(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionSaver]:
    with sqlite_or_postgres(request.param, tmp_path) as backing:
        yield SessionSaver(backing)


@pytest.fixture
def theirs(tmp_path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(tmp_path / "langgraph.db", check_same_thread=False)
    yield SqliteSaver(conn)
    conn.close()


def _shown(found: Iterable[CheckpointTuple | None]) -> list[tuple[Any, ...]]:
    """Each checkpoint as what a reader sees of it: where it is, its id, its parent and its writes."""
    return [
        (
            item.config["configurable"]["thread_id"],
            item.config["configurable"]["checkpoint_ns"],
            item.checkpoint["id"],
            item.checkpoint["channel_values"],
            item.metadata,
            item.parent_config and item.parent_config["configurable"]["checkpoint_id"],
            sorted((task, channel, repr(value)) for task, channel, value in item.pending_writes or []),
        )
        for item in found
        if item is not None
    ]


@pytest.mark.parametrize("seed", range(3))
def test_random_operations_read_back_as_sqlite_saver_reads_them(
    ours: SessionSaver, theirs: SqliteSaver, seed: int
) -> None:
    rng = random.Random(seed)
    savers = (ours, theirs)
    latest: dict[tuple[str, str], str] = {}
    for step in range(STEPS):
        roll, thread, ns = rng.random(), rng.choice(THREADS), rng.choice(NAMESPACES)
        where = f"seed {seed}, step {step}"
        if roll < 0.5:
            parent = latest.get((thread, ns))
            config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
            if parent:
                config["configurable"]["checkpoint_id"] = parent
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=-1))
            checkpoint["channel_values"] = {"x": step}
            checkpoint["channel_versions"] = {"x": ours.get_next_version(None, None)}
            metadata: Any = {"source": rng.choice(["input", "loop"]), "step": rng.randint(-1, 3)}
            metadata["user"] = rng.choice(["a", "b", None])
            for saver in savers:
                saver.put(config, checkpoint, metadata, dict(checkpoint["channel_versions"]))  # type: ignore[arg-type]
            latest[(thread, ns)] = checkpoint["id"]
        elif roll < 0.6 and (thread, ns) in latest:
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": latest[(thread, ns)]}}
            writes = [("x", rng.randint(0, 9)), ("y", "v")][: rng.randint(1, 2)]
            task = rng.choice(["task1", "task2"])
            for saver in savers:
                saver.put_writes(config, writes, task)  # type: ignore[arg-type]
        elif roll < 0.65:
            for saver in savers:
                saver.delete_thread(thread)
            latest = {key: value for key, value in latest.items() if key[0] != thread}
        elif roll < 0.8:
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
            mine, their = (saver.get_tuple(config) for saver in savers)  # type: ignore[arg-type]
            assert _shown([mine]) == _shown([their]), where
        else:
            listed = rng.choice(
                [
                    None,
                    {"configurable": {"thread_id": thread}},
                    {"configurable": {"thread_id": thread, "checkpoint_ns": ns}},
                ]
            )
            options: dict[str, Any] = {"filter": rng.choice(FILTERS), "limit": rng.choice([None, 1, 3])}
            if rng.random() < 0.3 and (thread, ns) in latest:
                options["before"] = {"configurable": {"checkpoint_id": latest[(thread, ns)]}}
            mine_listed = _shown(ours.list(listed, **options))  # type: ignore[arg-type]
            their_listed = _shown(theirs.list(listed, **options))  # type: ignore[arg-type]
            assert mine_listed == their_listed, (where, listed, options)
