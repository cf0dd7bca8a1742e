"""PostgreSQL time limits (issue 36): a frozen network (a TCP proxy that stops forwarding but
keeps its sockets open), the server's ``statement_timeout`` and ``lock_timeout``, the wait for a
pool connection, and the TCP keepalives on every connection. A real server, never a mock."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest

from sessions_core import InvalidInputError, Session, StoreError

from .helpers import msg
from .postgres import postgres_url, require_postgres
from .test_postgres_faults import _Proxy, _store, _url


class _FreezingProxy(_Proxy):
    """A proxy that, once frozen, reads nothing more and forwards nothing, its sockets left
    open: a server or network that froze (what ``SIGSTOP`` on the server looks like)."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(target)
        self.thawed = threading.Event()
        self.thawed.set()

    def freeze(self) -> None:
        self.thawed.clear()

    def thaw(self) -> None:
        self.thawed.set()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:  # type: ignore[override]
        try:
            with contextlib.suppress(OSError):
                while data := source.recv(65536):
                    self.thawed.wait()
                    sink.sendall(data)
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _no_retry(store) -> None:
    """Fail the test if ``store`` runs a call again on a fresh connection: a call past a time
    limit is never retried (it would wait as long again). What the tests assert instead of a
    tight bound on the time, which a loaded machine could break."""

    def retried(pool) -> None:
        raise AssertionError("a call past its time limit was retried")

    store._before_retry = retried


SLACK = 10.0
"""Seconds a call may take past its limit on a loaded machine: less than what would end it
otherwise (the default 30 s ``statement_timeout``, or TCP keepalives after a minute)."""


@pytest.fixture
def proxy():
    require_postgres()
    split = urlsplit(postgres_url())
    running = _FreezingProxy((split.hostname or "127.0.0.1", split.port or 5432))
    running.start()
    yield running
    running.thaw()
    if running._listener is not None:
        running.stop()


def test_a_call_to_a_frozen_network_ends_with_a_store_error_within_the_statement_timeout(schema, proxy):
    # Two pooled connections, so that each frozen call runs on an open one (the first is cut by the
    # watchdog; a new one through the frozen proxy would fail to connect, which is another error).
    store = _store(_url(port=str(proxy.port)), schema=schema, statement_timeout=1.0, min_size=2, max_size=2)
    session = Session(store).for_session("s")
    try:
        session.append_message(msg("before"))
        _no_retry(store)
        for call in (session.get_history, lambda: session.append_message(msg("lost"))):
            proxy.freeze()
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"statement_timeout of 1\.0 s exceeded"):
                call()
            assert 0.9 <= time.monotonic() - started < 1.0 + SLACK
            proxy.thaw()
        assert [m.id for m in session.get_history()][0] == "before"  # works again once thawed
    finally:
        proxy.thaw()
        store.close()


def _locked(schema: str):
    """A transaction of another connection holding every table of ``schema`` exclusively."""
    import psycopg
    from psycopg import sql

    conn = psycopg.connect(postgres_url())
    conn.execute(sql.SQL("LOCK TABLE {}.session_messages IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema)))
    return conn


def test_the_lock_timeout_ends_a_call_waiting_for_a_lock_naming_the_limit(schema):
    store = _store(postgres_url(), schema=schema, lock_timeout=0.5)
    session = Session(store).for_session("s")
    try:
        session.append_message(msg("one"))
        _no_retry(store)
        holder = _locked(schema)
        try:
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"lock_timeout of 0\.5 s exceeded") as caught:
                session.get_history()
            assert 0.45 <= time.monotonic() - started < 0.5 + SLACK
            assert "lock timeout" in str(caught.value.__cause__)
        finally:
            holder.close()
        assert [m.id for m in session.get_history()] == ["one"]
    finally:
        store.close()


def test_the_statement_timeout_of_the_server_names_the_limit(schema):
    store = _store(postgres_url(), schema=schema, statement_timeout=1.0, lock_timeout=None)
    session = Session(store).for_session("s")
    try:
        session.append_message(msg("one"))
        _no_retry(store)
        holder = _locked(schema)
        try:
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"statement_timeout of 1\.0 s exceeded") as caught:
                session.get_history()
            assert 0.9 <= time.monotonic() - started < 1.0 + SLACK
            assert "statement timeout" in str(caught.value.__cause__)  # the server's, not the watchdog's
        finally:
            holder.close()
    finally:
        store.close()


def test_every_connection_of_the_store_has_the_limits_and_tcp_keepalives(schema):
    import psycopg

    store = _store(postgres_url(), schema=schema)
    try:
        with store._borrow() as conn:
            shown = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in ("statement_timeout", "lock_timeout")}
            params = conn.info.get_parameters()
            dsn = psycopg.conninfo.conninfo_to_dict(conn.info.dsn)
        assert shown == {"statement_timeout": "30s", "lock_timeout": "10s"}
        assert dsn["keepalives"] == "1" and dsn["keepalives_idle"] == "30"
        assert dsn["keepalives_interval"] == "10" and dsn["keepalives_count"] == "3"
        assert dsn["tcp_user_timeout"] == "60000"
        assert params is not None
    finally:
        store.close()
    from sessions_core.stores.postgres import _network_options

    assert _network_options({"keepalives_idle": "5"}).get("keepalives_idle") is None  # the conninfo's is kept


def test_the_limits_can_be_raised_or_disabled():
    pytest.importorskip("psycopg")
    store = _store("postgresql://h/db", statement_timeout=120, lock_timeout=None)
    assert (store.statement_timeout, store.lock_timeout) == (120.0, None)
    assert store._limits_sql() == "SET statement_timeout = 120000"
    assert _store("postgresql://h/db", statement_timeout=None)._watchdog is None
    for bad in ({"statement_timeout": 0}, {"lock_timeout": -1}, {"pool_timeout": None}, {"statement_timeout": "5"}):
        with pytest.raises(InvalidInputError, match=next(iter(bad))):
            _store("postgresql://h/db", **bad)


def test_waiting_for_a_pool_connection_is_bounded_by_the_pool_timeout(schema):
    store = _store(postgres_url(), schema=schema, max_size=1, min_size=1, pool_timeout=1.0)
    session = Session(store).for_session("s")
    try:
        session.append_message(msg("one"))
        _no_retry(store)
        with store._borrow():  # the pool's only connection, busy
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"pool_timeout of 1\.0 s exceeded"):
                session.get_history()
            assert 0.9 <= time.monotonic() - started < 1.0 + SLACK
        assert [m.id for m in session.get_history()] == ["one"]
    finally:
        store.close()
