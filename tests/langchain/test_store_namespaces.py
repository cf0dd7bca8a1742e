"""``SessionStore`` keeps its items in its manager's namespace: two managers of different
namespaces on one database never see each other's items (get, search, list_namespaces,
versions, TTL sweeps), and items stored before namespaces existed (SQLite schema 13,
PostgreSQL 10) stay readable in the default namespace after the migration."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langchain_sessions import SessionStore
from sessions_core import InvalidInputError, SessionManager
from sessions_core.testing.items import Clock

from ..postgres import postgres_url, require_postgres, temporary_schema
from .helpers import matched

Opener = Callable[[str], SessionManager]


@pytest.fixture(params=["sqlite", "postgres"])
def open_manager(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a manager of a namespace on one database (a new connection each call)."""
    opened: list[Any] = []
    if request.param == "sqlite":
        path = str(tmp_path / "shared.db")

        def open_sqlite(namespace: str) -> SessionManager:
            manager = SessionManager(path, namespace=namespace)
            opened.append(manager)
            return manager

        yield open_sqlite
    else:
        require_postgres()
        from sessions_core.stores.postgres import PostgresStore

        with temporary_schema() as schema:

            def open_postgres(namespace: str) -> SessionManager:
                store = PostgresStore(postgres_url(), schema=schema, max_size=2)
                opened.append(store)
                return SessionManager(store, namespace=namespace)

            yield open_postgres
            for each in opened:
                each.close()
            return
    for each in opened:
        each.close()


def test_two_namespaces_on_one_database_never_see_each_others_items(open_manager: Opener, clock: Clock) -> None:
    tenant_a = SessionStore.from_manager(open_manager("tenant-a"))
    tenant_b = SessionStore.from_manager(open_manager("tenant-b"))
    default = SessionStore.from_manager(open_manager(""))
    tenant_a.put(("memories", "sam"), "drink", {"content": "Sam drinks tea"})
    tenant_a.put(("memories", "sam"), "drink", {"content": "Sam drinks green tea"})
    tenant_b.put(("memories", "sam"), "drink", {"content": "Sam drinks coffee"})
    tenant_b.put(("notes",), "n1", {"content": "coffee beans"}, ttl=0.01)

    assert tenant_a.get(("memories", "sam"), "drink").value == {"content": "Sam drinks green tea"}
    assert tenant_b.get(("memories", "sam"), "drink").value == {"content": "Sam drinks coffee"}
    assert default.get(("memories", "sam"), "drink") is None
    assert [item.value["content"] for item in tenant_a.search(("memories",), query="drinks")] == [
        "Sam drinks green tea"
    ]
    coffee = tenant_a.search(("memories",), query="coffee")  # tenant b's coffee is not there to match
    assert matched(coffee) == [] and [item.value for item in coffee] == [{"content": "Sam drinks green tea"}]
    assert default.search(()) == []
    assert tenant_a.list_namespaces() == [("memories", "sam")]
    assert tenant_b.list_namespaces() == [("memories", "sam"), ("notes",)]
    assert [v.version for v in tenant_a.item_versions(("memories", "sam"), "drink")] == [2, 1]
    assert [v.value for v in tenant_b.item_versions(("memories", "sam"), "drink")] == [{"content": "Sam drinks coffee"}]
    tenant_a.delete(("memories", "sam"), "drink")
    assert tenant_b.get(("memories", "sam"), "drink") is not None
    clock.advance(1)  # tenant b's note expires: only tenant b's sweep removes it
    assert (tenant_a.sweep_ttl(), default.sweep_ttl(), tenant_b.sweep_ttl()) == (0, 0, 1)
    assert tenant_b.list_namespaces() == [("memories", "sam")]

    # A store opened from a path names its namespace; it reads what the manager of it wrote.
    same_a = SessionStore(tenant_a.manager.store, namespace="tenant-a")
    assert [v.value for v in same_a.item_versions(("memories", "sam"), "drink")][0] is None
    with pytest.raises(InvalidInputError, match="differs from the manager's"):
        SessionStore(tenant_a.manager, namespace="tenant-b")
    assert SessionStore(tenant_a.manager, namespace="tenant-a").manager is tenant_a.manager


def _old_sqlite_database(path: Path) -> None:
    """A database at schema 13 (before item namespaces) holding an item of two versions, with
    its keyword terms and a vector, written as that schema's store wrote them."""
    from sessions_core.stores.sqlite import MIGRATIONS, SqliteStore, _statements

    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:13]:
        for statement in _statements(migration):
            conn.execute(statement)
    terms = SqliteStore._terms("Sam drinks green tea")
    for version, content in ((1, "Sam drinks tea"), (2, "Sam drinks green tea")):
        conn.execute(
            "INSERT INTO store_items (prefix, key, value, version, created_at, updated_at, search_terms)"
            " VALUES ('memories.sam', 'drink', ?, ?, 1000, ?, ?)"
            " ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, version = excluded.version,"
            " updated_at = excluded.updated_at, search_terms = excluded.search_terms",
            (json.dumps({"content": content}), version, 1000 + version, terms),
        )
    conn.execute(
        "INSERT INTO store_item_vectors (prefix, key, field, vector) VALUES ('memories.sam', 'drink', '$', ?)",
        (memoryview(bytes([0, 0, 128, 63, 0, 0, 0, 0])),),  # float32 [1.0, 0.0]
    )
    conn.execute("PRAGMA user_version = 13")
    conn.commit()
    conn.close()


def test_items_stored_before_namespaces_are_read_in_the_default_namespace_after_migration(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_sqlite_database(path)
    with SessionStore(str(path)) as store:
        _check_migrated(store)
    with SessionStore(str(path), namespace="other") as other:
        assert other.get(("memories", "sam"), "drink") is None and other.list_namespaces() == []


def test_items_stored_before_namespaces_are_read_after_the_postgres_migration() -> None:
    require_postgres()
    import psycopg

    from sessions_core.stores import postgres as postgres_module

    with temporary_schema() as schema:
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            for script in postgres_module._qualified(list(postgres_module.MIGRATIONS[:10]), schema):
                conn.execute(postgres_module._query(script))
            terms = postgres_module.tsvector_literal("Sam drinks green tea")
            for version, content in ((1, "Sam drinks tea"), (2, "Sam drinks green tea")):
                conn.execute(
                    f'INSERT INTO "{schema}".store_items (prefix, key, value, version, created_at, updated_at,'
                    " search_terms) VALUES ('memories.sam', 'drink', %s, %s, 1000, %s, %s::tsvector)"
                    " ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, version = excluded.version,"
                    " updated_at = excluded.updated_at, search_terms = excluded.search_terms",
                    (json.dumps({"content": content}), version, 1000 + version, terms),
                )
            conn.execute(
                f'INSERT INTO "{schema}".store_item_vectors (prefix, key, field, vector)'
                " VALUES ('memories.sam', 'drink', '$', %s)",
                (bytes([0, 0, 128, 63, 0, 0, 0, 0]),),
            )
        store = postgres_module.PostgresStore(postgres_url(), schema=schema, max_size=2)
        try:
            with SessionStore(store) as migrated:
                _check_migrated(migrated)
            with SessionStore(store, namespace="other") as other:
                assert other.get(("memories", "sam"), "drink") is None and other.list_namespaces() == []
        finally:
            store.close()


def _check_migrated(store: SessionStore) -> None:
    item = store.get(("memories", "sam"), "drink")
    assert item is not None and item.value == {"content": "Sam drinks green tea"}
    assert [(v.version, v.value) for v in store.item_versions(("memories", "sam"), "drink")] == [
        (2, {"content": "Sam drinks green tea"}),
        (1, {"content": "Sam drinks tea"}),
    ]
    assert [found.key for found in store.search(("memories",), query="green tea")] == ["drink"]
    assert [found.key for found in store.items.search((), query_vector=[1.0, 0.0])] == ["drink"]
    assert store.list_namespaces() == [("memories", "sam")]
    store.put(("memories", "sam"), "drink", {"content": "Sam drinks water"})
    assert store.get(("memories", "sam"), "drink").value == {"content": "Sam drinks water"}
    assert [v.version for v in store.item_versions(("memories", "sam"), "drink")] == [3, 2, 1]
