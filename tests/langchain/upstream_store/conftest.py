"""Which store the ported LangGraph store tests build: ours (``langchain_sessions.SessionStore``,
the default) or, with ``UPSTREAM_STORE_SUBJECT=langgraph``, LangGraph's own classes, which checks
the port itself. The Postgres files run on ``SESSIONS_TEST_POSTGRES_URL``, each store in a fresh
schema, and skip without PostgreSQL."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import quote

import pytest

from ...postgres import postgres_url, require_postgres, temporary_schema
from .embed_test_utils import CharacterEmbeddings

SUBJECT = os.environ.get("UPSTREAM_STORE_SUBJECT", "ours")
if SUBJECT not in ("ours", "langgraph"):
    raise ValueError(f"UPSTREAM_STORE_SUBJECT must be 'ours' or 'langgraph', not {SUBJECT!r}")
LANGGRAPH = SUBJECT == "langgraph"

VECTOR_TYPES = ["vector", "halfvec"]


def _langgraph_sqlite_modules() -> bool:
    """Import LangGraph's SQLite stores over ``pysqlite3`` when it is importable: its vector index
    loads sqlite-vec, and a Python built without ``enable_load_extension`` cannot."""
    try:
        dbapi2 = importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        return False
    if any(name in sys.modules for name in ("langgraph.store.sqlite", "aiosqlite")):
        return False
    real = sys.modules["sqlite3"]
    sys.modules["sqlite3"] = dbapi2
    try:
        importlib.import_module("aiosqlite")
        importlib.import_module("langgraph.store.sqlite")
    finally:
        sys.modules["sqlite3"] = real
    return True


SQLITE_EXTENSIONS = LANGGRAPH and _langgraph_sqlite_modules()


def _skip_without_sqlite_extensions(index: Any) -> None:
    if index is not None and LANGGRAPH and not SQLITE_EXTENSIONS:
        pytest.skip("LangGraph's SqliteStore index loads sqlite-vec; put pysqlite3-binary on PYTHONPATH (README.md)")


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


@contextmanager
def sqlite_store(conn_string: str, *, index: Any = None, ttl: Any = None) -> Iterator[Any]:
    """A set-up sync store on ``conn_string`` (``":memory:"`` or a file path)."""
    if LANGGRAPH:
        from langgraph.store.sqlite import SqliteStore

        _skip_without_sqlite_extensions(index)
        with SqliteStore.from_conn_string(conn_string, index=index, ttl=ttl) as store:
            store.setup()
            yield store
        return
    from langchain_sessions import SessionStore

    with SessionStore.from_conn_string(conn_string, index=index, ttl=ttl) as store:
        store.setup()
        yield store


@asynccontextmanager
async def async_sqlite_store(conn_string: str, *, index: Any = None, ttl: Any = None) -> AsyncIterator[Any]:
    """A set-up store for the async tests: LangGraph's ``AsyncSqliteStore``, or ours (one class)."""
    if LANGGRAPH:
        from langgraph.store.sqlite import AsyncSqliteStore

        _skip_without_sqlite_extensions(index)
        async with AsyncSqliteStore.from_conn_string(conn_string, index=index, ttl=ttl) as store:
            await store.setup()
            yield store
        return
    from langchain_sessions import SessionStore

    async with SessionStore.from_conn_string(conn_string, index=index, ttl=ttl) as store:
        await store.asetup()
        yield store


def _langgraph_conn_string(schema: str) -> str:
    import psycopg

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in postgres_url() else "?"
    return f"{postgres_url()}{separator}options={quote(f'-csearch_path={schema}')}"


def _skip_without_pgvector(index: Any) -> None:
    import psycopg

    if index is None:
        return
    with psycopg.connect(postgres_url()) as conn:
        row = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if row is None:
        pytest.skip("LangGraph's PostgresStore needs the pgvector extension, not installed on this server")


def _migrations_with_float_ttl(store: Any) -> None:
    store.MIGRATIONS = [
        (mig.replace("ttl_minutes INT;", "ttl_minutes FLOAT;") if isinstance(mig, str) else mig)
        for mig in store.MIGRATIONS
    ]


@contextmanager
def postgres_store(*, index: Any = None, ttl: Any = None, mode: str = "default") -> Iterator[Any]:
    """A set-up sync store in a fresh schema; ``mode`` is LangGraph's connection kind
    (``default``, ``pipe``, ``pool``), which ours, always pooled, has not."""
    require_postgres()
    with temporary_schema() as schema:
        if LANGGRAPH:
            from langgraph.store.postgres import PostgresStore

            _skip_without_pgvector(index)
            conn_string = _langgraph_conn_string(schema)
            with PostgresStore.from_conn_string(conn_string, index=index, ttl=ttl) as store:
                _migrations_with_float_ttl(store)
                store.setup()
                with store._cursor() as cur:
                    cur.execute("DROP TABLE IF EXISTS store_migrations")
                store.setup()
            options: dict[str, Any] = {
                "pipe": {"pipeline": True},
                "pool": {"pool_config": {"min_size": 1, "max_size": 10}},
            }.get(mode, {})
            with PostgresStore.from_conn_string(conn_string, index=index, ttl=ttl, **options) as store:
                yield store
            return
        from langchain_sessions import SessionStore
        from sessions_core.stores.postgres import PostgresStore as OurPostgresStore

        with SessionStore(OurPostgresStore(postgres_url(), schema=schema), index=index, ttl=ttl) as store:
            store.setup()
            yield store


@asynccontextmanager
async def async_postgres_store(*, index: Any = None, ttl: Any = None, mode: str = "default") -> AsyncIterator[Any]:
    """A set-up store for the async tests: LangGraph's ``AsyncPostgresStore``, or ours (one class)."""
    if not LANGGRAPH:
        with postgres_store(index=index, ttl=ttl, mode=mode) as store:
            yield store
        return
    require_postgres()
    with temporary_schema() as schema:
        from langgraph.store.postgres import AsyncPostgresStore

        _skip_without_pgvector(index)
        conn_string = _langgraph_conn_string(schema)
        async with AsyncPostgresStore.from_conn_string(conn_string, index=index, ttl=ttl) as store:
            _migrations_with_float_ttl(store)
            await store.setup()
            async with store._cursor() as cur:
                await cur.execute("DROP TABLE IF EXISTS store_migrations")
            await store.setup()
        options: dict[str, Any] = {
            "pipe": {"pipeline": True},
            "pool": {"pool_config": {"min_size": 1, "max_size": 10}},
        }.get(mode, {})
        async with AsyncPostgresStore.from_conn_string(conn_string, index=index, ttl=ttl, **options) as store:
            yield store


async def awaited(result: Any) -> Any:
    """``result``, awaited if it is awaitable: LangGraph's async store starts and stops its sweeper
    with coroutines, ours (one class for both) with the sync calls."""
    return await result if inspect.isawaitable(result) else result


CONNECTION_MODES = ["default", "pipe", "pool"] if LANGGRAPH else ["default"]
