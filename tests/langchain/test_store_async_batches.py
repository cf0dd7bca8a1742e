"""``SessionStore``'s async calls awaited together run as one batch (as LangGraph's
``AsyncBatchedBaseStore``): results per call as if each ran alone, far fewer batches, and a bad
call fails alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from langchain_sessions import SessionStore
from sessions_core import InvalidInputError


def _counting(store: SessionStore) -> list[int]:
    """The size of each batch the store runs (wrapping its batch runner)."""
    sizes: list[int] = []
    run = store._batches._run

    async def counted(ops: list[Any]) -> list[Any]:
        sizes.append(len(ops))
        return await run(ops)

    store._batches._run = counted
    return sizes


@pytest.mark.asyncio
async def test_concurrent_calls_run_in_few_batches_with_each_its_own_result(tmp_path: Path) -> None:
    with SessionStore(str(tmp_path / "items.db")) as store:
        sizes = _counting(store)
        await asyncio.gather(*(store.aput(("docs", str(n % 3)), f"k{n}", {"text": f"note {n}"}) for n in range(300)))
        assert len(sizes) <= 3 and sum(sizes) == 300
        sizes.clear()
        got, searched, listed = await asyncio.gather(
            asyncio.gather(*(store.aget(("docs", str(n % 3)), f"k{n}") for n in range(300))),
            asyncio.gather(*(store.asearch(("docs",), query="note", limit=5) for _ in range(50))),
            asyncio.gather(*(store.alist_namespaces(prefix=("docs",)) for _ in range(50))),
        )
        assert [item.value["text"] for item in got] == [f"note {n}" for n in range(300)]
        assert all(len(found) == 5 for found in searched)
        assert searched[0] is not searched[1]  # a shared read, each caller its own list
        assert all(namespaces == [("docs", "0"), ("docs", "1"), ("docs", "2")] for namespaces in listed)
        assert len(sizes) <= 3 and sum(sizes) < 400  # the 50 identical searches and listings read once


@pytest.mark.asyncio
async def test_reads_of_a_group_see_the_store_before_its_puts_and_later_calls_see_them(tmp_path: Path) -> None:
    with SessionStore(str(tmp_path / "items.db")) as store:
        await store.aput(("n",), "k", {"v": 1})
        await asyncio.gather(store.aput(("n",), "k", {"v": 2}), store.aput(("n",), "k", {"v": 3}))
        assert (await store.aget(("n",), "k")).value == {"v": 3}  # the later of two puts in a group
        await store.adelete(("n",), "k")
        assert await store.aget(("n",), "k") is None


@pytest.mark.asyncio
async def test_a_bad_call_fails_alone_and_the_others_of_its_group_land(tmp_path: Path) -> None:
    with SessionStore(str(tmp_path / "items.db")) as store:
        sizes = _counting(store)
        first = asyncio.ensure_future(store.aput(("g",), "first", {"v": 0}))
        await asyncio.sleep(0)  # the first batch runs; the next calls wait for it, together
        results = await asyncio.gather(
            store.aput(("g",), "a", {"v": 1}),
            store.asearch(("g",), filter={'bad"key': 1}),
            store.aput(("g",), "b", {"v": 2}),
            return_exceptions=True,
        )
        await first
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], InvalidInputError)
        assert sorted(item.key for item in await store.asearch(("g",))) == ["a", "b", "first"]
        assert sizes[:2] == [1, 3]  # the group ran as one, then each call alone for its own error


@pytest.mark.asyncio
async def test_a_namespace_refused_before_anything_runs(tmp_path: Path) -> None:
    with SessionStore(str(tmp_path / "items.db")) as store:
        with pytest.raises(ValueError):
            await store.aput(("bad.label",), "k", {"v": 1})
        assert await store.asearch(()) == []


def test_calls_on_two_event_loops_in_turn(tmp_path: Path) -> None:
    with SessionStore(str(tmp_path / "items.db")) as store:
        asyncio.run(store.aput(("l",), "one", {"v": 1}))
        assert asyncio.run(store.aget(("l",), "one")).value == {"v": 1}
        assert store._batches._waiting == {}
