"""The conformance harness: every contract test runs on every backend, in sync and async mode.

A backend declares what it can do (``Backend``) instead of tests skipping ad hoc. A test gets
``make_session(session_id="")``: in ``sync`` mode a real ``Session``; in ``async`` mode a driver
whose ``x(...)`` calls await the session's ``ax(...)`` twin on the test's event loop (and whose
``history()`` pulls from ``ahistory()``), so one test body checks both faces.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from sessions_core import Session, SqliteStore, Store


@dataclass
class Backend:
    name: str
    open: Callable[[], Store]
    """A store on this test's database (the same database each call within one test)."""
    persistent: bool
    """Whether a second store opened on the same database sees the first one's data."""


def _sqlite_memory(tmp_path: Path) -> Backend:
    store = SqliteStore(":memory:")
    return Backend("sqlite-memory", lambda: store, persistent=False)


def _sqlite_file(tmp_path: Path) -> Backend:
    path = tmp_path / "sessions.db"
    return Backend("sqlite-file", lambda: SqliteStore(path), persistent=True)


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "sqlite-memory": _sqlite_memory,
    "sqlite-file": _sqlite_file,
}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = BACKENDS[request.param](tmp_path)
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
