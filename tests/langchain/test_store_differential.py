"""``SessionStore`` against LangGraph's own stores on random operations (issue 33): the same puts
and deletes go to ours, to ``InMemoryStore`` and to LangGraph's ``SqliteStore``, and every read
gives the same items. ``InMemoryStore`` is the reference for ``$eq`` and ``$ne`` (a missing field
is not equal to anything; ``None`` equals a missing field), which LangGraph's SQL stores answer
with SQL's NULL logic instead (they leave out an item without the field on ``$ne``);
``SqliteStore`` for numeric ordering filters, ``get`` and ``list_namespaces`` (``InMemoryStore``
keeps listing a namespace whose items were all deleted, and raises on an ordering filter over a
missing field). Labels with characters that SQL patterns treat specially (``%``, ``_``), spaces
and non-ASCII letters. Namespaces are listed in tuple order, as ``InMemoryStore`` lists them
(``SqliteStore`` orders their dotted text: ``("a%",)`` before ``("a", "b")``). The order of
unranked search results is not compared (LangGraph's SQL stores order by an update time in
seconds)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore as LangGraphSqliteStore

from langchain_sessions import SessionStore

from ..postgres import sqlite_or_postgres

LABELS = ("a", "b", "B", "c", "x y", "ü", "a%", "_", "9", "10")
KEYS = ("k1", "k2", "k3", "k4")
STEPS = 300


@pytest.fixture(params=["sqlite", "postgres"])
def ours(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    with sqlite_or_postgres(request.param, tmp_path) as backing:
        yield SessionStore(backing)


@pytest.fixture
def langgraph_sqlite(tmp_path: Path) -> Iterator[BaseStore]:
    conn = sqlite3.connect(tmp_path / "langgraph.db", isolation_level=None, check_same_thread=False)
    store = LangGraphSqliteStore(conn)
    store.setup()
    yield store
    conn.close()


def _namespace(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.choice(LABELS) for _ in range(rng.randint(1, 3)))


def _value(rng: random.Random) -> dict[str, Any]:
    choices: dict[str, list[Any]] = {
        "n": [0, 1, 2, 2.5, -3, 10],
        "s": ["", "a", "b", "apple", "Apple", "é"],
        "b": [True, False],
        "z": [None],
        "nest": [{"k": 1, "l": [1, 2]}, {"k": "x"}],
    }
    return {field: rng.choice(choices[field]) for field in rng.sample(sorted(choices), rng.randint(0, 4))}


def _equality_filter(rng: random.Random) -> dict[str, Any]:
    choices: dict[str, list[Any]] = {"n": [0, 1, 2, 2.5], "s": ["a", "apple", "b"], "b": [True, False], "z": [None]}
    found: dict[str, Any] = {}
    for field in rng.sample(sorted(choices), rng.randint(1, 2)):
        operand = rng.choice(choices[field])
        op = rng.choice(["$eq", "$ne", None])
        found[field] = operand if op is None else {op: operand}
    return found


def _found(store: BaseStore, prefix: tuple[str, ...], filter: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    return sorted((tuple(item.namespace), item.key) for item in store.search(prefix, filter=filter, limit=1000))


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_read_back_as_langgraphs_stores_read_them(
    ours: SessionStore, langgraph_sqlite: BaseStore, seed: int
) -> None:
    rng = random.Random(seed)
    memory = InMemoryStore()
    stores = (ours, memory, langgraph_sqlite)
    for step in range(STEPS):
        roll = rng.random()
        where = f"seed {seed}, step {step}"
        if roll < 0.45:
            namespace, key, value = _namespace(rng), rng.choice(KEYS), _value(rng)
            for store in stores:
                store.put(namespace, key, value)
        elif roll < 0.55:
            namespace, key = _namespace(rng), rng.choice(KEYS)
            for store in stores:
                store.delete(namespace, key)
        elif roll < 0.65:
            namespace, key = _namespace(rng), rng.choice(KEYS)
            mine, theirs = ours.get(namespace, key), langgraph_sqlite.get(namespace, key)
            assert (mine and mine.value) == (theirs and theirs.value), where
        elif roll < 0.8:
            prefix, filter = _namespace(rng)[: rng.randint(1, 2)], _equality_filter(rng)
            assert _found(ours, prefix, filter) == _found(memory, prefix, filter), (where, prefix, filter)
        elif roll < 0.9:
            prefix = _namespace(rng)[: rng.randint(1, 2)]
            filter = {"n": {rng.choice(["$gt", "$gte", "$lt", "$lte"]): rng.choice([0, 1, 2, 2.5])}}
            assert _found(ours, prefix, filter) == _found(langgraph_sqlite, prefix, filter), (where, prefix, filter)
        else:
            options: dict[str, Any] = {
                "prefix": _namespace(rng)[:1] if rng.random() < 0.5 else None,
                "suffix": _namespace(rng)[:1] if rng.random() < 0.3 else None,
                "max_depth": rng.choice([None, 1, 2]),
                "limit": 1000,
            }
            mine_listed = ours.list_namespaces(**options)
            assert mine_listed == sorted(mine_listed), (where, options)  # tuple order, as InMemoryStore
            assert mine_listed == sorted(langgraph_sqlite.list_namespaces(**options)), (where, options)
