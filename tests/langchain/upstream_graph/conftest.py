"""The checkpointer LangGraph's ported graph tests run on: ours, ``langchain_sessions.SessionSaver``,
on a SQLite file and on PostgreSQL (a fresh schema of ``SESSIONS_TEST_POSTGRES_URL``, skipped
without a server), in place of upstream's ``sync_checkpointer`` / ``async_checkpointer``
parameters (``InMemorySaver``, LangGraph's SQLite and PostgreSQL savers). ``durability`` and
``anyio_backend`` are upstream's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from langgraph.types import Durability

from langchain_sessions import SessionSaver

from ...postgres import postgres_url, require_postgres, temporary_schema

BACKENDS = ["session_sqlite", "session_postgres"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sync", "async", "exit"])
def durability(request: pytest.FixtureRequest) -> Durability:
    return request.param


@contextmanager
def _session_saver(backend: str, folder: Path) -> Iterator[SessionSaver]:
    if backend == "session_sqlite":
        with SessionSaver(str(folder / "sessions.db")) as saver:
            yield saver
        return
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        store = PostgresStore(postgres_url(), schema=schema, max_size=4)
        try:
            with SessionSaver(store) as saver:
                yield saver
        finally:
            store.close()  # the saver closes only what it opened


@pytest.fixture(params=BACKENDS)
def sync_checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionSaver]:
    with _session_saver(request.param, tmp_path) as saver:
        yield saver


@pytest.fixture(params=BACKENDS)
def async_checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionSaver]:
    with _session_saver(request.param, tmp_path) as saver:
        yield saver
