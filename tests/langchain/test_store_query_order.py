"""A query to ``SessionStore`` without an embedding index orders the items and never hides one, as
LangGraph's stores do (``SqliteStore`` and ``PostgresStore`` ignore such a query and list every
item the filter keeps, the most recently updated first; ``InMemoryStore`` lists its unscored
items after its scored ones): the keyword search's matches come first, by rank and scored, then
the other items, the most recently updated first, unscored; ``limit`` and ``offset`` page
through the whole. (LangGraph's ``SqliteStore`` keeps times to the second: the sets are compared
with it, the order with our own update times.)"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore as LangGraphSqliteStore

from langchain_sessions import SessionStore

from .helpers import matched

NAMESPACE = ("memories", "ada")
MEMORIES = [
    ("tea", {"kind": "drink", "text": "Ada drinks green tea"}),
    ("coffee", {"kind": "drink", "text": "Ada never drinks coffee"}),
    ("cake", {"kind": "food", "text": "green tea cake on Sundays"}),
    ("water", {"kind": "drink", "text": "a glass of water at night"}),
    ("bike", {"kind": "hobby", "text": "Ada cycles to work"}),
]


def _fill(store: BaseStore) -> None:
    for key, value in MEMORIES:
        store.put(NAMESPACE, key, value)
        time.sleep(0.002)  # distinct update times


@pytest.fixture
def stores() -> Iterator[tuple[SessionStore, BaseStore]]:
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    theirs = LangGraphSqliteStore(conn)
    theirs.setup()
    ours = SessionStore(":memory:")
    for store in (ours, theirs):
        _fill(store)
    yield ours, theirs
    ours.close()
    conn.close()


def test_matches_come_first_then_every_other_item(
    stores: tuple[SessionStore, BaseStore],
) -> None:
    ours, theirs = stores
    found = ours.search(NAMESPACE, query="green tea", limit=10)
    assert sorted(item.key for item in matched(found)) == ["cake", "tea"]
    assert all(item.score is not None for item in found[:2]) and all(item.score is None for item in found[2:])
    langgraph_found = [item.key for item in theirs.search(NAMESPACE, query="green tea", limit=10)]
    assert sorted(item.key for item in found) == sorted(langgraph_found)  # nothing hidden
    assert [item.key for item in found[2:]] == ["bike", "water", "coffee"]  # the most recently updated first


def test_limit_and_offset_page_through_matches_and_the_rest(stores: tuple[SessionStore, BaseStore]) -> None:
    ours, _theirs = stores
    whole = [item.key for item in ours.search(NAMESPACE, query="green tea", limit=10)]
    pages = [[item.key for item in ours.search(NAMESPACE, query="green tea", limit=2, offset=o)] for o in (0, 2, 4)]
    assert pages == [whole[0:2], whole[2:4], whole[4:6]]
    assert [item.key for item in ours.search(NAMESPACE, query="green tea", limit=3, offset=1)] == whole[1:4]
    assert ours.search(NAMESPACE, query="green tea", limit=2, offset=5) == []


def test_the_filter_holds_for_the_rest_too(stores: tuple[SessionStore, BaseStore]) -> None:
    ours, theirs = stores
    found = ours.search(NAMESPACE, query="green tea", filter={"kind": "drink"}, limit=10)
    assert [item.key for item in matched(found)] == ["tea"]
    assert [item.key for item in found] == ["tea", "water", "coffee"]
    assert sorted(item.key for item in theirs.search(NAMESPACE, query="green tea", filter={"kind": "drink"})) == sorted(
        item.key for item in found
    )


def test_a_query_matching_nothing_gives_what_langgraph_gives(stores: tuple[SessionStore, BaseStore]) -> None:
    ours, theirs = stores
    for query in ("Noted.", "zeppelin"):
        found = ours.search(NAMESPACE, query=query, limit=10)
        assert matched(found) == []
        assert [item.key for item in found] == [item.key for item in ours.search(NAMESPACE, limit=10)]
        assert sorted(item.key for item in found) == sorted(item.key for item in theirs.search(NAMESPACE, query=query))
    assert [item.key for item in ours.search(NAMESPACE, query="Noted.", limit=2)] == ["bike", "water"]


@pytest.mark.asyncio
async def test_the_async_search_orders_the_same(stores: tuple[SessionStore, BaseStore]) -> None:
    ours, _theirs = stores
    found = await ours.asearch(NAMESPACE, query="green tea", limit=10)
    assert [item.key for item in found] == [item.key for item in ours.search(NAMESPACE, query="green tea", limit=10)]


def test_a_query_of_stop_words_is_no_query(stores: tuple[SessionStore, BaseStore]) -> None:
    ours, _theirs = stores
    listing = [item.key for item in ours.search(NAMESPACE, limit=10)]
    assert [item.key for item in ours.search(NAMESPACE, query="the of and", limit=10)] == listing
    assert [item.key for item in ours.search(NAMESPACE, query="the of and", limit=2, offset=3)] == listing[3:5]
