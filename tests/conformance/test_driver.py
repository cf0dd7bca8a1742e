"""The suite's harness: its async driver goes through the async twins and never falls back to
the sync method, except where a method is declared sync by design;
``sessions_core.testing.suite`` holds every contract test."""

import asyncio
import importlib

import pytest

from sessions_core import Session, SqliteStore
from sessions_core.testing import SYNC_ONLY, AsyncDriver, MissingTwinError


class _Twinless:
    def append(self, value):
        return value

    async def aclose(self):
        return "closed asynchronously"

    def close(self):
        return "closed synchronously"


def test_the_driver_fails_on_a_missing_twin_and_passes_declared_sync_methods():
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(MissingTwinError, match=r"_Twinless\.append has no async twin _Twinless\.aappend"):
            AsyncDriver(_Twinless(), loop).append(1)
        assert AsyncDriver(_Twinless(), loop).close() == "closed asynchronously"
        session = Session(SqliteStore(":memory:"))
        driven = AsyncDriver(session, loop)
        assert "with_context" in SYNC_ONLY[Session]
        assert driven.with_context("memory") is session
        session.close()
    finally:
        loop.close()


def test_the_suite_module_holds_every_test_of_every_contract_area():
    import sessions_core.testing
    from sessions_core.testing import suite

    tests = {}
    for name in sessions_core.testing.SUITE_MODULES:
        module = importlib.import_module(f"sessions_core.testing.{name}")
        for attribute, value in vars(module).items():
            if attribute.startswith("test_"):
                assert attribute not in tests, f"{attribute} is in two contract areas"
                tests[attribute] = value
    assert {name: value for name, value in vars(suite).items() if name.startswith("test_")} == tests
