"""``SessionSaver.get_delta_channel_history``: what ``BaseCheckpointSaver``'s walk (one
``get_tuple`` per ancestor) gives, read a page of ancestors per statement: on random trees of
checkpoints with writes and stored values, forks, missing parents and chains longer than a page,
on SQLite and PostgreSQL, sync and async; a chain that loops ends; and a DeltaChannel graph
resumes through it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.graph import START, StateGraph

from langchain_sessions import SessionSaver

from ..postgres import postgres_url, require_postgres, temporary_schema

CHANNELS = ["messages", "notes", "other"]


@pytest.fixture(params=["sqlite", "postgres"])
def saver(request: pytest.FixtureRequest) -> Iterator[SessionSaver]:
    if request.param == "sqlite":
        with SessionSaver(":memory:") as made:
            yield made
        return
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema, SessionSaver(PostgresStore(postgres_url(), schema=schema, max_size=2)) as made:
        yield made


def _tree(saver: SessionSaver, rng: random.Random, thread: str, size: int) -> list[str]:
    """``size`` checkpoints of ``thread``, each under a random earlier one (a chain mostly, with
    forks), some storing a value of some channels, each with writes to random channels."""
    ids: list[str] = []
    for n in range(size):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = f"{n:06d}"
        checkpoint["channel_values"] = {c: f"value {c} at {n}" for c in CHANNELS if rng.random() < 0.08}
        parent = None if not ids or rng.random() < 0.03 else (ids[-1] if rng.random() < 0.85 else rng.choice(ids))
        configurable = {"thread_id": thread, "checkpoint_ns": ""}
        if parent is not None:
            configurable["checkpoint_id"] = parent
        stored = saver.put({"configurable": configurable}, checkpoint, {"source": "loop", "step": n, "parents": {}}, {})
        writes = [(rng.choice(CHANNELS), f"write {n}.{i}") for i in range(rng.randint(0, 3))]
        for task in ("task-b", "task-a")[: rng.randint(1, 2)]:
            if writes:
                saver.put_writes(stored, writes, task, task_path=f"~{task}")
        ids.append(checkpoint["id"])
    return ids


def _configs(thread: str, ids: list[str], rng: random.Random) -> list[dict[str, Any]]:
    picked = rng.sample(ids, min(12, len(ids))) + ["missing"]
    return [{"configurable": {"thread_id": thread, "checkpoint_ns": ""}}] + [
        {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cid}} for cid in picked
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_history_is_what_the_base_walk_gives_sync_and_async(saver: SessionSaver, seed: int) -> None:
    rng = random.Random(seed)
    thread = f"t{seed}"
    ids = _tree(saver, rng, thread, 320)  # chains far longer than a first page of 32
    seeded = written = 0
    for config in _configs(thread, ids, rng):
        channels = rng.sample(CHANNELS, rng.randint(1, 3))
        expected = BaseCheckpointSaver.get_delta_channel_history(saver, config=config, channels=channels)
        assert saver.get_delta_channel_history(config=config, channels=channels) == expected  # type: ignore[arg-type]
        found = asyncio.run(saver.aget_delta_channel_history(config=config, channels=channels))  # type: ignore[arg-type]
        assert found == expected
        seeded += sum("seed" in entry for entry in expected.values())
        written += sum(len(entry["writes"]) for entry in expected.values())
    assert seeded >= 5 and written >= 50  # the trees exercise both halves of the history
    assert saver.get_delta_channel_history(config=_configs(thread, ids, rng)[0], channels=[]) == {}  # type: ignore[arg-type]


def test_a_long_chain_is_read_in_a_few_statements(saver: SessionSaver, monkeypatch: pytest.MonkeyPatch) -> None:
    previous = None
    for n in range(300):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = f"{n:06d}"
        checkpoint["channel_values"] = {"messages": "seed"} if n == 0 else {}
        configurable = {"thread_id": "long", "checkpoint_ns": ""}
        if previous is not None:
            configurable["checkpoint_id"] = previous
        stored = saver.put({"configurable": configurable}, checkpoint, {"source": "loop", "step": n, "parents": {}}, {})
        saver.put_writes(stored, [("messages", f"m{n}")], "task")
        previous = checkpoint["id"]
    calls: list[int] = []
    ancestors = saver.checkpoints.ancestors
    monkeypatch.setattr(saver.checkpoints, "ancestors", lambda *args: calls.append(args[3]) or ancestors(*args))
    config = {"configurable": {"thread_id": "long", "checkpoint_ns": "", "checkpoint_id": previous}}
    history = saver.get_delta_channel_history(config=config, channels=["messages"])  # type: ignore[arg-type]
    assert history["messages"]["seed"] == "seed"
    assert [write[2] for write in history["messages"]["writes"]] == [f"m{n}" for n in range(299)]
    assert calls == [32, 256, 1024]  # three statements where the base walk makes 300 get_tuple calls


def test_a_chain_that_loops_ends_where_it_repeats(saver: SessionSaver) -> None:
    config = {"configurable": {"thread_id": "loop", "checkpoint_ns": ""}}
    for cid, parent in (("a", None), ("b", "a"), ("c", "b"), ("a", "c")):  # "a" put again under its descendant
        checkpoint = empty_checkpoint()
        checkpoint["id"] = cid
        configurable = {**config["configurable"], **({"checkpoint_id": parent} if parent else {})}
        stored = saver.put({"configurable": configurable}, checkpoint, {"source": "loop", "step": 0, "parents": {}}, {})
        saver.put_writes(stored, [("messages", f"w{cid}")], "task")
    target = {"configurable": {**config["configurable"], "checkpoint_id": "c"}}
    history = saver.get_delta_channel_history(config=target, channels=["messages"])  # type: ignore[arg-type]
    assert history == {"messages": {"writes": [("task", "messages", "wa"), ("task", "messages", "wb")]}}


def _add(current: list[AnyMessage], writes: list[list[AnyMessage]]) -> list[AnyMessage]:
    for write in writes:
        current = [*current, *write]
    return current


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add, snapshot_frequency=50)]


def test_a_delta_channel_graph_resumes_with_its_whole_history(
    saver: SessionSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reply(state: DeltaState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"reply {len(state['messages'])}")]}

    graph = StateGraph(DeltaState).add_node("reply", reply).add_edge(START, "reply").compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "delta"}}
    for turn in range(30):
        graph.invoke({"messages": [HumanMessage(f"turn {turn}")]}, config)  # type: ignore[arg-type]
    pages: list[int] = []
    ancestors = saver.checkpoints.ancestors
    monkeypatch.setattr(saver.checkpoints, "ancestors", lambda *args: pages.append(args[3]) or ancestors(*args))
    messages = graph.get_state(config).values["messages"]  # type: ignore[arg-type]
    assert [m.text for m in messages[-2:]] == ["turn 29", "reply 59"] and len(messages) == 60
    assert pages and len(pages) <= 3  # read by pages of ancestors, not a get_tuple each
    stored = saver.get_tuple(config)  # type: ignore[arg-type]
    assert stored is not None and "messages" not in stored.checkpoint["channel_values"]  # not stored each step
