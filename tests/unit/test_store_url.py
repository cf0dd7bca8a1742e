"""``sessions_core.integration.store_url``: where a store is, to reopen it elsewhere, never with
a password."""

from __future__ import annotations

import pytest

from sessions_core import SqliteStore, Store
from sessions_core.integration import store_url

from ..postgres import postgres_url, require_postgres


def test_sqlite_paths_are_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path, url in [("chat.db", str(tmp_path / "chat.db")), (":memory:", ":memory:")]:
        store = SqliteStore(path)
        try:
            assert store_url(store) == url
        finally:
            store.close()


def test_a_store_of_another_kind_has_no_address():
    class Elsewhere(Store):
        """A store of its own kind, whose address the library cannot know."""

    Elsewhere.__abstractmethods__ = frozenset()  # never used: only its kind matters here
    assert store_url(Elsewhere()) is None


@pytest.mark.parametrize(
    ("conninfo", "url"),
    [
        ("postgresql://ada:s3cret@db.example:5433/app", "postgresql://ada@db.example:5433/app"),
        ("postgres://ada:s3cret@db.example/app?sslmode=require", "postgres://ada@db.example/app?sslmode=require"),
        (
            "postgresql://ada@db.example/app?password=s3cret&sslmode=disable",
            "postgresql://ada@db.example/app?sslmode=disable",
        ),
        ("postgresql://db.example/app", "postgresql://db.example/app"),
        ("host=db.example dbname=app user=ada password=s3cret", "postgresql:///app?user=ada&host=db.example"),
    ],
)
def test_postgres_urls_lose_the_password(conninfo, url):
    pytest.importorskip("psycopg")
    from sessions_core.stores.postgres import url_without_password

    assert url_without_password(conninfo) == url


def test_postgres_stores_of_every_kind_have_an_address_without_password():
    require_postgres()
    import psycopg
    from psycopg_pool import ConnectionPool

    from sessions_core import PostgresStore

    scheme, _, rest = postgres_url().partition("://")
    with_password = f"{scheme}://postgres:s3cret@{rest.rpartition('@')[2]}"
    store = PostgresStore(with_password, auto_setup=False)
    pool = ConnectionPool(with_password, open=True)
    connection = psycopg.connect(with_password)
    try:
        for kind in (store, PostgresStore(pool, auto_setup=False), PostgresStore(connection, auto_setup=False)):
            address = store_url(kind)
            assert address.startswith("postgresql://") and "s3cret" not in address
    finally:
        store.close()
        pool.close()
        connection.close()
