"""PostgreSQL store (extra ``postgres``): psycopg 3 with a connection pool, for many processes
and hosts sharing one memory.

The SQL both stores run is in :mod:`.sql`; this dialect keeps the pool, transactions with one
retry on a dropped connection, per-session advisory locks, the schema's version table,
``tsvector`` search and a pipelined batch insert. Every method runs on a pooled connection in
one transaction; the async twins of ``Session`` run them in worker threads. Appends to one
session are serialised with a transaction-level advisory lock (keyed by the schema and the
session), so concurrent writers extend one chain instead of racing for the latest leaf.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from typing_extensions import LiteralString

from ..errors import InvalidInputError, StoreError, StoreUnavailableError
from ..fts import Alternative, Unit, tsquery_literal, tsvector_literal, tsvector_terms
from ..ranking import Estimated
from ..text import unstorable
from .base import Inserted, ItemCondition, MessageRecord, PathTotals, SearchRow, _Latest
from .conninfo import hide_password, url_without_password
from .sql import (
    INSERT_UNDER_LATEST,
    INSERT_UNDER_PARENT,
    ITEM_COMPARISONS,
    ITEM_ROW_COLUMNS,
    LARGE_ROW,
    PUT_ITEMS,
    TABLES,
    UPDATE_MESSAGE,
    SearchScope,
    SqlStore,
    for_keys,
    item_under,
    load_migrations,
    refresh_sql,
)

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, timeout_from_conninfo
    from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "PostgresStore needs psycopg 3 and psycopg_pool: pip install 'session-memory[postgres]'"
    ) from error

T = TypeVar("T")

_ROLLED_BACK = (
    psycopg.errors.TransactionRollback,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)
"""What the server raises when it rolled a transaction back to let others go on (class 40:
40001 a serialization failure, 40P01 a deadlock; each an ``OperationalError``)."""

logger = logging.getLogger("sessions_core.postgres")
"""One warning when PostgreSQL connections are lost or refused, one when a call works again."""

_POOL_NAME = "session-memory"

MIGRATIONS: tuple[str, ...] = load_migrations("postgres")
"""Append-only; each ends by recording its number in ``{schema}.session_memory_schema``."""

DEFAULT_CONNECT_TIMEOUT = 5
"""Seconds to wait for a connection when neither the conninfo (``connect_timeout``), the
``connect_timeout`` keyword nor ``PGCONNECT_TIMEOUT`` says."""

DEFAULT_STATEMENT_TIMEOUT = 30.0
"""Seconds a statement may run (PostgreSQL's ``statement_timeout``) unless the store is given
``statement_timeout=``; the client closes a connection whose call has had no end by then plus
``WATCHDOG_MARGIN`` (a frozen server or network never answers)."""
DEFAULT_LOCK_TIMEOUT = 10.0
"""Seconds a statement may wait for a lock (PostgreSQL's ``lock_timeout``) unless the store is
given ``lock_timeout=``."""
DEFAULT_POOL_TIMEOUT = 30.0
"""Seconds a call waits for a free connection of the store's own pool unless given ``pool_timeout=``."""
WATCHDOG_MARGIN = 0.5
"""Seconds past ``statement_timeout`` after which the client closes a call's connection."""
ROLLBACK_RETRIES = 3
"""How many times a call the server rolled back (a deadlock, a serialization failure) is run
again before its error is raised."""

_KEEPALIVES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}
"""TCP keepalives set on every connection the store makes, unless the conninfo sets them."""
_TCP_USER_TIMEOUT = "60000"
"""Milliseconds sent data may stay unacknowledged before the kernel drops the connection
(libpq >= 12; unless the conninfo sets ``tcp_user_timeout``)."""

_SETUP_LOCK = zlib.crc32(b"session-memory setup")
"""The seed of the lock ``setup()`` takes on its schema's name (``_LOCK``): setups of other
schemas do not wait on it."""

_COPY_STEP = 1 << 20
"""Characters escaped and sent at a time by ``_stage_large``."""
_STAGED = "pg_temp.session_memory_large"
_STAGE_TABLE = "CREATE TEMP TABLE session_memory_large (text text, content text) ON COMMIT DELETE ROWS"
_STAGED_VALUES = {":text": f"(SELECT text FROM {_STAGED})", ":content": f"(SELECT content FROM {_STAGED})"}
_COPY_ESCAPES = (("\\", "\\\\"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))
"""What COPY's text format escapes in a value (backslash first)."""


def _from_stage(statement: str) -> str:
    """``statement`` taking the text and JSON it binds from the staging table instead."""
    for placeholder, staged in _STAGED_VALUES.items():
        statement = statement.replace(placeholder, staged)
    return statement


def _query(sql: str) -> LiteralString:
    """``sql`` as psycopg's ``Query`` type, which wants a literal: every statement this store runs
    is built from the package's own SQL and quoted identifiers, never from a caller's text."""
    return cast("LiteralString", sql)


_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_TABLE = re.compile(r"\b(" + "|".join(TABLES) + r")\b")
_FRAGMENTS = {
    "{random_id}": "gen_random_uuid()::text",
    "{rowid}": "seq",
    "{terms}": "CAST(:terms AS tsvector)",
    "{terms_text}": "CAST(search_terms AS text)",
    "{for_update}": "FOR UPDATE",
    "{skip_locked}": "FOR UPDATE SKIP LOCKED",
    "{first}": ":first",
    "{json}": "CAST(:metadata AS jsonb)",
    "{json_text}": "CAST(metadata AS text)",
    "{json_text_of_c}": "CAST(c.metadata AS text)",
    # A LATERAL subquery with LIMIT or OFFSET is not flattened into a join: it runs once a row of
    # a, by its primary key, however few rows the statistics say the tables hold.
    "{parent_of_a}": (
        "CROSS JOIN LATERAL (SELECT * FROM checkpoints WHERE session_id = :s AND checkpoint_ns = :ns"
        " AND checkpoint_id = a.parent_checkpoint_id LIMIT 1) c"
    ),
    "{writes_of_a}": (
        "CROSS JOIN LATERAL (SELECT * FROM checkpoint_writes WHERE session_id = :s AND checkpoint_ns = :ns"
        " AND checkpoint_id = a.checkpoint_id OFFSET 0) w"
    ),
    "{has_delta}": "(metadata ? 'counters_since_delta_snapshot' OR metadata ? 'delta_writes_versioned')",
    "{value_text}": "CAST(value AS text)",
    "{as_json}": "::jsonb",
    "{waiting_text}": "waiting_text",  # migration 0015
    "{waiting_value}": "NULLIF(r.terms, '')",
    "{terms_emptied}": ", search_terms = ''",
    "{bigint}": "BIGINT",
    "{item_versions}": (  # an item's current version is in its row only (migration 0013)
        "(SELECT namespace, prefix, key, version, value, created_at FROM store_item_versions UNION ALL"
        " SELECT namespace, prefix, key, version, value, updated_at FROM store_items) AS item_versions"
    ),
}

_ITEM_ROW_TYPES = ("text", "text", "jsonb", "bigint", "double precision", "text")
_ITEM_ROWS = (
    "jsonb_to_recordset(CAST(:item_rows AS jsonb)) AS r("
    + ", ".join(f"{column} {kind}" for column, kind in zip(ITEM_ROW_COLUMNS, _ITEM_ROW_TYPES))
    + ")"
)
"""The rows to write (``SqlStore._put_items``) from one JSON array of objects: one statement text
for any number of rows, and one parameter psycopg passes as it is (arrays of text it escapes
element by element: milliseconds for a batch of 100)."""
_PUT_ITEMS = PUT_ITEMS.replace("{item_rows}", _ITEM_ROWS)
_ITEM_ROW_PARAMS = tuple(f"r_{column}" for column in ITEM_ROW_COLUMNS)
_PUT_ITEM = PUT_ITEMS.replace(
    "{item_rows}",
    "(SELECT "
    + ", ".join(f"CAST(:r_{column} AS {kind}) AS {column}" for column, kind in zip(ITEM_ROW_COLUMNS, _ITEM_ROW_TYPES))
    + ") AS r",
)
"""One row to write, from parameters of its own: a single put does not parse a JSON array (about
25 µs of the statement's 165)."""
_WAITING_ITEMS = "SELECT seq, waiting_text FROM store_items WHERE {under} AND waiting_text IS NOT NULL"
_INDEX_ITEMS = """
    WITH w AS (SELECT * FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS w(seq bigint, text text, terms text)),
    locked AS (SELECT seq FROM store_items WHERE seq IN (SELECT seq FROM w) ORDER BY prefix, key FOR UPDATE)
    UPDATE store_items i SET search_terms = CAST(w.terms AS tsvector), waiting_text = NULL
    FROM w WHERE i.seq = w.seq AND i.waiting_text = w.text AND i.seq IN (SELECT seq FROM locked)
"""
"""The waiting items' terms (migration 0015), each item still holding the text they analyse (a
put since then makes it wait again), locked in key order as every writer of items locks them."""
_ANALYSED_MATCHING = (
    "SELECT a.seq FROM jsonb_to_recordset(CAST(:analysed AS jsonb)) AS a(seq bigint, terms text)"
    " WHERE CAST(a.terms AS tsvector) @@ CAST(w.q AS tsquery)"
)
"""The rows of ``SearchScope.analysed`` that a word's query matches."""
_CANNOT_WRITE = (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege)
"""What a server says to a write it does not allow: a hot standby, a read-only role or setting."""
_ITEM_ROW_KEYS = tuple(f'"{column}":' for column in ITEM_ROW_COLUMNS)
_json_string = json.encoder.encode_basestring_ascii


def _item_rows_json(rows: Sequence[tuple[Any, ...]]) -> str:
    """``rows`` as a JSON array of objects; each value (the JSON text of an object) put in as it is."""
    prefix, key, value, expires, ttl, terms = _ITEM_ROW_KEYS
    string = _json_string  # what json.dumps gives for a str, without its call per field
    dumps = json.dumps
    prefixes: dict[str, str] = {}
    parts = []
    for p, k, v, e, t, s in rows:
        quoted = prefixes.get(p)
        if quoted is None:
            quoted = prefixes[p] = string(p)
        e = "null" if e is None else dumps(e)
        t = "null" if t is None else dumps(t)
        parts.append(f"{{{prefix}{quoted},{key}{string(k)},{value}{v},{expires}{e},{ttl}{t},{terms}{string(s)}}}")
    return "[" + ",".join(parts) + "]"


_HEADER = """\
-- session-memory: PostgreSQL schema.
--
-- PostgresStore.setup() applies these migrations itself (under an advisory lock, so many
-- processes may run it at once). If your role cannot create tables, have an administrator run
-- this once, then open the store with auto_setup=False. It creates the schema {schema} if it
-- is missing (which needs the CREATE privilege on the database). Migrations are append-only:
-- each block below runs once, in order, and {schema}.session_memory_schema records how many
-- have run.

CREATE SCHEMA IF NOT EXISTS {schema};
"""


def schema_sql(schema: str = "public") -> str:
    """The whole schema as SQL, for an administrator to run once (then ``auto_setup=False``);
    it creates the PostgreSQL schema ``schema`` if missing, then its tables."""
    _check_schema(schema)
    blocks = [f"-- migration {number}\n{sql}" for number, sql in enumerate(MIGRATIONS, 1)]
    return "\n".join([_HEADER.replace("{schema}", _quote(schema)), *_qualified(blocks, schema)])


def _qualified(scripts: list[str], schema: str) -> list[str]:
    """``scripts`` (migrations) run in ``schema``: ``{schema}`` becomes the quoted name, and each
    ``$$`` of a function body a dollar-quote tag the name does not hold, since a body ends at
    its first tag and the name stands in it (``$$`` in a schema name would end it early)."""
    quoted = _quote(schema)
    tag = _body_tag(schema, scripts)
    return [script.replace("$$", tag).replace("{schema}", quoted) for script in scripts]


def _body_tag(schema: str, scripts: list[str]) -> str:
    """``$body$``, else ``$body_N$`` with the least ``N`` found neither in ``schema`` nor in
    ``scripts`` (a tag holds no ``"``, so it cannot span the name and its quotes either)."""
    number = 0
    while True:
        tag = f"$body_{number}$" if number else "$body$"
        if tag not in schema and not any(tag in script for script in scripts):
            return tag
        number += 1


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


class PostgresStore(SqlStore):
    """A PostgreSQL database shared by many processes.

    ``conninfo_or_pool`` is a ``postgresql://`` URL or libpq string (the store opens and later
    closes its own pool), a ``psycopg_pool.ConnectionPool`` or a ``psycopg.Connection`` that the
    caller owns and closes. ``url`` is where the database is, as a ``postgresql://`` URL without
    the password (what a serialised pointer may hold). ``schema`` names the PostgreSQL schema
    holding the tables (created if missing), used exactly as given. A call whose connection
    drops is retried once on a fresh connection when it is idempotent; otherwise it raises
    ``StoreError`` and its transaction is rolled back. Every driver failure raises
    ``StoreError`` with the psycopg error as the cause.

    Building the store connects to nothing; the first call does. A conninfo string is checked
    first: one libpq cannot parse raises ``StoreError``, a ``port`` not an integer from 1 to
    65535 or an unknown ``sslmode`` raises ``InvalidInputError`` (a pool's or a connection's
    conninfo is its owner's and is not checked). ``connect_timeout`` (seconds;
    else the conninfo's ``connect_timeout``, ``PGCONNECT_TIMEOUT``, else 5; at least 2, as
    libpq) bounds how long a call waits for a connection before it tries one of its own: when
    PostgreSQL cannot be reached (refused, unknown host, role or database, bad password...)
    it raises ``StoreError`` with the server's reason. A store with its own pool then makes a
    fresh pool on its next call, so it works again as soon as the server is back.

    ``statement_timeout`` and ``lock_timeout`` (seconds; ``None``: not set) are set on each
    connection of the store's own pool; past ``statement_timeout`` + ``WATCHDOG_MARGIN`` the
    client closes a call's connection (any connection). ``pool_timeout`` bounds the wait for a
    free connection of the own pool. A call past a limit raises ``StoreError`` naming it, not
    retried. Outages are logged once on ``sessions_core.postgres``, and once when they end.
    """

    max_list = 10_000

    def __init__(
        self,
        conninfo_or_pool: Any,
        *,
        schema: str | None = None,
        auto_setup: bool = True,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float | None = None,
        statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT,
        lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        if schema is not None:
            _check_schema(schema)
        self.schema = schema or "public"
        # Advisory locks are the database's, not a schema's: a session's lock key is hashed with
        # its schema's, so that stores in other schemas never wait on a session of the same id.
        self._lock_seed = zlib.crc32(self.schema.encode("utf-8"))
        self._auto_setup = auto_setup
        self._ready = False
        self._closed = False
        self._setup_lock = threading.Lock()
        self._pool_lock = threading.Lock()
        self._connection_lock: threading.RLock | None = None
        self._pool: ConnectionPool | None = None
        self._connection: psycopg.Connection | None = None
        self._owns = False
        if isinstance(conninfo_or_pool, str):
            self.description = hide_password(conninfo_or_pool)
            try:
                params = conninfo_to_dict(conninfo_or_pool)
            except psycopg.Error as error:
                raise StoreError(
                    f"invalid PostgreSQL conninfo {self.description!r}: {_one_line(error)}"
                    " (a postgresql:// URL or libpq key=value pairs)"
                ) from error
            _check_conninfo(params, self.description)
            self._conninfo = conninfo_or_pool
            self._pool_options: dict[str, Any] = {
                "min_size": min_size,
                "max_size": max_size,
                "timeout": _seconds("pool_timeout", pool_timeout),
            }
            self._owns = True  # the pool is made on first use, once a connection has worked
            self.url = url_without_password(conninfo_or_pool)
        elif isinstance(conninfo_or_pool, ConnectionPool):
            self._pool = conninfo_or_pool
            params = {}
            self.description = f"pool {conninfo_or_pool.name}"
            self.url = url_without_password(_text_conninfo(conninfo_or_pool))
        elif isinstance(conninfo_or_pool, psycopg.Connection):
            self._connection = conninfo_or_pool
            self._connection_lock = threading.RLock()
            params = {}
            self.description = "a psycopg connection"
            self.url = url_without_password(conninfo_or_pool.info.dsn)  # libpq leaves the password out
        else:
            raise TypeError(
                "PostgresStore takes a conninfo string, a psycopg_pool.ConnectionPool or a psycopg.Connection"
                " (an async pool is not supported: the store's async twins run in threads),"
                f" not {type(conninfo_or_pool).__name__}"
            )
        timeout = connect_timeout
        if timeout is None:
            timeout = params.get("connect_timeout") or os.environ.get("PGCONNECT_TIMEOUT") or DEFAULT_CONNECT_TIMEOUT
        try:
            # str: what psycopg reads a conninfo value as anyway (ConnDict holds no float)
            self._connect_timeout = timeout_from_conninfo({"connect_timeout": str(timeout)})
        except psycopg.Error as error:
            raise StoreError(f"{self!r}: {error} (connect_timeout is a number of seconds)") from error
        self.statement_timeout = None if statement_timeout is None else _seconds("statement_timeout", statement_timeout)
        self.lock_timeout = None if lock_timeout is None else _seconds("lock_timeout", lock_timeout)
        self._network = _network_options(params)
        self._watchdog = _Watchdog() if self.statement_timeout is not None else None
        self._outage: float | None = None
        self._outage_lock = threading.Lock()
        super().__init__()
        self._statistics: tuple[float, dict[str, float], float] | None = None
        self._index_refused_until = 0.0

    def __repr__(self) -> str:
        return f"PostgresStore({self.description}, schema={self.schema!r})"

    # -- the dialect's hooks ---------------------------------------------------------------

    def _translate(self, sql: str) -> str:
        # Every compiled statement runs with parameters, so a literal % (even in the schema's
        # name) is written %%.
        for fragment, replacement in _FRAGMENTS.items():
            sql = sql.replace(fragment, replacement)
        sql = _PLACEHOLDER.sub(r"%(\1)s", sql.replace("%", "%%"))
        schema = _quote(self.schema).replace("%", "%%")
        return _TABLE.sub(lambda match: f"{schema}.{match.group(1)}", sql)

    def _read(self, work: Callable[[psycopg.Connection], T], *, walk: bool = False) -> T:
        return self._run(work, walk=walk)

    def _write(
        self,
        work: Callable[[psycopg.Connection], T],
        *,
        lock: str | None = None,
        walk: bool = False,
        idempotent: bool = True,
        one_statement: bool = False,
    ) -> T:
        return self._run(work, lock=lock, walk=walk, idempotent=idempotent, one_statement=one_statement)

    def _locked_rows(self, sql: str, params: Any, consume: Callable[[Any], T], *, lock: str, walk: bool = False) -> T:
        def send(conn: psycopg.Connection) -> Callable[[], T]:
            cursor = conn.execute(_query(sql), params)
            return lambda: consume(cursor)

        return self._sent_then_read(send, lock=lock, walk=walk)

    def _sent_then_read(
        self, send: Callable[[psycopg.Connection], Callable[[], T]], *, lock: str, walk: bool = False
    ) -> T:
        """One round trip: the ``lock`` (and planner settings), the statements ``send`` queues
        and the commit go together; what ``send`` returns reads their rows once all are back."""
        return cast(T, self._run(send, lock=lock, walk=walk, read_after_sync=True))

    def _list(self, values: Sequence[Any], uses: int = 1) -> tuple[str, dict[str, list[Any]]]:
        return "= ANY(:values)", {"values": list(values)}

    def _rows(self, values: Sequence[Any]) -> tuple[str, dict[str, list[Any]]]:
        return "(SELECT unnest(CAST(:values AS text[])) AS column1)", {"values": list(values)}

    def _put_items(self, namespace: str, rows: Sequence[tuple[Any, ...]], now_us: int) -> tuple[str, dict[str, Any]]:
        if len(rows) == 1:
            return self.compile(_PUT_ITEM), {"ns": namespace, "now": now_us, **dict(zip(_ITEM_ROW_PARAMS, rows[0]))}
        return self.compile(_PUT_ITEMS), {"item_rows": _item_rows_json(rows), "ns": namespace, "now": now_us}

    def _refreshed(self, keys: str, params: dict[str, Any]) -> list[Any]:
        # One statement in autocommit (one round trip) rather than a transaction of two.
        sql = self.compile(for_keys(refresh_sql(keys, and_get=True), keys))
        return self._single(lambda conn: conn.execute(_query(sql), params).fetchall(), write=True)

    def _execute_many(self, conn: psycopg.Connection, sql: str, params: Sequence[Any]) -> None:
        with conn.cursor() as cursor:
            cursor.executemany(_query(sql), params)

    def _bind_first(self, value: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {**params, "first": value}

    def _item_condition(self, condition: ItemCondition, n: int) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {f"ip{n}": list(condition.path)}
        at, text = f"(value #> CAST(:ip{n} AS text[]))", f"(value #>> CAST(:ip{n} AS text[]))"
        kind = f"jsonb_typeof({at})"
        value, op = condition.value, ITEM_COMPARISONS[condition.op]
        if value is None:
            test = f"({at} IS NULL OR {kind} = 'null')" if op == "=" else "false"
        elif isinstance(value, bool):
            params[f"iv{n}"] = json.dumps(value)
            test = f"({at} = CAST(:iv{n} AS jsonb))" if op == "=" else "false"
        elif isinstance(value, (int, float)):
            params[f"iv{n}"] = float(value)
            test = f"(CASE WHEN {kind} = 'number' THEN CAST({text} AS double precision) {op} :iv{n} ELSE false END)"
        elif isinstance(value, str) and op == "=":
            params[f"iv{n}"] = json.dumps(value)
            test = f"({at} = CAST(:iv{n} AS jsonb))"  # jsonb equality: a string of the same characters
        elif isinstance(value, str):
            params[f"iv{n}"] = value
            test = f"(CASE WHEN {kind} = 'string' THEN {text} COLLATE \"C\" {op} :iv{n} ELSE false END)"
        else:
            params[f"iv{n}"] = json.dumps(value, ensure_ascii=False)
            test = f"(CASE WHEN {kind} IN ('object', 'array') THEN {at} {op} CAST(:iv{n} AS jsonb) ELSE false END)"
        return (f"NOT coalesce({test}, false)" if condition.op == "$ne" else f"coalesce({test}, false)"), params

    def _metadata_where(self, items: Sequence[tuple[str, Any]]) -> tuple[str, dict[str, Any]]:
        return "metadata @> CAST(:metadata_filter AS jsonb)", {"metadata_filter": json.dumps(dict(items))}

    def _single(self, work: Callable[[psycopg.Connection], T], *, write: bool) -> T:
        """One statement in autocommit, so one round trip: no transaction around it and no
        check of the pooled connection first (a dropped one is replaced and the statement,
        idempotent, run again once)."""
        self._ensure_ready()
        dropped = rollbacks = 0
        while True:
            watch = _Watch()
            try:
                with self._borrow(check=False, watch=watch) as conn:
                    result = work(conn)
            except _ROLLED_BACK as error:
                rollbacks = self._rolled_back(error, rollbacks, idempotent=True)
                continue
            except psycopg.OperationalError as error:
                failure = self._operational(error, watch)
                if failure is None or watch.fired:
                    self._lost(error)
                pool = self._pool
                dropped += 1
                if failure is not None or dropped == 2 or (pool is None and not self._owns):
                    raise failure or self._connection_failed(error) from error
                self._before_retry(pool)
                continue
            except psycopg.Error as error:
                raise self._refused(error) from error
            except UnicodeEncodeError as error:
                raise unstorable(repr(self), error) from error
            if self._outage is not None:
                self._recovered()
            return result

    def _rolled_back(self, error: psycopg.Error, rollbacks: int, *, idempotent: bool) -> int:
        """After a deadlock (SQLSTATE 40P01) or a serialization failure (40001), which the
        server resolved by rolling this call's transaction back (nothing of it was written):
        the number of rollbacks so far, to run it again after a short random pause (up to
        ``ROLLBACK_RETRIES`` times; a non-idempotent call is never run again), else the error.
        Not an outage: the connection is fine."""
        rollbacks += 1
        if not idempotent or rollbacks > ROLLBACK_RETRIES:
            again = "call again" if not idempotent else f"it failed so {rollbacks} times in a row"
            raise StoreError(
                f"{self!r}: PostgreSQL rolled the transaction back ({_one_line(error)}; SQLSTATE"
                f" {error.sqlstate}), so this call wrote nothing: {again}"
            ) from error
        time.sleep(random.uniform(0.0, 0.02 * rollbacks))
        return rollbacks

    def _operational(self, error: psycopg.OperationalError, watch: _Watch) -> StoreError | None:
        """The error for a call past a time limit, not retried (it would wait as long again):
        the server's ``statement_timeout`` or ``lock_timeout``, or the client's watchdog that
        closed a connection left without an answer; for a server out of disk; ``None`` for a
        dropped connection."""
        primary = error.diag.message_primary or ""
        if watch.fired:
            return StoreUnavailableError(
                f"{self!r}: statement_timeout of {self.statement_timeout} s exceeded: no answer from PostgreSQL"
                f" within {self.statement_timeout} + {WATCHDOG_MARGIN} s, so the connection was closed"
                " (server or network frozen?); raise statement_timeout= for longer calls"
            )
        if isinstance(error, psycopg.errors.DiskFull):
            return StoreError(
                f"{self!r}: the PostgreSQL server's disk is full (SQLSTATE 53100 disk_full), so this call"
                f" wrote nothing: free space on the server, then call again: {_one_line(error)}"
            )
        if isinstance(error, psycopg.errors.QueryCanceled) and "statement timeout" in primary:
            return StoreError(
                f"{self!r}: statement_timeout of {self.statement_timeout} s exceeded: {_one_line(error)}"
                " (raise statement_timeout= for longer statements)"
            )
        if isinstance(error, psycopg.errors.LockNotAvailable) and "lock timeout" in primary:
            return StoreError(
                f"{self!r}: lock_timeout of {self.lock_timeout} s exceeded: {_one_line(error)}"
                " (another transaction held a lock this call needed; raise lock_timeout= to wait longer)"
            )
        return None

    def _lost(self, error: BaseException) -> None:
        """Log the start of an outage (a connection lost or refused), once until it ends."""
        with self._outage_lock:
            if self._outage is not None:
                return
            self._outage = time.monotonic()
        logger.warning(
            "%r: PostgreSQL connection lost or refused (%s); calls may fail until it is back",
            self,
            _one_line(error),
        )

    def _recovered(self) -> None:
        """Log the end of an outage: a call succeeded after one."""
        with self._outage_lock:
            began, self._outage = self._outage, None
        if began is not None:
            logger.warning("%r: PostgreSQL connection back after %.1f s", self, time.monotonic() - began)

    def _connection_failed(self, error: psycopg.OperationalError) -> StoreError:
        return StoreUnavailableError(f"{self!r}: the database connection failed: {error}")

    def _refused(self, error: psycopg.Error) -> StoreError:
        if isinstance(error, (psycopg.DataError, psycopg.errors.ProgramLimitExceeded)):
            return StoreError(f"{self!r}: value refused by PostgreSQL: {error}")
        return StoreError(f"{self!r}: {error}")

    def _lock_session(self, conn: psycopg.Connection, session_id: str) -> None:
        conn.execute(_LOCK, (session_id, self._lock_seed))

    def _consume(self, sql: str, params: Any, consume: Callable[[Any], T], *, walk: bool = False) -> T:
        """As ``SqlStore._consume``: in autocommit, one round trip rather than a transaction's
        three. One that ``walk``s the tree follows the planner settings in a pipeline, in the
        implicit transaction that lasts until the pipeline's sync: one round trip rather than
        four."""
        query = _query(self.compile(sql))

        def work(conn: psycopg.Connection) -> T:
            if not walk:
                return consume(conn.execute(query, params))
            with _pipeline(conn):
                conn.execute(_INDEX_LOOKUPS)
                cursor = conn.execute(query, params)
            return consume(cursor)

        return self._single(work, write=False)

    def _all_together(self, reads: Sequence[tuple[str, Any]], *, walk: bool = False) -> list[list[Any]]:
        queries: list[tuple[LiteralString, Any]] = [(_query(self.compile(sql)), params) for sql, params in reads]

        def work(conn: psycopg.Connection) -> list[list[Any]]:
            with _pipeline(conn):
                if walk:
                    conn.execute(_INDEX_LOOKUPS)
                cursors = [conn.execute(query, params) for query, params in queries]
            return [cursor.fetchall() for cursor in cursors]

        return self._single(work, write=False)

    def _schema_version(self, conn: psycopg.Connection) -> int:
        return _version(conn, self.schema)

    def schema_version(self) -> int:
        try:
            with self._borrow() as conn, conn.transaction():
                return _version(conn, self.schema)
        except psycopg.Error as error:
            raise StoreError(f"{self!r}: {error}") from error

    def _size_bytes(self, conn: psycopg.Connection) -> int:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (self.schema,),
        ).fetchone()
        assert row is not None  # an aggregate always gives one row
        return int(row[0])

    def scrub(self, *, vacuum: bool = False) -> None:
        """The removed rows and their index entries are gone for every query at once; until
        ``VACUUM`` the server keeps them as dead tuples in the tables' and indexes' pages, and
        its WAL (and any base backup or replica fed from it) keeps the writes that made them
        until it is recycled. ``vacuum`` runs ``VACUUM`` on every table of the schema (outside
        a transaction), which removes the dead tuples and index entries and lets their space be
        reused; the bytes stay in the files until overwritten (``VACUUM FULL``, which locks each
        table, rewrites them). Without ``vacuum`` this does nothing."""
        if not vacuum:
            return
        self._ensure_ready()
        try:
            with self._borrow() as conn:
                autocommit = conn.autocommit
                conn.autocommit = True  # VACUUM cannot run in a transaction
                try:
                    conn.execute("SET statement_timeout = 0")  # a VACUUM may take long
                    for table in TABLES:
                        conn.execute(_query(f"VACUUM {_quote(self.schema)}.{table}"))
                finally:
                    if self._owns and self.statement_timeout is not None:
                        conn.execute(_query(self._limits_sql()))
                    conn.autocommit = autocommit
        except psycopg.Error as error:
            raise StoreError(f"{self!r}: VACUUM failed: {error}") from error

    # -- plumbing --------------------------------------------------------------------------

    @contextmanager
    def _borrow(self, *, check: bool = True, watch: _Watch | None = None) -> Iterator[psycopg.Connection]:
        """A connection for one unit of work; ``check``: test a pooled connection of the
        store's own pool first (see ``_getconn``). With ``watch``, the watchdog closes the
        connection if the work (and the check) outlasts ``statement_timeout`` + the margin."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._connection is not None:
            assert self._connection_lock is not None
            with self._connection_lock:
                self._arm(watch, self._connection)
                try:
                    yield self._connection
                finally:
                    self._disarm(watch)
            return
        pool, conn = self._getconn(check=check, watch=watch)
        try:
            with conn:  # as ConnectionPool.connection(): ends a transaction left open
                yield conn
        finally:
            self._disarm(watch)
            _quietly(pool.putconn, conn)

    def _arm(self, watch: _Watch | None, conn: psycopg.Connection) -> None:
        if watch is not None and self._watchdog is not None and self.statement_timeout is not None:
            self._watchdog.arm(watch, conn, self.statement_timeout + WATCHDOG_MARGIN)

    def _disarm(self, watch: _Watch | None) -> None:
        if watch is not None and self._watchdog is not None:
            self._watchdog.disarm(watch)

    def _getconn(self, *, check: bool = True, watch: _Watch | None = None) -> tuple[ConnectionPool, psycopg.Connection]:
        """A pooled connection; the store's own pool checks it first: a dead one is replaced at
        once and the pool's other idle ones checked (without psycopg_pool's backoff sleeps), or,
        when the server cannot be reached, ``StoreError`` says why."""
        for attempt in range(1, 5):
            pool = self._current_pool()
            try:
                conn = self._wait(pool)
            except PoolClosed as error:
                if attempt == 4 or not self._owns or self._closed:  # a caller's pool, closed by its owner
                    raise StoreError(f"{self!r}: the connection pool is closed") from error
                continue  # another thread found the server gone and dropped this pool: take the new one
            self._arm(watch, conn)
            if not (self._owns and check):
                return pool, conn
            try:
                ConnectionPool.check_connection(conn)
            except psycopg.Error as error:
                self._disarm(watch)
                self._lost(error)
                _quietly(pool.putconn, conn)  # broken: the pool replaces it
                if watch is not None and watch.fired:
                    failure = self._operational(psycopg.OperationalError(str(error)), watch)
                    assert failure is not None
                    raise failure from error
                self._probe(pool)  # the server itself gone? Then say so now
                _quietly(pool.check)
                continue
            return pool, conn
        raise StoreUnavailableError(f"{self!r}: every connection of the pool was broken; try again")

    def _wait(self, pool: ConnectionPool) -> psycopg.Connection:
        """A connection of ``pool``. Past the connect timeout, one direct connection tells
        whether PostgreSQL is reachable: if not, ``StoreError`` with its reason; if so, the pool
        is busy and the wait goes on up to the pool's own timeout."""
        first = min(self._connect_timeout, pool.timeout)
        try:
            try:
                return pool.getconn(timeout=first)
            except PoolTimeout:
                self._probe(pool)
                if pool.timeout <= first:
                    raise
                return pool.getconn(timeout=pool.timeout - first)
        except PoolTimeout as error:
            raise StoreError(
                f"{self!r}: pool_timeout of {float(pool.timeout)} s exceeded: no free connection in the pool"
                f" (max_size={pool.max_size}, all busy); raise max_size or the pool's timeout (pool_timeout=)"
            ) from error

    def _current_pool(self) -> ConnectionPool:
        if self._pool is not None:
            return self._pool
        with self._pool_lock:
            if self._pool is None:
                if self._closed:
                    raise StoreError(f"{self!r} is closed")
                self._probe(None)
                _PoolNoise.install()
                pool = ConnectionPool(
                    self._conninfo,
                    **self._pool_options,
                    open=True,
                    kwargs={"autocommit": True, "connect_timeout": self._connect_timeout, **self._network},
                    configure=self._configure,
                    name=_POOL_NAME,
                )
                # A first call that finds the pool still connecting makes it grow a connection, and
                # calls then take the idle ones in turn: each on a colder server process.
                with contextlib.suppress(PoolTimeout):
                    pool.wait(timeout=self._connect_timeout)
                self._pool = pool
            return self._pool

    def _before_retry(self, pool: ConnectionPool | None) -> None:
        """After a dropped connection, before the one retry: with the store's own pool (``None``
        when another thread found the server gone and dropped it), say now if the server itself
        is gone, rather than after the pool's wait for a connection; then replace the pool's
        other dead connections."""
        if self._owns:
            self._probe(pool)
        if pool is not None:
            _quietly(pool.check)

    def _probe(self, pool: ConnectionPool | None) -> None:
        """Connect once, directly, to ``pool``'s server (``None``: the store's own conninfo);
        on failure drop the store's own pool and raise ``StoreError`` with the reason."""
        if pool is None:
            conninfo, kwargs = self._conninfo, {}
        else:
            conninfo = _text_conninfo(pool)
            kwargs = pool.kwargs() if callable(pool.kwargs) else dict(pool.kwargs or {})
        kwargs = {**kwargs, "autocommit": True, "connect_timeout": self._connect_timeout}
        if pool is None:
            kwargs.update(self._network)
        try:
            psycopg.connect(conninfo, **kwargs).close()
        except psycopg.Error as error:
            self._lost(error)
            if pool is not None and self._owns:
                self._drop_pool(pool)
            raise StoreUnavailableError(
                f"{self!r}: cannot connect to PostgreSQL: {_one_line(error)}"
                " (check that the server runs and the conninfo's host, port, user, password and database)"
            ) from error

    def _configure(self, conn: psycopg.Connection) -> None:
        """Set the time limits on a new connection of the store's own pool (once: they last
        the session, the pool's connections being in autocommit)."""
        limits = self._limits_sql()
        if limits:
            conn.execute(_query(limits))

    def _limits_sql(self, *, statement_timeout: float | None | bool = True) -> str:
        """``SET`` statements for the store's limits (``statement_timeout=0``: none for this)."""
        statement = self.statement_timeout if statement_timeout is True else statement_timeout
        settings = [("statement_timeout", statement), ("lock_timeout", self.lock_timeout)]
        return "; ".join(f"SET {name} = {round(value * 1000)}" for name, value in settings if value is not None)

    def _drop_pool(self, pool: ConnectionPool) -> None:
        """Forget the store's own ``pool`` (the next call makes a new one) and close it aside:
        its workers may still be waiting on the server."""
        with self._pool_lock:
            if self._pool is pool:
                self._pool = None
        threading.Thread(target=pool.close, name="session-memory-close", daemon=True).start()

    def _run(
        self,
        work: Callable[[psycopg.Connection], T],
        *,
        lock: str | None = None,
        walk: bool = False,
        idempotent: bool = True,
        one_statement: bool = False,
        read_after_sync: bool = False,
    ) -> T:
        """Run ``work`` in one transaction. Idempotent work is retried once on a dropped
        connection, so it skips the test of its pooled connection (a round trip) that other work
        makes first. The ``lock`` (and planner settings) go with the ``BEGIN``.
        ``one_statement`` work without a lock or the planner's settings runs in autocommit.
        ``read_after_sync`` work only queues its statements and returns what reads their rows:
        the prelude, the statements and the commit go in one pipeline (the one transaction the
        protocol keeps until its sync), one round trip, and the rows are read after it."""
        self._ensure_ready()
        dropped = rollbacks = 0
        while True:
            watch = _Watch()
            try:
                with self._borrow(check=not idempotent, watch=watch) as conn:
                    if lock is None and not walk and not read_after_sync:
                        if one_statement:  # atomic on its own
                            result = work(conn)
                        else:
                            with conn.transaction():
                                result = work(conn)
                    else:
                        prelude = _INDEX_LOOKUPS if lock is None else _LOCKED_INDEX_LOOKUPS if walk else _LOCK
                        params = None if lock is None else (lock, self._lock_seed)
                        if read_after_sync:
                            with _pipeline(conn):
                                conn.execute(prelude, params)
                                read = work(conn)
                            result = read()  # type: ignore[operator]  # work returned what reads its rows
                        else:
                            with _transaction(conn, prelude, params):
                                result = work(conn)
            except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded) as error:
                # A value PostgreSQL cannot hold (a NUL character in text, an id too large to
                # index...): nothing was written, and a retry would fail the same way.
                raise StoreError(f"{self!r}: value refused by PostgreSQL: {error}") from error
            except _ROLLED_BACK as error:
                rollbacks = self._rolled_back(error, rollbacks, idempotent=idempotent)
                continue
            except psycopg.OperationalError as error:
                failure = self._operational(error, watch)
                if failure is None or watch.fired:
                    self._lost(error)
                pool = self._pool
                dropped += 1
                if failure is not None or dropped == 2 or not idempotent or (pool is None and not self._owns):
                    raise failure or self._connection_failed(error) from error
                self._before_retry(pool)
                continue
            except psycopg.Error as error:
                raise StoreError(f"{self!r}: {error}") from error
            except UnicodeEncodeError as error:
                raise unstorable(repr(self), error) from error
            if self._outage is not None:
                self._recovered()
            return result

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        with self._setup_lock:
            if self._ready:
                return
            if self._auto_setup:
                self.setup()
            else:
                with self._borrow() as conn:
                    version = _version(conn, self.schema)
                if version < len(MIGRATIONS):
                    raise StoreError(f"{self!r}: schema missing or old; call setup() or run schema_sql()")
                self._ready = True

    # -- lifecycle -------------------------------------------------------------------------

    _terms = staticmethod(tsvector_literal)

    def setup(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Create or migrate the schema (under an advisory lock on the schema: many processes may
        run it at once), then index the rows a migration left unindexed (``progress(done, total)``).
        A schema already current is only read: a read-only role or server opens it."""
        try:
            with self._borrow() as conn:
                if _version(conn, self.schema) != len(MIGRATIONS):
                    self._migrate(conn)
        except psycopg.Error as error:
            raise StoreError(f"{self!r}: setup failed: {error}") from error
        self._ready = True
        self._backfill_search_terms(progress)
        self._anchor_all_overlays()

    def _migrate(self, conn: psycopg.Connection) -> None:
        """Create the schema and apply the migrations it lacks, in one transaction under the
        schema's setup lock."""
        with conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")  # a migration may take long
            conn.execute(_LOCK, (self.schema, _SETUP_LOCK))
            conn.execute(_query(f"CREATE SCHEMA IF NOT EXISTS {_quote(self.schema)}"))
            version = _version(conn, self.schema)
            if version > len(MIGRATIONS):
                raise StoreError(f"{self!r}: schema version {version} is newer than this library knows")
            for script in _qualified(list(MIGRATIONS[version:]), self.schema):
                conn.execute(_query(script))

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
        if not self._closed:
            with self._pool_lock:
                self._closed = True
                pool, self._pool = (self._pool, None) if self._owns else (None, self._pool)
            if pool is not None:
                pool.close()

    # -- batch insert: pipelined --------------------------------------------------------------

    def insert_message(
        self, session_id: str, record: MessageRecord, parent_id: str | None | _Latest
    ) -> Inserted | None:
        self._refuse_nul(record)
        return super().insert_message(session_id, record, parent_id)

    def update_message(self, session_id: str, record: MessageRecord) -> bool:
        self._refuse_nul(record)
        return super().update_message(session_id, record)

    def _refuse_nul(self, record: MessageRecord) -> None:
        """``StoreError`` naming the field if the record's id or text (a text column each) holds
        a NUL, before anything is sent: the same for a text of any size, where a large one's
        ``COPY`` would only say ``invalid byte sequence``."""
        for field, value in (("id", record.id), ("text (its text parts)", record.text)):
            position = value.find("\x00")
            if position >= 0:
                raise StoreError(
                    f"{self!r}: value refused by PostgreSQL: PostgreSQL text fields cannot contain NUL (0x00)"
                    f" bytes: the {field} of message {record.id!r} holds one at position {position}"
                )

    def insert_messages(
        self, session_id: str, records: Sequence[MessageRecord], parent_id: str | None | _Latest
    ) -> list[Inserted | None]:
        if not records:
            return []
        for record in records:
            self._refuse_nul(record)
        if all(len(record.content) <= LARGE_ROW and not record.blobs for record in records):
            # Small messages without attachments: sent with the session's lock and the commit,
            # one round trip, their rows read once all are back.
            def send(conn: psycopg.Connection) -> Callable[[], list[Inserted | None]]:
                cursors = self._send_run(conn, session_id, records, parent_id)
                return lambda: _inserted([cursor.fetchone() for cursor in cursors])

            return self._sent_then_read(send, lock=session_id, walk=True)

        def work(conn: psycopg.Connection) -> list[Inserted | None]:
            # Each message over LARGE_ROW is inserted on its own; the others in runs between them.
            results: list[Inserted | None] = []
            parent, run = parent_id, []
            for record in records:
                if len(record.content) > LARGE_ROW:
                    if run:
                        results += self._insert_run(conn, session_id, run, parent)
                        parent, run = run[-1].id, []
                    results += self._insert_large(conn, session_id, record, parent)
                    parent = record.id
                else:
                    run.append(record)
            if run:
                results += self._insert_run(conn, session_id, run, parent)
            return results

        return self._write(work, lock=session_id, walk=True)

    def _chain(
        self, session_id: str, records: Sequence[MessageRecord], parent_id: str | None | _Latest
    ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
        """The statement and parameters of a chain's first record under ``parent_id``, and the
        parameters of each next one (``INSERT_UNDER_PARENT``, under the record before)."""
        first = {**records[0].insert_params(session_id), "terms": tsvector_literal(records[0].text)}
        if isinstance(parent_id, _Latest):
            first_sql = self._insert_under_latest
        else:
            first_sql = self._insert_under_parent
            first["parent"] = parent_id
        rest = [
            {**record.insert_params(session_id), "terms": tsvector_literal(record.text), "parent": previous.id}
            for previous, record in zip(records, records[1:])
        ]
        return first_sql, first, rest

    def _send_run(
        self,
        conn: psycopg.Connection,
        session_id: str,
        records: Sequence[MessageRecord],
        parent_id: str | None | _Latest,
    ) -> list[psycopg.Cursor[Any]]:
        """Queue a chain of records under ``parent_id`` in the connection's pipeline; their
        cursors, whose rows arrive at the sync. Each statement sees the rows the ones before
        inserted (one transaction), so depths and totals chain up."""
        first_sql, first, rest = self._chain(session_id, records, parent_id)
        cursors = [conn.execute(_query(first_sql), first)]
        rest_sql = _query(self.compile(INSERT_UNDER_PARENT))
        # Not prepared: the generic plan of the chain's statement rescans the session (below).
        cursors += [conn.execute(rest_sql, params, prepare=False) for params in rest]
        return cursors

    def _insert_run(
        self,
        conn: psycopg.Connection,
        session_id: str,
        records: Sequence[MessageRecord],
        parent_id: str | None | _Latest,
    ) -> list[Inserted | None]:
        """Insert a chain of records under ``parent_id`` in the current transaction, the chain
        after the first pipelined (one round trip)."""
        first_sql, first, rest = self._chain(session_id, records, parent_id)
        head = conn.execute(_query(first_sql), first)
        rows: list[Any] = []
        if rest:
            # Pipelined: one round trip for the chain; each statement sees the rows the
            # previous ones inserted (same transaction), so depths and totals chain up.
            # Not as a prepared statement: its generic plan rescans the session for every
            # row, so a batch cost grew with the session (4 ms a message at 16,000 stored).
            threshold, conn.prepare_threshold = conn.prepare_threshold, None
            try:
                with conn.cursor() as cursor:
                    cursor.executemany(_query(self.compile(INSERT_UNDER_PARENT)), rest, returning=True)
                    while True:
                        rows.append(cursor.fetchone())
                        if not cursor.nextset():
                            break
            finally:
                conn.prepare_threshold = threshold
        rows.insert(0, head.fetchone())
        for record, row in zip(records, rows, strict=True):
            if row is not None:
                self._link_blobs(conn, row[4], record)
        return _inserted(rows)

    def _insert_large(
        self, conn: psycopg.Connection, session_id: str, record: MessageRecord, parent_id: str | None | _Latest
    ) -> list[Inserted | None]:
        """Insert one record over ``LARGE_ROW`` characters of JSON, its text and JSON staged by
        :meth:`_stage_large` (bound, each would be copied twice into the client's memory)."""
        self._stage_large(conn, record)
        params = {**record.insert_params(session_id), "terms": tsvector_literal(record.text)}
        del params["text"], params["content"]
        statement = INSERT_UNDER_LATEST if isinstance(parent_id, _Latest) else INSERT_UNDER_PARENT
        if not isinstance(parent_id, _Latest):
            params["parent"] = parent_id
        row = conn.execute(_query(self.compile(_from_stage(statement))), params).fetchone()
        if row is None:
            return [None]
        self._link_blobs(conn, row[4], record)
        return [Inserted(row[0], PathTotals(*row[1:4]))]

    def _update_row(self, conn: Any, seq: int, record: MessageRecord, params: dict[str, Any]) -> None:
        if len(record.content) <= LARGE_ROW:
            return super()._update_row(conn, seq, record, params)
        self._stage_large(conn, record)
        conn.execute(
            self.compile(_from_stage(UPDATE_MESSAGE)),
            {key: value for key, value in params.items() if key not in ("text", "content")},
        )

    @staticmethod
    def _stage_large(conn: psycopg.Connection, record: MessageRecord) -> None:
        """Put the record's text and JSON into this connection's staging table (emptied at
        commit), streamed with ``COPY`` a step at a time."""
        staged = conn.execute(f"SELECT to_regclass('{_STAGED}')").fetchone()
        assert staged is not None  # a SELECT without FROM gives one row
        if staged[0] is None:
            conn.execute(_STAGE_TABLE)
        else:
            conn.execute(f"DELETE FROM {_STAGED}")  # what an earlier message of this transaction staged
        with conn.cursor().copy(f"COPY {_STAGED} (text, content) FROM STDIN") as copy:
            for index, value in enumerate((record.text, record.content)):
                if index:
                    copy.write("\t")
                for start in range(0, len(value), _COPY_STEP):
                    step = value[start : start + _COPY_STEP]
                    for char, escaped in _COPY_ESCAPES:
                        step = step.replace(char, escaped)
                    copy.write(step)
            copy.write("\n")

    # -- search ----------------------------------------------------------------------------

    def _match_messages(
        self, units: tuple[Unit, ...], session_ids: Sequence[str] | None, limit: int
    ) -> list[SearchRow]:
        where = "" if session_ids is None else " AND session_id = ANY(:ids)"
        rows = self._all(
            "SELECT session_id, id, role, text_content, created_at FROM session_messages, CAST(:q AS tsquery) query"
            f" WHERE search_terms @@ query{where} ORDER BY ts_rank(search_terms, query) DESC, seq LIMIT :limit",
            {"q": tsquery_literal(units), "ids": list(session_ids or ()), "limit": limit},
        )
        return [SearchRow(*row) for row in rows]

    def _match_sessions(self, units: tuple[Unit, ...], namespace: str, limit: int) -> list[SearchRow]:
        rows = self._all(
            "SELECT s.id, m.id, m.role, m.text_content, m.created_at"
            " FROM session_messages m JOIN sessions s ON s.storage_id = m.session_id, CAST(:q AS tsquery) query"
            " WHERE m.search_terms @@ query AND s.namespace = :ns"
            " ORDER BY ts_rank(m.search_terms, query) DESC, m.seq LIMIT :limit",
            {"q": tsquery_literal(units), "ns": namespace, "limit": limit},
        )
        return [SearchRow(*row) for row in rows]

    def _match_entries(self, units: tuple[Unit, ...], session_id: str, label: str, limit: int) -> list[Any]:
        rows = self._all(
            "SELECT key, content FROM search_entries, CAST(:q AS tsquery) query"
            " WHERE session_id = :s AND label = :label AND search_terms @@ query"
            " ORDER BY ts_rank(search_terms, query) DESC, seq LIMIT :limit",
            {"q": tsquery_literal(units), "s": session_id, "label": label, "limit": limit},
        )
        return [(key, content) for key, content in rows]

    # -- ranked search --------------------------------------------------------------------

    _split_terms = staticmethod(tsvector_terms)

    def _postings(
        self, scope: SearchScope, words: Sequence[tuple[Alternative, ...]], n: int, estimate: bool
    ) -> list[list[int]]:
        """Every word's postings in one statement (a lateral query each). A GIN index yields a
        word's matches unordered, so the newest of a frequent one cost all of them: with
        ``estimate``, a word the planner's statistics say matches more than ``n`` messages is
        answered ``Estimated``, and the others are read by the word index alone (the session
        condition checked on the rows, where a bitmap of the session's index would cost more
        than the word's matches)."""
        found: list[list[int]] = [[] for _word in words]
        wanted = list(range(len(words)))
        if estimate and scope.entries_of is None and scope.items_under is None:
            frequencies, rows = self._lexeme_frequencies()
            wanted = []
            for i, word in enumerate(words):
                share = sum(_share(alternative, frequencies) for alternative in word)
                if share * rows > n:
                    found[i] = Estimated(share * rows)
                else:
                    wanted.append(i)
            if not wanted:
                return found
        params: dict[str, Any] = {"qs": [tsquery_literal((words[i],)) for i in wanted], "n": n}
        if scope.items_under is not None:
            where, bounds = item_under(*scope.items_under)
            rows_sql = f"SELECT seq FROM store_items WHERE {where} AND search_terms @@ CAST(w.q AS tsquery)"
            if scope.analysed:
                rows_sql = f"SELECT seq FROM ({rows_sql} UNION ALL {_ANALYSED_MATCHING}) AS matched"
                params["analysed"] = json.dumps([{"seq": seq, "terms": terms} for seq, terms in scope.analysed])
            rows_sql += " ORDER BY seq DESC LIMIT :n"
            params.update(bounds)
        elif scope.entries_of is not None:
            rows_sql = (
                "SELECT seq FROM search_entries WHERE session_id = :s AND label = :label"
                " AND search_terms @@ CAST(w.q AS tsquery) ORDER BY seq DESC LIMIT :n"
            )
            params["s"], params["label"] = scope.entries_of
        elif scope.namespace is not None:
            rows_sql = (
                "SELECT m.seq FROM session_messages m JOIN sessions s ON s.storage_id = m.session_id"
                " WHERE s.namespace = :ns AND m.search_terms @@ CAST(w.q AS tsquery)"
                f" ORDER BY {'m.seq + 0' if estimate else 'm.seq'} DESC LIMIT :n"
            )
            params["ns"] = scope.namespace
        else:
            # The rare words by the word index alone: neither the session's index nor the order
            # of ``seq`` (a backward scan for a rare word reads the table) may be used for them.
            where, order = "", "seq + 0" if estimate else "seq"
            if scope.session_ids is not None:
                where = " AND coalesce(session_id = ANY(:ids), false)" if estimate else " AND session_id = ANY(:ids)"
            rows_sql = (
                f"SELECT seq FROM session_messages WHERE search_terms @@ CAST(w.q AS tsquery){where}"
                f" ORDER BY {order} DESC LIMIT :n"
            )
            params["ids"] = list(scope.session_ids or ())
        if len(wanted) == 1:  # the query itself, not a lateral one: the planner sees the word (frequent?)
            params["q"] = params["qs"][0]
            found[wanted[0]] = [row[0] for row in self._all(rows_sql.replace("w.q", ":q"), params)]
            return found
        for i, seqs in self._all(
            "SELECT w.i, array(" + rows_sql + ") FROM unnest(CAST(:qs AS text[])) WITH ORDINALITY AS w(q, i)", params
        ):
            found[wanted[i - 1]] = list(seqs)
        return found

    def _lexeme_frequencies(self) -> tuple[dict[str, float], float]:
        """The share of messages holding each of the most common terms, and the messages
        counted, from the planner's statistics (``ANALYZE``), read at most every
        ``STATISTICS_SECONDS``; empty before the table is first analysed."""
        now = time.monotonic()
        cached = self._statistics
        if cached is not None and now - cached[0] < STATISTICS_SECONDS:
            return cached[1], cached[2]
        row = self._one(
            "SELECT CAST(CAST(s.most_common_elems AS text) AS text[]), s.most_common_elem_freqs, c.reltuples"
            " FROM pg_stats s JOIN pg_class c ON c.oid = to_regclass(:table)"
            " WHERE s.schemaname = :schema AND s.tablename = :name AND s.attname = :column",
            {
                "schema": self.schema,
                "table": f"{_quote(self.schema)}.session_messages",
                "name": "session_messages",
                "column": "search_terms",
            },
        )
        frequencies = dict(zip(row[0], row[1])) if row is not None and row[0] and row[1] else {}
        rows = float(row[2]) if row is not None and row[2] and row[2] > 0 else 0.0
        self._statistics = (now, frequencies, rows)
        return frequencies, rows

    def _index_waiting_items(self, namespace: str, under: str) -> tuple[tuple[int, str], ...]:
        where, params = item_under(namespace, under)
        waiting = self._all(_WAITING_ITEMS.replace("{under}", where), params)
        if not waiting:
            return ()
        analysed = tuple((seq, tsvector_literal(text)) for seq, text in waiting)
        if time.monotonic() < self._index_refused_until:
            return analysed
        texts = dict(waiting)
        rows = json.dumps([{"seq": seq, "text": texts[seq], "terms": terms} for seq, terms in analysed])
        sql = self.compile(_INDEX_ITEMS)
        try:
            self._write(lambda conn: conn.execute(_query(sql), {"rows": rows}))
        except StoreError as error:
            if not isinstance(error.__cause__, _CANNOT_WRITE):
                raise
            # A read-only role or server: this search matches them as analysed, and the next
            # ones do without asking again for a while (a standby may be promoted).
            self._index_refused_until = time.monotonic() + INDEX_REFUSED_SECONDS
            return analysed
        return ()

    def _indexed_messages(self) -> int:
        estimate = self._one(
            "SELECT reltuples FROM pg_class WHERE oid = to_regclass(:table)",
            {"table": f"{_quote(self.schema)}.session_messages"},
        )
        if estimate is not None and estimate[0] >= EXACT_TOTAL_BELOW:
            return int(estimate[0])
        return self._one("SELECT count(*) FROM session_messages WHERE length(search_terms) > 0", {})[0]


def _share(alternative: Alternative, frequencies: dict[str, float]) -> float:
    """About the share of messages ``alternative`` matches, by the planner's most common terms
    (0 for what they do not list: a rare word): a term's own, a prefix's terms' together, a
    phrase's rarest term's."""
    if alternative.prefix and len(alternative.terms) == 1:
        start = alternative.terms[0]
        return min(1.0, sum(share for term, share in frequencies.items() if term.startswith(start)))
    return min(frequencies.get(term, 0.0) for term in alternative.terms)


INDEX_REFUSED_SECONDS = 60.0
"""How long a store whose server refused to index the waiting items (a read-only role or server)
searches them as analysed without trying to write them again."""
STATISTICS_SECONDS = 600.0
"""How long ranked search keeps the planner's term statistics before reading them again."""
EXACT_TOTAL_BELOW = 50_000
"""Below this many messages (by the planner's estimate) ranked search counts them exactly."""


def _version(conn: psycopg.Connection, schema: str) -> int:
    table = conn.execute("SELECT to_regclass(%s)", (f"{_quote(schema)}.session_memory_schema",)).fetchone()
    assert table is not None  # a SELECT without FROM gives one row
    if table[0] is None:
        return 0
    row = conn.execute(_query(f"SELECT version FROM {_quote(schema)}.session_memory_schema")).fetchone()
    return 0 if row is None else row[0]


_INDEX_PLANS = (
    "set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),"
    " set_config('enable_seqscan', 'off', true)"
)
_INDEX_LOOKUPS = f"SELECT {_INDEX_PLANS}"
"""Keep the planner on index lookups for this transaction (``set_config(..., true)`` is ``SET
LOCAL``). Right after a table fills, its statistics still say "empty", and a hash join would
rescan the session at every step of a recursive walk (depth x rows)."""
_SESSION_LOCK = "pg_advisory_xact_lock(hashtextextended(%s, %s))"
_LOCK = f"SELECT {_SESSION_LOCK}"
"""The transaction's lock on the name given first, hashed with the seed given second: a session
id with its schema's ``_lock_seed`` (``_lock_session``), or a schema's name with ``_SETUP_LOCK``."""
_LOCKED_INDEX_LOOKUPS = f"SELECT {_SESSION_LOCK}, {_INDEX_PLANS}"
"""``_LOCK`` and ``_INDEX_LOOKUPS`` in one statement."""


@contextmanager
def _pipeline(conn: psycopg.Connection) -> Iterator[None]:
    """``conn.pipeline()``, whose warning when it ends on a lost connection is dropped (the
    store logs the outage once)."""
    _QUIET.on = True
    try:
        with conn.pipeline():
            yield
    finally:
        _QUIET.on = False


@contextmanager
def _transaction(conn: psycopg.Connection, prelude: LiteralString, params: tuple[Any, ...] | None) -> Iterator[None]:
    """A transaction on an autocommit connection that starts with ``prelude``: its ``BEGIN`` and
    the prelude pipelined, one round trip rather than two. Committed when the block ends, rolled
    back when it raises (a broken connection is left to the pool)."""
    try:
        with _pipeline(conn):
            conn.execute("BEGIN")
            conn.execute(prelude, params)
        yield
    except BaseException:
        if not conn.broken:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
        raise
    conn.commit()


def _inserted(rows: Sequence[Any]) -> list[Inserted | None]:
    """What each insert's row says (``None``: nothing inserted, an id already stored)."""
    return [None if row is None else Inserted(row[0], PathTotals(*row[1:4])) for row in rows]


def _check_schema(schema: str) -> None:
    """Refuse up front a schema name PostgreSQL would not keep as given: empty, with a NUL or a
    lone surrogate, or over 63 bytes (PostgreSQL cuts such a name)."""
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a string, not {type(schema).__name__}")
    try:
        size = len(schema.encode("utf-8"))
    except UnicodeEncodeError:
        size = 0
    if not 0 < size <= 63 or "\x00" in schema:
        raise StoreError(f"unusable PostgreSQL schema name {schema!r}: give 1 to 63 bytes of UTF-8 text without NUL")


_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def _check_conninfo(params: dict[str, Any], description: str) -> None:
    """Refuse at once what libpq would refuse only when connecting: a ``port`` (each of a
    multi-host list; an empty one means the default) not an integer 1 to 65535, an unknown
    ``sslmode``."""
    for port in str(params.get("port", "")).split(","):
        port = port.strip()
        if port and not (port.isascii() and port.isdigit() and 0 < int(port) <= 65535):
            raise InvalidInputError(
                f"invalid PostgreSQL conninfo {description!r}: port {port!r} is not an integer from 1 to 65535"
            )
    sslmode = params.get("sslmode")
    if sslmode is not None and sslmode not in _SSLMODES:
        raise InvalidInputError(
            f"invalid PostgreSQL conninfo {description!r}: sslmode {sslmode!r} is not one of {', '.join(_SSLMODES)}"
        )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _text_conninfo(pool: ConnectionPool) -> str:
    return pool.conninfo() if callable(pool.conninfo) else pool.conninfo


def _seconds(name: str, value: float) -> float:
    """``value`` as a positive number of seconds, else ``InvalidInputError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise InvalidInputError(f"{name} must be a positive number of seconds (or None where allowed), not {value!r}")
    return float(value)


def _network_options(params: dict[str, Any]) -> dict[str, str]:
    """TCP keepalives and ``tcp_user_timeout`` (libpq >= 12) for what the conninfo leaves unset."""
    options = dict(_KEEPALIVES)
    if psycopg.pq.version() >= 120000:
        options["tcp_user_timeout"] = _TCP_USER_TIMEOUT
    return {key: value for key, value in options.items() if key not in params}


class _Watch:
    """One call's entry with the watchdog: ``fired`` once it closed the call's connection."""

    __slots__ = ("conn", "deadline", "fired")

    def __init__(self) -> None:
        self.conn: psycopg.Connection | None = None
        self.deadline = 0.0
        self.fired = False


class _Watchdog:
    """One thread per store that shuts the socket of a connection whose call outlived its
    deadline: psycopg has no client-side timeout, and neither the server's
    ``statement_timeout`` nor TCP keepalives end a call to a server or network that froze
    with its sockets open. The blocked call then fails at once with ``OperationalError``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watches: dict[int, _Watch] = {}  # by arming order, so by deadline
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._until = math.inf
        """When the thread next looks at the watches by itself: a call armed later than that
        does not wake it (a thread switch per call)."""

    def arm(self, watch: _Watch, conn: psycopg.Connection, seconds: float) -> None:
        with self._cond:
            watch.conn, watch.deadline, watch.fired = conn, time.monotonic() + seconds, False
            self._watches[id(watch)] = watch
            if self._thread is None:
                self._stopped = False
                self._thread = threading.Thread(target=self._run, name="session-memory-watchdog", daemon=True)
                self._thread.start()
            elif watch.deadline < self._until:
                self._cond.notify()

    def disarm(self, watch: _Watch) -> None:
        with self._cond:
            self._watches.pop(id(watch), None)
            watch.conn = None

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._thread = None
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                if not self._watches:
                    self._until = math.inf
                    self._cond.wait()
                    continue
                key, watch = next(iter(self._watches.items()))
                delay = watch.deadline - time.monotonic()
                if delay > 0:
                    self._until = watch.deadline
                    self._cond.wait(delay)
                    continue
                del self._watches[key]
                watch.fired = True
                if watch.conn is not None:
                    _sever(watch.conn)  # under the lock: a disarmed connection is never cut


def _sever(conn: psycopg.Connection) -> None:
    """Shut ``conn``'s socket both ways, which wakes a thread waiting on it."""
    try:
        duplicate = socket.socket(fileno=os.dup(conn.pgconn.socket))
    except (psycopg.Error, OSError):
        return  # already closed
    with duplicate, contextlib.suppress(OSError):
        duplicate.shutdown(socket.SHUT_RDWR)


_QUIET = threading.local()

_NOISE = (
    "discarding broken connection",
    "discarding closed connection",
    "error connecting in",
    "reconnection attempt in pool",
    "task run",
    "error ignored terminating",
)
"""psycopg_pool's warnings, one per connection, about connections lost or not made, and
psycopg's about a pipeline ended on a lost connection."""


def _quietly(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` with psycopg_pool's connection-loss warnings of this thread dropped."""
    _QUIET.on = True
    try:
        return call(*args)
    finally:
        _QUIET.on = False


class _PoolNoise(logging.Filter):
    """Drops psycopg_pool's per-connection warnings about lost connections of the stores' own
    pools (from their worker threads, or from the store's calls into the pool), and psycopg's
    about the stores' pipelines on them: the store logs one warning per outage instead. Other
    pools' and connections' records pass."""

    installed = False

    @classmethod
    def install(cls) -> None:
        if not cls.installed:
            cls.installed = True
            logging.getLogger("psycopg.pool").addFilter(cls())
            logging.getLogger("psycopg").addFilter(cls())

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not str(record.msg).startswith(_NOISE):
            return True
        ours = getattr(_QUIET, "on", False) or (record.threadName or "").startswith(f"{_POOL_NAME}-")
        ours = ours or (isinstance(record.args, tuple) and _POOL_NAME in record.args)
        return not ours
