"""The conformance harness: what every contract test stands on.

The store under test comes from a ``backend`` fixture that the project running the suite defines
(see :mod:`sessions_core.testing`): it returns a :class:`Backend`. Every contract test then runs
in ``sync`` and ``async`` mode (the ``mode`` fixture). A test gets ``make_session(session_id="")``:
in ``sync`` mode a real ``Session``; in ``async`` mode a driver whose ``x(...)`` calls await the
session's ``ax(...)`` twin on the test's event loop (and whose ``history()`` pulls from
``ahistory()``), so one test body checks both faces. ``make_manager(namespace="", store=None)``
does the same for a ``SessionManager``; its driver also drives the sessions and tools the manager
hands out. ``drive(obj)`` wraps any object so.

Capabilities are declared on the backend (``persistent``) or detected on its store (inspection:
an ``InspectableStore``); the tests that need one ask for ``persistent_backend`` or
``inspectable_store``, which skip with the reason where the capability is absent.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from sessions_core import Session, SessionManager, Store, Tool, UnsupportedOperationError
from sessions_core.stores.base import InspectableStore

__all__ = [
    "SYNC_ONLY",
    "AsyncDriver",
    "Backend",
    "MissingTwinError",
    "drive",
    "inspectable_store",
    "make_manager",
    "make_session",
    "mode",
    "persistent_backend",
    "skip_where_unsupported",
    "unsupported_skips",
]


@dataclass
class Backend:
    """The store under test, as the ``backend`` fixture returns it."""

    name: str
    open: Callable[[], Store]
    """A store on this test's database: a fresh database for each test, the same one for every
    call within a test. The tests close the stores they open."""
    persistent: bool
    """Whether a second store opened on the same database sees the first one's data (and still
    does after the first is closed)."""


SYNC_ONLY: dict[type, frozenset[str]] = {
    Session: frozenset(
        {
            "create",
            "for_session",
            "with_context",
            "with_cached_prompt",
            "on_compaction",
            "compact_after",
            "on_compaction_error",
            "subscribe",
            "declared_tools",
            "with_edit_tool",
            "with_semantic_recall",
            "with_redaction",
        }
    ),
    SessionManager: frozenset(
        {
            "with_context",
            "with_cached_prompt",
            "with_searchable_history",
            "on_compaction",
            "compact_after",
            "on_compaction_error",
            "subscribe",
            "get_session",
            "storage_id",
            "with_edit_tool",
            "with_semantic_recall",
            "with_redaction",
        }
    ),
    Tool: frozenset({"to_openai"}),
}
"""The public methods that have no async twin by design: builder methods, ``subscribe``, and
calls that touch no storage. Any other method called through an :class:`AsyncDriver` must have
an ``a``-prefixed coroutine twin."""


class MissingTwinError(AssertionError):
    """A method called through an :class:`AsyncDriver` has no async twin."""


def _declared(table: dict[type, frozenset[str]], obj: Any) -> frozenset[str]:
    return frozenset().union(*(names for cls, names in table.items() if isinstance(obj, cls)))


_DRIVEN = (Session, SessionManager, Tool)


class AsyncDriver:
    """Presents an object's async twins (``ax``) with the sync method names (``x``): a
    ``Session``, a ``SessionManager``, a ``Tool`` (``invoke`` -> ``ainvoke``)...

    A public method without a coroutine twin raises :class:`MissingTwinError` naming the twin,
    unless :data:`SYNC_ONLY` declares it sync by design. Attributes that are not methods are
    returned as they are.

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
        attribute = getattr(self._session, name)
        twin = getattr(self._session, "a" + name, None)
        has_twin = twin is not None and inspect.iscoroutinefunction(twin)
        owner = type(self._session).__name__
        if not has_twin:
            if not callable(attribute) or name.startswith("_"):
                return attribute
            if name not in _declared(SYNC_ONLY, self._session):
                raise MissingTwinError(f"{owner}.{name} has no async twin {owner}.a{name}")
            if self._wrap_results:
                return lambda *args, **kwargs: self._wrap(attribute(*args, **kwargs))
            return attribute
        assert twin is not None  # has_twin

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


@pytest.fixture
def persistent_backend(backend: Backend) -> Backend:
    """The backend, for tests of what a second store on the same database sees; they skip
    where the backend declares it keeps nothing."""
    if not backend.persistent:
        pytest.skip(f"{backend.name} keeps nothing after close (declared)")
    return backend


@pytest.fixture
def inspectable_store(backend: Backend) -> Iterator[InspectableStore]:
    """A store of the backend that implements the optional ``InspectableStore``; the tests of
    inspection skip where it does not (detected with ``isinstance``)."""
    store = backend.open()
    try:
        if not isinstance(store, InspectableStore):
            pytest.skip(f"{backend.name}: {type(store).__name__} does not implement InspectableStore (optional)")
        yield store
    finally:
        store.close()


def skip_where_unsupported(namespace: dict[str, Any]) -> None:
    """Make each test of a suite module skip where the store lacks an optional capability the
    test uses: the store's default for it raises ``UnsupportedOperationError`` naming it (the
    capability is detected, not declared per test). Called at the end of every suite module."""
    for name, value in list(namespace.items()):
        if name.startswith("test_") and inspect.isfunction(value) and not hasattr(value, "__wrapped__"):
            namespace[name] = _skipping_unsupported(value)


def _skipping_unsupported(test: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        with unsupported_skips():
            return test(*args, **kwargs)

    return run


@contextmanager
def unsupported_skips() -> Iterator[None]:
    """Within this block (a fixture's setup), an ``UnsupportedOperationError`` from the store
    skips the test, naming the capability the store lacks."""
    try:
        yield
    except UnsupportedOperationError as error:
        pytest.skip(f"optional capability: {error}")


@contextmanager
def short_lists(store: Any, length: int) -> Iterator[None]:
    """Within this block, a store that binds ids a list at a time (``max_list``) binds at most
    ``length`` a statement, so that a test's few ids span several lists; others are unchanged."""
    if not hasattr(store, "max_list"):
        yield
        return
    listed = store.max_list
    store.max_list = length
    try:
        yield
    finally:
        store.max_list = listed
