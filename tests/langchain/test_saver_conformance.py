"""``langgraph-checkpoint-conformance`` against ``SessionSaver``: every base capability and the
extended ones it claims (``copy_thread``, ``delete_for_runs``, ``prune``) pass on our SQLite (in
memory and on file) and on our PostgreSQL store, each capability suite on a fresh database."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from langchain_sessions import SessionSaver
from sessions_core import SessionManager, SqliteStore

from ..postgres import postgres_url, require_postgres, temporary_schema

CLAIMED = {capability.value for capability in ALL_CAPABILITIES}
"""Every capability the suite knows: the five base ones and the three extended ones."""


def _sqlite_memory(tmp_path: Path) -> Callable[[], SessionSaver]:
    return lambda: SessionSaver(":memory:")


def _sqlite_file(tmp_path: Path) -> Callable[[], SessionSaver]:
    return lambda: SessionSaver(str(tmp_path / f"{uuid.uuid4().hex}.db"))


def _sqlite_manager(tmp_path: Path) -> Callable[[], SessionSaver]:
    """A manager's namespace: thread ids are stored under ``ns:`` and isolated from others."""
    return lambda: SessionSaver.from_manager(SessionManager(SqliteStore(":memory:"), namespace="tenant"))


def _postgres(tmp_path: Path, schemas: list[Any]) -> Callable[[], SessionSaver]:
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    def make() -> SessionSaver:
        context = temporary_schema()
        schemas.append(context)
        return SessionSaver(PostgresStore(postgres_url(), schema=context.__enter__(), max_size=4))

    return make


@pytest.mark.asyncio
@pytest.mark.parametrize("backend", ["sqlite-memory", "sqlite-file", "sqlite-namespace", "postgres"])
async def test_session_saver_passes_langgraph_conformance(backend: str, tmp_path: Path) -> None:
    schemas: list[Any] = []
    savers: list[SessionSaver] = []
    if backend == "postgres":
        make = _postgres(tmp_path, schemas)
    else:
        make = {"sqlite-memory": _sqlite_memory, "sqlite-file": _sqlite_file, "sqlite-namespace": _sqlite_manager}[
            backend
        ](tmp_path)

    @checkpointer_test(name=f"SessionSaver[{backend}]")
    async def factory() -> AsyncIterator[SessionSaver]:
        saver = make()
        savers.append(saver)
        yield saver
        saver.manager.store.close()

    try:
        report = await validate(factory)
    finally:
        for context in schemas:
            context.__exit__(None, None, None)
    report.print_report()
    failures = {name: result.failures for name, result in report.results.items() if result.failures}
    assert failures == {}
    assert report.passed_all_base()
    assert {name for name, result in report.results.items() if result.detected and result.passed} == CLAIMED
    assert len(savers) == len(CLAIMED)  # a fresh saver (and database) for each capability suite
