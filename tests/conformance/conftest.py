"""The project's stores under the conformance suite (``sessions_core.testing``): SQLite in memory,
SQLite on file, SQLite on file encrypted with SQLCipher and PostgreSQL (see ``tests/postgres.py``),
each in sync and async mode."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sessions_core import SqliteStore, Store
from sessions_core.testing import (  # noqa: F401  (fixtures of the suite)
    Backend,
    drive,
    inspectable_store,
    make_manager,
    make_session,
    mode,
    persistent_backend,
)

from ..postgres import postgres_url, require_postgres, temporary_schema


@contextmanager
def _sqlite_memory(tmp_path: Path) -> Iterator[Backend]:
    store = SqliteStore(":memory:")
    yield Backend("sqlite-memory", lambda: store, persistent=False)
    store.close()


@contextmanager
def _sqlite_file(tmp_path: Path) -> Iterator[Backend]:
    path = tmp_path / "sessions.db"
    yield Backend("sqlite-file", lambda: SqliteStore(path), persistent=True)


@contextmanager
def _sqlite_encrypted(tmp_path: Path) -> Iterator[Backend]:
    pytest.importorskip("sqlcipher3", reason="encrypted SQLite needs the encryption extra")
    path = tmp_path / "sessions.db"
    # A raw 32-byte key: a passphrase's key derivation costs about 0.2 s at every open, some 100 s
    # over the suite, and changes nothing the contracts check (tests/test_encryption.py runs both).
    key = bytes(range(32))
    yield Backend("sqlite-encrypted", lambda: SqliteStore(path, key=key), persistent=True)


@contextmanager
def _postgres(tmp_path: Path) -> Iterator[Backend]:
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    opened: list[Store] = []

    def open_store() -> Store:
        store = PostgresStore(postgres_url(), schema=schema, min_size=1, max_size=4)
        opened.append(store)
        return store

    with temporary_schema() as schema:
        try:
            yield Backend("postgres", open_store, persistent=True)
        finally:
            for store in opened:
                store.close()


BACKENDS: dict[str, Callable[[Path], Any]] = {
    "sqlite-memory": _sqlite_memory,
    "sqlite-file": _sqlite_file,
    "sqlite-encrypted": _sqlite_encrypted,
    "postgres": _postgres,
}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with BACKENDS[request.param](tmp_path) as made:
        yield made
