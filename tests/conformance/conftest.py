"""The conformance harness: every contract test runs on every backend, in sync and async mode.

A backend declares what it can do (``Backend``) instead of tests skipping ad hoc. A test gets
``make_session(session_id="")``: in ``sync`` mode a real ``Session``; in ``async`` mode a driver
whose ``x(...)`` calls await the session's ``ax(...)`` twin on the test's event loop (and whose
``history()`` pulls from ``ahistory()``), so one test body checks both faces.
``make_manager(namespace="", store=None)`` does the same for a ``SessionManager``; its driver
also drives the sessions and tools the manager hands out. ``drive(obj)`` wraps any object so.
"""

from __future__ import annotations

import asyncio
import inspect
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from sessions_core import Session, SessionManager, SqliteStore, Store, Tool

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


_DRIVEN = (Session, SessionManager, Tool)


class AsyncDriver:
    """Presents an object's async twins (``ax``) with the sync method names (``x``): a
    ``Session``, a ``SessionManager``, a ``Tool`` (``invoke`` -> ``ainvoke``)...

    With ``wrap_results``, the sessions, managers and tools (or lists of tools) that its
    methods return are driven too, so ``manager.get_session(id).tools()[0].invoke(...)`` goes
    through the async twins all the way.
    """

    def __init__(self, session: Any, loop: asyncio.AbstractEventLoop, *, wrap_results: bool = False) -> None:
        self._session = session
        self._loop = loop
        self._wrap_results = wrap_results

    @property
    def session(self) -> Any:
        return self._session

    @property
    def target(self) -> Any:
        """The driven object."""
        return self._session

    def _wrap(self, value: Any) -> Any:
        if not self._wrap_results:
            return value
        if isinstance(value, _DRIVEN):
            return AsyncDriver(value, self._loop, wrap_results=True)
        if isinstance(value, list) and value and all(isinstance(v, Tool) for v in value):
            return [AsyncDriver(v, self._loop, wrap_results=True) for v in value]
        return value

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
            if self._wrap_results and callable(attribute):
                return lambda *args, **kwargs: self._wrap(attribute(*args, **kwargs))
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._wrap(self._loop.run_until_complete(twin(*args, **kwargs)))

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


@pytest.fixture
def drive(mode: str) -> Iterator[Callable[[Any], Any]]:
    """``drive(obj)``: ``obj`` itself in sync mode; in async mode a driver of its async twins
    (and of the sessions, managers and tools it returns)."""
    loop = asyncio.new_event_loop() if mode == "async" else None

    def wrap(obj: Any) -> Any:
        return AsyncDriver(obj, loop, wrap_results=True) if loop else obj

    yield wrap
    if loop:
        loop.close()


@pytest.fixture
def make_manager(backend: Backend, drive: Callable[[Any], Any]) -> Iterator[Callable[..., Any]]:
    """``make_manager(namespace="", store=None, **options)``: a ``SessionManager`` on this
    test's database (a new ``backend.open()`` store unless ``store`` is given), driven in the
    test's mode."""
    stores: list[Store] = []

    def make(namespace: str = "", store: Store | None = None, **options: Any) -> Any:
        if store is None:
            store = backend.open()
            stores.append(store)
        return drive(SessionManager(store, namespace=namespace, **options))

    yield make
    for store in stores:
        store.close()
