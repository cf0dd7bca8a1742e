"""A call that PostgreSQL rolls back to break a deadlock (SQLSTATE 40P01) wrote nothing: the
store runs it again (a few times) instead of reporting a lost connection, and a call that is
not idempotent raises a clear error naming the rollback. The deadlock here is real: two calls
lock two rows in opposite orders."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sessions_core import StoreError

from .postgres import postgres_url, require_postgres, temporary_schema


@pytest.fixture
def store() -> Iterator[Any]:
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        opened = PostgresStore(postgres_url(), schema=schema, max_size=8)
        try:
            opened.setup()
            opened._write(lambda conn: conn.execute(f'CREATE TABLE "{schema}".rows (k int PRIMARY KEY, n int)'))
            opened._write(lambda conn: conn.execute(f'INSERT INTO "{schema}".rows VALUES (1, 0), (2, 0)'))
            yield opened
        finally:
            opened.close()


@pytest.fixture
def rolled_back(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQLSTATE of each transaction the server rolls back in ``store`` (a deadlock: 40P01)."""
    sqlstates: list[str] = []
    original = store._rolled_back

    def spy(error: Any, rollbacks: int, *, idempotent: bool) -> int:
        sqlstates.append(str(error.sqlstate))
        return original(error, rollbacks, idempotent=idempotent)

    monkeypatch.setattr(store, "_rolled_back", spy)
    return sqlstates


def _crossing(store: Any, idempotent: bool) -> tuple[list[BaseException], list[int]]:
    """Two calls at once, each updating row 1 and row 2 in its own order, both holding their
    first row before either asks for its second: the server breaks the deadlock by rolling
    one back. The errors they raised, and how many times each call's work ran."""
    holding = threading.Barrier(2, timeout=10)
    runs = [0, 0]
    errors: list[BaseException] = []
    table = f'"{store.schema}".rows'

    def call(which: int) -> None:
        first, second = (1, 2) if which == 0 else (2, 1)

        def work(conn: Any) -> None:
            runs[which] += 1
            conn.execute(f"UPDATE {table} SET n = n + 1 WHERE k = %s", (first,))
            if runs[which] == 1:
                holding.wait()
            conn.execute(f"UPDATE {table} SET n = n + 1 WHERE k = %s", (second,))

        try:
            store._write(work, idempotent=idempotent)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=call, args=(which,)) for which in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors, runs


def test_a_deadlocked_call_is_run_again_and_no_outage_is_logged(store, caplog):
    caplog.set_level(logging.WARNING, logger="sessions_core")
    errors, runs = _crossing(store, idempotent=True)
    assert errors == [] and sorted(runs) == [1, 2]  # the victim ran again, once
    assert store._all(f'SELECT n FROM "{store.schema}".rows ORDER BY k', {}) == [(2,), (2,)]
    assert [record.getMessage() for record in caplog.records] == []


def test_a_deadlocked_call_that_is_not_idempotent_raises_naming_the_rollback(store, caplog):
    caplog.set_level(logging.WARNING, logger="sessions_core")
    errors, runs = _crossing(store, idempotent=False)
    assert len(errors) == 1 and isinstance(errors[0], StoreError) and runs == [1, 1]
    message = str(errors[0])
    assert "rolled the transaction back" in message and "SQLSTATE 40P01" in message and "wrote nothing" in message
    assert sorted(store._all(f'SELECT n FROM "{store.schema}".rows ORDER BY k', {})) == [(1,), (1,)]
    assert [record.getMessage() for record in caplog.records] == []


def test_concurrent_batches_of_the_same_items_never_deadlock(store, rolled_back):
    """Items (``SessionStore``'s) written by many batches at once, each putting and deleting the
    same keys in its own order: no transaction is ever rolled back for a deadlock (each item's
    row is locked first, in one key order), so none is run again."""
    from sessions_core.items import Items
    from sessions_core.testing.items import _batch

    items, keys = Items(store), [f"k{n:02d}" for n in range(40)]
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            for round in range(6):
                items.put_many(_batch(worker, round, keys))
                items.sweep()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and rolled_back == []
    assert all(items.versions(("c",), key) for key in keys)


def test_a_deletion_that_found_no_item_leaves_the_vectors_of_one_committed_since(store, monkeypatch):
    """A batch deletes an item another transaction is inserting (invisible, so nothing is
    deleted); that transaction commits before the batch's next statement. The live item keeps
    its vectors: the batch clears the vectors only of an item it deleted (it cleared them after
    any deletion, locking a live item's vectors without the item: a deadlock with the item's
    next writer, and the item lost its vectors)."""
    import psycopg

    from sessions_core.items import ItemPut, Items

    items, schema = Items(store), store.schema
    writer = psycopg.connect(postgres_url())
    writer.execute(
        f'INSERT INTO "{schema}".store_items (namespace, prefix, key, value, version, created_at, updated_at)'
        " VALUES ('', 'c', 'x', '{}', 1, 0, 0)"
    )
    writer.execute(
        f'INSERT INTO "{schema}".store_item_vectors (namespace, prefix, key, field, vector)'
        " VALUES ('', 'c', 'x', '$', '\\x00')"
    )
    real_write = store._write

    def committing_after_the_delete(work: Any, **options: Any) -> Any:
        class Connection:
            def __init__(self, conn: Any) -> None:
                self.conn = conn

            def execute(self, sql: str, params: Any = None) -> Any:
                cursor = self.conn.execute(sql, params)
                if sql.startswith("DELETE FROM") and ".store_items " in sql and not writer.closed:
                    writer.commit()  # the item and its vector, committed between the two statements
                    writer.close()
                return cursor

            def __getattr__(self, name: str) -> Any:
                return getattr(self.conn, name)

        return real_write(lambda conn: work(Connection(conn)), **options)

    monkeypatch.setattr(store, "_write", committing_after_the_delete)
    items.put_many([ItemPut(("c",), "x", None)])
    assert writer.closed
    monkeypatch.undo()
    assert items.get_many([(("c",), "x")])[0] is not None
    with psycopg.connect(postgres_url()) as reader:
        assert reader.execute(
            f'SELECT count(*) FROM "{schema}".store_item_vectors WHERE key = %s', ("x",)
        ).fetchone() == (1,)


def test_concurrent_puts_refreshes_and_sweeps_of_the_same_items_never_deadlock(store, rolled_back):
    """Batches putting items with a TTL, reads with ``refresh`` (a LangGraph store with a TTL
    refreshes on every read), refreshes and expiry sweeps, all at once on the same items. A small
    table is scanned in its rows' physical order, which each write changes (a new row version):
    refreshes and sweeps locked rows in that order while puts lock them in key order, and they
    deadlocked (28 rollbacks in 20 s of this, mostly a sweep against a put). Every writer of
    several items now locks them in key order."""
    import random
    import time

    import psycopg

    from sessions_core.items import ItemPut, Items

    items, keys = Items(store), [f"k{n:02d}" for n in range(40)]
    items.put_many([ItemPut(("c",), key, {"v": key}, ttl_minutes=0.0005) for key in keys])
    with psycopg.connect(postgres_url(), autocommit=True) as admin:
        admin.execute(f'ANALYZE "{store.schema}".store_items')  # the plan a small table gets: a sequential scan
    errors: list[BaseException] = []
    deadline = time.monotonic() + 5

    def work(worker: int) -> None:
        rng = random.Random(worker)
        try:
            while time.monotonic() < deadline:
                picked = rng.sample(keys, 20)
                if worker < 2:
                    items.put_many([ItemPut(("c",), key, {"v": worker}, ttl_minutes=0.0005) for key in picked])
                elif worker == 2:
                    items.sweep()
                elif worker == 3:
                    items.refresh([(("c",), key) for key in picked])
                else:
                    items.get_many([(("c",), key) for key in picked], refresh=True)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and rolled_back == []
