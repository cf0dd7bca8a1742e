"""Finding the test PostgreSQL server: ``SESSIONS_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``). Where none answers, Postgres tests skip with the
reason, unless ``SESSIONS_REQUIRE_POSTGRES=1`` (CI), where they fail."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_url() -> str:
    return os.environ.get("SESSIONS_TEST_POSTGRES_URL", DEFAULT_URL)


def postgres_required() -> bool:
    return os.environ.get("SESSIONS_REQUIRE_POSTGRES") == "1"


@functools.lru_cache(maxsize=1)
def _unavailable_reason() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'session-memory[postgres]')"
    try:
        with psycopg.connect(postgres_url(), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as error:
        return f"no PostgreSQL at {postgres_url()}: {error}"
    return None


def require_postgres() -> None:
    """Skip (or, when required, fail) the current test if PostgreSQL is unavailable."""
    reason = _unavailable_reason()
    if reason is None:
        return
    if postgres_required():
        pytest.fail(f"SESSIONS_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


@contextmanager
def temporary_schema(suffix: str = "") -> Iterator[str]:
    """A fresh schema name (ending with ``suffix``), dropped (with everything in it) afterwards."""
    name = f"test_{uuid.uuid4().hex[:12]}{suffix}"
    try:
        yield name
    finally:
        drop_schema(name)


def drop_schema(name: str) -> None:
    """Drop a test's schema with everything in it. A connection a failed test left holding a lock
    in it (a transaction never ended) is ended after 20 s of waiting, rather than the drop waiting
    for it forever."""
    import psycopg
    from psycopg import sql

    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
    with psycopg.connect(postgres_url(), autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET lock_timeout = '20s'")
        try:
            conn.execute(drop)
        except psycopg.errors.LockNotAvailable:
            conn.execute(
                "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
                " JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND l.pid <> pg_backend_pid()",
                (name,),
            )
            conn.execute(drop)


@contextmanager
def sqlite_or_postgres(kind: str, folder: Path) -> Iterator[Any]:
    """A store of ``kind``: ``"sqlite"``, a file in ``folder``; ``"postgres"``, a ``PostgresStore``
    in a temporary schema (the test skips without a server). Closed afterwards."""
    if kind == "sqlite":
        from sessions_core import SqliteStore

        with closing(SqliteStore(folder / "ours.db")) as store:
            yield store
        return
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema, closing(PostgresStore(postgres_url(), schema=schema, max_size=2)) as pg:
        yield pg


def round_trips(store: Any, call: Callable[[], object]) -> int:
    """How many round trips ``call`` makes on the store's one pooled connection: in libpq's
    trace, how many times the client's messages are followed by the server's."""
    import tempfile

    import psycopg

    with store._current_pool().connection() as conn:
        pgconn = conn.pgconn
    with tempfile.NamedTemporaryFile("r") as trace:
        descriptor = os.open(trace.name, os.O_WRONLY)
        pgconn.trace(descriptor)
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            call()
        finally:
            pgconn.untrace()
            os.close(descriptor)
        senders = [line[0] for line in trace]
        return sum(first == "F" and then == "B" for first, then in zip(senders, senders[1:]))
