"""One async rule: every public I/O method of ``Session`` and ``SessionManager`` has an
``a``-prefixed async twin, made from the sync method (DESIGN.md §3a: builder methods and
``subscribe`` are sync only)."""

import asyncio
import inspect
import threading

import pytest

from sessions_core import Session, SessionManager
from sessions_core._async import AsyncTwins, io
from sessions_core.testing import SYNC_ONLY  # the conformance driver's list: one list of sync-only methods

CLASSES = [Session, SessionManager]


def public_methods(cls: type) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and callable(value) and not isinstance(value, type)
    }


def twin_names(cls: type) -> set[str]:
    methods = public_methods(cls)
    return {name for name in methods if name.startswith("a") and name[1:] in methods}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_public_io_method_has_an_async_twin(cls):
    methods = public_methods(cls)
    sync = methods - twin_names(cls)
    missing = sorted(name for name in sync - SYNC_ONLY[cls] if "a" + name not in methods)
    assert missing == [], f"{cls.__name__} has I/O methods without an async twin: {missing}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_sync_only_methods_exist_and_have_no_twin(cls):
    methods = public_methods(cls)
    assert SYNC_ONLY[cls] <= methods, sorted(SYNC_ONLY[cls] - methods)
    assert sorted(name for name in SYNC_ONLY[cls] if "a" + name in methods) == []


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_twins_are_async_and_take_the_arguments_of_their_method(cls):
    for twin in sorted(twin_names(cls)):
        method, async_method = getattr(cls, twin[1:]), getattr(cls, twin)
        assert inspect.iscoroutinefunction(async_method) or inspect.isasyncgenfunction(async_method), twin
        assert inspect.signature(async_method).parameters == inspect.signature(method).parameters, twin


def test_mirror_and_remove_context_have_twins():
    async def main():
        session = Session().for_session("s").with_context("notes")
        mirrored = []
        stop = await session.amirror(lambda: mirrored, lambda messages: mirrored.__setitem__(slice(None), messages))
        await session.aappend_message({"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
        assert [m.id for m in mirrored] == ["m1"]
        stop()
        assert await session.aremove_context("notes") is True
        assert await session.aremove_context("notes") is False
        await session.aclose()

    asyncio.run(main())


def test_a_marked_method_gets_a_twin_that_runs_off_the_loop_and_follows_overrides():
    class Probe(AsyncTwins):
        @io
        def read(self, value):
            """Read a value."""
            return value, threading.get_ident()

    class Override(Probe):
        def read(self, value):
            return ("override", value), threading.get_ident()

    class OwnTwin(AsyncTwins):
        @io
        def read(self):
            return "sync"

        async def aread(self):
            return "hand-written"

    async def main():
        loop_thread = threading.get_ident()
        value, thread = await Probe().aread(1)
        assert value == 1 and thread != loop_thread
        value, _ = await Override().aread(2)
        assert value == ("override", 2)
        assert await OwnTwin().aread() == "hand-written"

    asyncio.run(main())
    assert Probe.aread.__name__ == "aread"
    assert Probe.aread.__doc__.startswith("Async twin of :meth:`read`")


def test_list_is_a_deprecated_alias_of_list_sessions():
    """``SessionManager.list`` shadowed the builtin: ``list_sessions`` is the name, with its twin
    ``alist_sessions``; ``list`` / ``alist`` still answer, with a ``DeprecationWarning``."""
    import warnings

    with SessionManager() as manager:
        info = manager.create("first")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            listed = manager.list_sessions()
        assert listed == [info]
        with pytest.warns(DeprecationWarning, match=r"list\(\) is deprecated; use list_sessions\(\)") as caught:
            assert manager.list() == listed
        assert caught[0].filename == __file__  # the warning points at the caller

        async def main() -> None:
            assert await manager.alist_sessions() == listed
            with pytest.warns(DeprecationWarning, match=r"alist\(\) is deprecated; use alist_sessions\(\)"):
                assert await manager.alist() == listed

        asyncio.run(main())
