"""PostgreSQL faults: an unreachable or misconfigured server, a server gone after setup and
back again (through a TCP proxy the test stops and restarts), odd schema names, ``schema_sql``
on a fresh database, and texts past the ``tsvector`` limit. Never a mock: a real server."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit

import pytest

from sessions_core import Session, SessionManager, StoreError, StoreUnavailableError

from .helpers import msg
from .postgres import postgres_url, require_postgres


def _url(**parts: str) -> str:
    """The test server's URL with netloc parts replaced (``user``, ``port``, ``path``)."""
    split = urlsplit(postgres_url())
    user = parts.get("user", split.username or "")
    host = split.hostname or "127.0.0.1"
    port = parts.get("port", str(split.port or 5432))
    netloc = f"{user}@{host}:{port}" if user else f"{host}:{port}"
    return urlunsplit((split.scheme, netloc, parts.get("path", split.path), parts.get("query", split.query), ""))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _store(conninfo, **options):
    from sessions_core.stores.postgres import PostgresStore

    return PostgresStore(conninfo, **options)


# -- an unreachable or misconfigured server ------------------------------------------------------


@pytest.mark.parametrize(
    ("conninfo", "cause"),
    [
        (lambda: _url(port=str(_free_port())), "Connection refused"),
        (lambda: _url(user="no_such_role_19"), 'role "no_such_role_19" does not exist'),
        (lambda: _url(path="/no_such_database_19"), 'database "no_such_database_19" does not exist'),
    ],
    ids=["wrong-port", "unknown-role", "unknown-database"],
)
def test_an_unreachable_or_misconfigured_server_is_a_store_error_naming_the_cause(conninfo, cause):
    require_postgres()
    conninfo = conninfo()
    started = time.monotonic()
    store = _store(conninfo)  # connects to nothing yet
    try:
        for call in (lambda: Session(store).for_session("s").get_history(), store.setup, store.schema_version):
            with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as caught:
                call()
            assert cause in str(caught.value)
            assert caught.value.__cause__ is not None
    finally:
        store.close()
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "conninfo", ["not a conninfo", "host=127.0.0.1 port", "postgresql://[::1"], ids=["words", "no-value", "bad-url"]
)
def test_a_malformed_conninfo_is_refused_when_the_store_is_built(conninfo):
    pytest.importorskip("psycopg")
    with pytest.raises(StoreError, match="invalid PostgreSQL conninfo"):
        _store(conninfo)


@pytest.mark.parametrize(
    ("conninfo", "wrong"),
    [
        ("host=127.0.0.1 port=abc", "port 'abc' is not an integer from 1 to 65535"),
        ("host=127.0.0.1 port=five", "port 'five' is not an integer from 1 to 65535"),
        ("postgresql://postgres@127.0.0.1:notaport/db", "port 'notaport' is not an integer"),
        ("postgresql://127.0.0.1:99999/db", "port '99999' is not an integer from 1 to 65535"),
        ("host=127.0.0.1 port=0", "port '0' is not an integer from 1 to 65535"),
        ("postgresql://h1:5432,h2:x54/db", "port 'x54' is not an integer"),
        ("host=127.0.0.1 sslmode=bogus", "sslmode 'bogus' is not one of disable, allow, prefer, require"),
        ("postgresql://127.0.0.1/db?sslmode=Require", "sslmode 'Require' is not one of"),
    ],
    ids=["port-abc", "port-five", "url-notaport", "url-99999", "port-0", "second-host", "sslmode", "sslmode-case"],
)
def test_a_conninfo_with_a_bad_port_or_sslmode_is_refused_when_the_store_is_built(conninfo, wrong):
    """libpq would refuse these only when connecting; the store refuses them at once, naming
    the value (issue 36)."""
    pytest.importorskip("psycopg")
    from sessions_core import InvalidInputError

    with pytest.raises(InvalidInputError, match="invalid PostgreSQL conninfo") as caught:
        _store(conninfo)
    assert wrong in str(caught.value)


@pytest.mark.parametrize(
    "conninfo",
    [
        "host=127.0.0.1 port=65535 sslmode=verify-full",
        "postgresql://h1:5432,h2/db?sslmode=disable",
        "host=h1,h2 port=5432,",
        "postgresql:///db",
    ],
)
def test_a_good_port_and_sslmode_build_a_store_without_connecting(conninfo):
    pytest.importorskip("psycopg")
    _store(conninfo).close()


def test_the_conninfo_of_a_caller_pool_is_not_checked():
    pytest.importorskip("psycopg")
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool("host=127.0.0.1 port=abc sslmode=bogus", open=False)
    store = _store(pool)  # the pool is the caller's, and so is its conninfo
    assert store.description.startswith("pool ")


def test_the_connect_timeout_is_read_from_the_url_the_keyword_or_the_default(monkeypatch):
    pytest.importorskip("psycopg")
    from sessions_core.stores.postgres import DEFAULT_CONNECT_TIMEOUT

    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    assert DEFAULT_CONNECT_TIMEOUT == 5
    assert _store("postgresql://h/db")._connect_timeout == 5
    assert _store("postgresql://h/db?connect_timeout=3")._connect_timeout == 3
    assert _store("host=h connect_timeout=7")._connect_timeout == 7
    assert _store("postgresql://h/db?connect_timeout=3", connect_timeout=4)._connect_timeout == 4
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "8")
    assert _store("postgresql://h/db")._connect_timeout == 8
    with pytest.raises(StoreError, match="connect_timeout"):
        _store("postgresql://h/db?connect_timeout=soon")


def test_a_caller_pool_on_an_unreachable_server_is_a_store_error_within_the_connect_timeout():
    require_postgres()
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(_url(port=str(_free_port())), min_size=1, open=True, timeout=30)
    store = _store(pool, connect_timeout=2)
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailableError, match="Connection refused"):
            Session(store).for_session("s").get_history()
    finally:
        store.close()
        pool.close()
    assert time.monotonic() - started < 6


# -- a server gone after setup, and back ---------------------------------------------------------


class _Proxy:
    """A TCP proxy to the test server on a fixed local port, stopped (every connection cut,
    new ones refused) and started again by the test: a server that goes away and comes back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = _free_port()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        assert self._listener is not None
        listener, self._listener = self._listener, None
        with contextlib.suppress(OSError):  # already shut: closing is all that is left
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
        listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):  # the peer may have gone already
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._listener is not listener:
                client.close()
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            with contextlib.suppress(OSError):  # either side closed: the pump ends
                while data := source.recv(65536):
                    sink.sendall(data)
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy():
    require_postgres()
    split = urlsplit(postgres_url())
    running = _Proxy((split.hostname or "127.0.0.1", split.port or 5432))
    running.start()
    yield running
    if running._listener is not None:
        running.stop()


def test_a_server_gone_after_setup_is_a_quick_store_error_and_the_store_works_when_it_is_back(schema, proxy):
    store = _store(_url(port=str(proxy.port)), schema=schema, min_size=2, max_size=4)
    session = Session(store).for_session("s")
    try:
        session.append_message(msg("before"))
        proxy.stop()
        for call in (lambda: session.append_message(msg("lost")), session.get_history, session.get_history):
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError, match="Connection refused"):
                call()
            assert time.monotonic() - started < 2
        proxy.start()
        started = time.monotonic()
        assert [m.id for m in session.get_history()] == ["before"]
        assert session.append_message(msg("after")).inserted
        assert [m.id for m in session.get_history()] == ["before", "after"]
        assert time.monotonic() - started < 5
    finally:
        store.close()


def test_terminated_backends_are_replaced_without_an_error(schema, proxy):
    """Every pooled connection killed by the server (``pg_terminate_backend``) while it stays up:
    the next calls get fresh connections."""
    import psycopg

    app = f"faults-{schema}"
    store = _store(_url(port=str(proxy.port), query=f"application_name={app}"), schema=schema, min_size=3)
    session = Session(store).for_session("s")
    try:
        session.append_message(msg("one"))
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,))
        time.sleep(0.2)
        started = time.monotonic()
        assert session.append_message(msg("two")).inserted
        assert [m.id for m in session.get_history()] == ["one", "two"]
        assert time.monotonic() - started < 5
    finally:
        store.close()


# -- schema names used exactly as given ----------------------------------------------------------

ODD_SCHEMA_NAMES = ["x%", "x%%", "%(s)s", "%s", 'a"b', "sp ace", "{schema}", "{}", ":name", "sessions", "ünï ✓"]


def _schemas_like(prefix: str) -> list[str]:
    import psycopg

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)).fetchall()
    return sorted(row[0] for row in rows)


def _count(schema: str, table: str) -> int:
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        query = sql.SQL("SELECT count(*) FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
        return conn.execute(query).fetchone()[0]


@pytest.fixture
def odd_prefix():
    """A unique prefix for the test's schemas, all dropped afterwards."""
    require_postgres()
    import uuid

    from .postgres import drop_schema

    prefix = f"odd{uuid.uuid4().hex[:8]}_"
    yield prefix
    for name in _schemas_like(prefix):
        drop_schema(name)


@pytest.mark.parametrize("suffix", ODD_SCHEMA_NAMES)
def test_an_odd_schema_name_is_used_exactly_as_given_in_every_statement(odd_prefix, suffix):
    name = odd_prefix + suffix
    store = _store(postgres_url(), schema=name)
    try:
        session = Session(store).for_session("s").with_context("memory", max_tokens=100)
        session.append_message(msg("m1", "percent % and %% and %(s)s and :name"))
        session.append_messages([msg("m2", "second reply"), msg("m3", "third reply")])
        session.replace_context_block("memory", "likes 100% coffee")
        store.set_search_entry("s", "kb", "k1", "entry about %(s)s placeholders")
        assert [m.id for m in Session(store).for_session("s").get_history()] == ["m1", "m2", "m3"]
        assert session.get_message("m1").text == "percent % and %% and %(s)s and :name"
        assert [hit.id for hit in session.search("percent")] == ["m1"]
        assert store.get_block("s", "memory") == "likes 100% coffee"
        assert store.get_blocks("s", ["memory"]) == {"memory": "likes 100% coffee"}
        assert store.search_entries("s", "kb", "placeholders", 5) == [("k1", "entry about %(s)s placeholders")]
        manager = SessionManager(store, namespace="ns")
        info = manager.create("chat")
        manager.append(info.id, msg("x1", "managed words"))
        assert [i.name for i in manager.list_sessions()] == ["chat"]
        assert [hit.id for hit in manager.search("managed")] == ["x1"]
        assert store.schema_version() > 0
    finally:
        store.close()
    assert _schemas_like(odd_prefix) == [name]  # nothing made or written in another schema
    assert _count(name, "session_messages") == 4
    assert _count(name, "context_block_versions") == 2  # the block (its one version) and the entry's
    assert _count(name, "search_entries") == 1


@pytest.mark.parametrize(
    "name", ["", "a" * 64, "é" * 32, "a\x00b", "bad\ud800"], ids=["empty", "64", "64-bytes", "nul", "surrogate"]
)
def test_a_schema_name_postgres_cannot_keep_is_refused_up_front(name):
    pytest.importorskip("psycopg")
    from sessions_core.stores.postgres import schema_sql

    with pytest.raises(StoreError, match="unusable PostgreSQL schema name"):
        _store("postgresql://nowhere.invalid/db", schema=name)
    with pytest.raises(StoreError, match="unusable PostgreSQL schema name"):
        schema_sql(name)


@pytest.mark.parametrize("suffix", ["plain", "x%%", 'a"b', "{schema}"])
def test_schema_sql_creates_the_schema_and_its_tables_on_a_fresh_database(odd_prefix, suffix):
    import psycopg

    from sessions_core.stores.postgres import schema_sql

    name = odd_prefix + suffix
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(schema_sql(name))
    store = _store(postgres_url(), schema=name, auto_setup=False)
    try:
        session = Session(store).for_session("admin")
        session.append_message(msg("m"))
        assert session.get_path_length() == 1
    finally:
        store.close()
    assert _schemas_like(odd_prefix) == [name]
    assert _count(name, "session_messages") == 1


def test_threads_sharing_a_store_see_only_store_errors_while_the_server_is_gone(schema, proxy):
    from concurrent.futures import ThreadPoolExecutor

    store = _store(_url(port=str(proxy.port)), schema=schema, min_size=2, max_size=4)
    Session(store).for_session("s").append_message(msg("kept"))

    def read(_: int) -> str:
        try:
            return ",".join(m.id for m in Session(store).for_session("s").get_history())
        except StoreError as error:
            return "refused" if "Connection refused" in str(error) else f"other: {error}"

    try:
        with ThreadPoolExecutor(8) as threads:
            assert set(threads.map(read, range(16))) == {"kept"}
            proxy.stop()
            started = time.monotonic()
            assert set(threads.map(read, range(32))) == {"refused"}
            assert time.monotonic() - started < 8
            proxy.start()
            assert set(threads.map(read, range(32))) == {"kept"}
    finally:
        store.close()


# -- one warning per outage ------------------------------------------------------------------------


def _warnings(caplog, at_least: int = 0) -> list[tuple[str, str]]:
    """The warnings logged, once there are ``at_least`` (a pool's workers log in the background:
    waited for up to 10 s rather than a fixed pause a loaded machine may outlast)."""
    deadline = time.monotonic() + 10
    while True:
        found = [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
        if len(found) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_an_outage_logs_one_warning_and_one_on_recovery_not_one_per_connection(schema, proxy, caplog):
    """Two outages of a store whose pool holds 4 connections, read by 8 threads: psycopg_pool's
    ``discarding broken connection`` per connection is silenced, and ``sessions_core.postgres``
    says once that the connection was lost and once that it is back (issue 36)."""
    from concurrent.futures import ThreadPoolExecutor

    caplog.set_level(logging.INFO, logger="sessions_core")
    caplog.set_level(logging.INFO, logger="psycopg.pool")
    store = _store(_url(port=str(proxy.port)), schema=schema, min_size=4, max_size=4)
    Session(store).for_session("s").append_message(msg("kept"))

    def read(_: int) -> str:
        try:
            return ",".join(m.id for m in Session(store).for_session("s").get_history())
        except StoreError:
            return "refused"

    try:
        with ThreadPoolExecutor(8) as threads:
            for _outage in range(2):
                caplog.clear()
                assert set(threads.map(read, range(16))) == {"kept"}
                proxy.stop()
                assert set(threads.map(read, range(32))) == {"refused"}
                proxy.start()
                assert set(threads.map(read, range(32))) == {"kept"}
                time.sleep(0.3)  # the pool's workers refill it
                found = _warnings(caplog, at_least=2)
                assert [name for name, _ in found] == ["sessions_core.postgres"] * 2, found
                assert "connection lost or refused" in found[0][1]
                assert "connection back after" in found[1][1]
    finally:
        store.close()


def test_terminated_backends_log_one_warning_and_one_on_recovery(schema, proxy, caplog):
    import psycopg

    caplog.set_level(logging.INFO, logger="sessions_core")
    app = f"quiet-{schema}"
    store = _store(_url(port=str(proxy.port), query=f"application_name={app}"), schema=schema, min_size=4)
    session = Session(store).for_session("s")
    try:
        session.append_message(msg("one"))
        time.sleep(0.3)  # the pool fills to min_size
        caplog.clear()
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,))
        time.sleep(0.2)
        assert session.append_message(msg("two")).inserted
        assert [m.id for m in session.get_history()] == ["one", "two"]
        time.sleep(0.3)
        found = _warnings(caplog, at_least=2)
        assert [name for name, _ in found] == ["sessions_core.postgres"] * 2, found
    finally:
        store.close()


def test_the_filter_lets_other_pools_warnings_through(caplog):
    pytest.importorskip("psycopg")
    from sessions_core.stores.postgres import _PoolNoise

    _PoolNoise.install()
    pool_logger = logging.getLogger("psycopg.pool")
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        pool_logger.warning("error connecting in %r: %s", "someone-elses-pool", "refused")
        pool_logger.warning("error connecting in %r: %s", "session-memory", "refused")
    assert [r.getMessage() for r in caplog.records] == ["error connecting in 'someone-elses-pool': refused"]
