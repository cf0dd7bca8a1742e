"""A read with ``refresh`` moves an item's expiry to its TTL from now, on SQLite and PostgreSQL
alike, except within a hundredth of the TTL (at most a second) of the last refresh or write: an
item read again that soon keeps its expiry and the read writes nothing. An item without a TTL
never gets one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions_core import SqliteStore
from sessions_core.items import ItemPut, Items

from .postgres import postgres_url, require_postgres, temporary_schema


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        opened: Any = SqliteStore(tmp_path / "items.db")
        yield opened
        opened.close()
        return
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        opened = PostgresStore(postgres_url(), schema=schema, max_size=2)
        yield opened
        opened.close()


def _expiry(store: Any, key: str) -> int | None:
    sql = store.compile("SELECT expires_at FROM store_items WHERE key = :k")
    return store._read(lambda conn: conn.execute(sql, {"k": key}).fetchone()[0])


def test_a_refresh_moves_the_expiry_unless_the_item_was_refreshed_within_a_hundredth_of_its_ttl(store, clock):
    items = Items(store)
    items.put_many([ItemPut(("t",), "k", {"v": 1}, ttl_minutes=1), ItemPut(("t",), "plain", {"v": 2})])
    written = _expiry(store, "k")
    assert written is not None

    found = items.get_many([(("t",), "k"), (("t",), "plain")], refresh=True)
    assert [item.value for item in found if item is not None] == [{"v": 1}, {"v": 2}]
    assert _expiry(store, "k") == written  # read at its write's time: kept
    assert _expiry(store, "plain") is None

    clock.advance(0.59)
    assert items.get(("t",), "k", refresh=True) is not None
    assert _expiry(store, "k") == written  # read within 0.6 s of its write: kept
    clock.advance(0.06)
    assert items.get(("t",), "k", refresh=True) is not None
    refreshed = _expiry(store, "k")
    assert refreshed is not None and refreshed >= written + 600_000
    assert items.get(("t",), "k", refresh=True) is not None
    assert _expiry(store, "k") == refreshed
    assert [version.version for version in items.versions(("t",), "k")] == [1]
