"""The conformance harness: every contract test runs on every backend, in sync and async mode.

A backend declares what it can do (``Backend``) instead of tests skipping ad hoc. A test gets
``make_session(session_id="")``: in ``sync`` mode a real ``Session``; in ``async`` mode a driver
whose ``x(...)`` calls await the session's ``ax(...)`` twin on the test's event loop (and whose
``history()`` pulls from ``ahistory()``), so one test body checks both faces.
"""

from __future__ import annotations

import asyncio
import inspect
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from sessions_core import Session, SqliteStore, Store

from ..postgres import postgres_url, require_postgres, temporary_schema


@dataclass
class Backend:
    name: str
    open: Callable[[], Store]
    """A store on this test's database (the same database each call within one test)."""
    persistent: bool
    """Whether a second store opened on the same database sees the first one's data."""


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
    "postgres": _postgres,
}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with BACKENDS[request.param](tmp_path) as made:
        yield made


class AsyncDriver:
    """Presents a ``Session``'s async twins with the sync method names."""

    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        self._session = session
        self._loop = loop

    @property
    def session(self) -> Session:
        return self._session

    def history(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        agen = self._session.ahistory(*args, **kwargs)
        try:
            while True:
                try:
                    item = self._loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
                yield item
        finally:
            self._loop.run_until_complete(agen.aclose())

    def __getattr__(self, name: str) -> Any:
        twin = getattr(self._session, "a" + name, None)
        attribute = getattr(self._session, name)
        if twin is None or not inspect.iscoroutinefunction(twin):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(twin(*args, **kwargs))

        return call


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_session(backend: Backend, mode: str) -> Iterator[Callable[..., Any]]:
    loop = asyncio.new_event_loop() if mode == "async" else None
    stores: list[Store] = []

    def make(session_id: str = "", store: Store | None = None, **options: Any) -> Any:
        if store is None:
            store = backend.open()
            stores.append(store)
        session = Session(store, **options).for_session(session_id)
        return AsyncDriver(session, loop) if loop else session

    yield make
    for store in stores:
        store.close()
    if loop:
        loop.close()
