"""SQLite store: one file (or ``:memory:``), WAL, FTS5 kept current by triggers.

The SQL both stores run is in :mod:`.sql`; this dialect keeps the connection and its lock,
write transactions, the migrations' bookkeeping (``PRAGMA user_version``), FTS5 search and a
set-based batch insert.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import sqlite3
import stat
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache, partial
from itertools import chain
from operator import itemgetter
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from ..cipher import CIPHER_SETTINGS, DEFAULT_SETTINGS, HEAD_BYTES, key_pragma, key_problem, key_text
from ..errors import EncryptionKeyError, InvalidInputError, StoreError, StoreUnavailableError
from ..fts import Alternative, Unit, fts5_expression, index_text
from ..text import unstorable
from .base import LATEST, Inserted, ItemCondition, MessageRecord, PathTotals, SearchRow, _Latest, utf8_size
from .sql import (
    BACKFILL_PENDING,
    ITEM_COMPARISONS,
    ITEM_ROW_COLUMNS,
    LARGE_ROW,
    LATEST_LEAF_TOTALS,
    MESSAGE_COLUMNS,
    NAMESPACE_STORAGE_IDS,
    POSITION,
    PUT_ITEMS,
    SearchScope,
    SqlStore,
    item_scope_token,
    item_scope_tokens,
    load_migrations,
)

T = TypeVar("T")

MIGRATIONS: tuple[str, ...] = load_migrations("sqlite")
"""Append-only; ``PRAGMA user_version`` counts those applied. Small columns come before the
large ones so that walking a path never reads content pages."""

SEARCH_CANDIDATES = 1_000
"""Matches ranked at most per search: the most recent ones when a query matches more."""

CATCH_UP = 64
"""New rows wait for the keyword indexes (migration 0015) until a search of their table, a write
of this many rows or more, or every this-many-th write of a store, indexes them; items wait for
a search of theirs (or the store's ``close()``) only (migration 0017)."""

_WRITE_STEP = 1 << 20
"""Characters encoded and written at a time by an in-place write."""

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
"""A named parameter of a statement."""

_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error,)
"""The drivers' error classes: SQLCipher's join when it loads (they do not derive from
``sqlite3.Error``)."""
_OPERATIONAL: tuple[type[Exception], ...] = (sqlite3.OperationalError,)

ENCRYPTION_HINT = 'pip install "session-memory[encryption]"'

_CIPHER_CACHE_KIB = 16_000
"""The page cache of an encrypted connection: a page found there is not decrypted again
(SQLite's default, 2,000 KiB, made a long history's read 1.35x slower than on a plain file)."""

_INSERT_ROW = f"INSERT INTO session_messages ({MESSAGE_COLUMNS}) VALUES ({', '.join('?' * 13)})"
_INSERT_LARGE_ROW = (
    f"INSERT INTO session_messages ({MESSAGE_COLUMNS}, large_text, large_content)"
    f" VALUES ({', '.join('?' * 13)}, zeroblob(?), zeroblob(?))"
)
_UPDATE_LARGE_ROW = (
    "UPDATE session_messages SET role = :role, tokens = :tokens, bytes = :bytes, text_content = '',"
    " search_terms = :terms, content = '', large_text = zeroblob(:text_bytes),"
    " large_content = zeroblob(:content_bytes), path_tokens = path_tokens + :shift_tokens,"
    " path_bytes = path_bytes + :shift_bytes WHERE seq = :seq"
)
_MATCHED_TEXT = "CAST(coalesce(m.large_text, m.text_content) AS TEXT)"  # MESSAGE_TEXT of a search hit ``m``
_POSITIONS = f"SELECT id, {POSITION} FROM session_messages"
_POSITION_OF = f"{_POSITIONS} WHERE session_id = ? AND id = ?"
_FTS_SOURCES = {
    "session_messages": "search_terms, session_token",
    "search_entries": "search_terms",
    "store_items": "search_terms, scope_tokens",
}
"""The tables with a keyword index (``<table>_fts``), and its columns."""
_FTS_TABLES = tuple(f"{source}_fts" for source in _FTS_SOURCES)
_ABOVE_MARK = {source: f"seq > (SELECT seq FROM fts_indexed WHERE source = '{source}')" for source in _FTS_SOURCES}
"""The rows of each table that wait for its keyword index (migration 0015)."""
_WAITING = {source: f"SELECT 1 FROM {source} WHERE {above} LIMIT 1" for source, above in _ABOVE_MARK.items()}
"""A row when rows of the table wait for its keyword index (migration 0015)."""
_INDEXED_BY_WRITES = ("session_messages", "search_entries")
"""The tables whose waiting rows a write indexes (``CATCH_UP``): an item waits for a search."""
_ANALYSED_WHEN_INDEXED = "store_items"
"""The table whose waiting rows hold the text to analyse in their ``search_terms`` (migration
0017), not its terms: an item put costs neither the analysis nor the keyword index."""
_FRAGMENTS = {
    "{random_id}": "lower(hex(randomblob(16)))",
    "{rowid}": "rowid",
    "{terms}": ":terms",
    "{terms_text}": "search_terms",
    "{for_update}": "",
    "{skip_locked}": "",
    "{first}": "?",
    "{json}": ":metadata",
    "{json_text}": "metadata",
    "{json_text_of_c}": "c.metadata",
    # SQLite keeps the left table of a CROSS JOIN as the outer loop: one key lookup a row of a.
    "{parent_of_a}": (
        "CROSS JOIN checkpoints c"
        " ON c.session_id = :s AND c.checkpoint_ns = :ns AND c.checkpoint_id = a.parent_checkpoint_id"
    ),
    "{writes_of_a}": (
        "CROSS JOIN checkpoint_writes w"
        " ON w.session_id = :s AND w.checkpoint_ns = :ns AND w.checkpoint_id = a.checkpoint_id"
    ),
    "{has_delta}": "json_type(metadata, '$.counters_since_delta_snapshot') IS NOT NULL",
    "{value_text}": "value",
    "{as_json}": "",
    "{waiting_text}": "search_terms",  # a waiting item's (migration 0017)
    "{waiting_value}": "r.terms",
    "{terms_emptied}": "",
    "{bigint}": "INTEGER",
    "{item_versions}": (  # an item's current version is in its row only (migration 0016)
        "(SELECT namespace, prefix, key, version, value, created_at FROM store_item_versions UNION ALL"
        " SELECT namespace, prefix, key, version, value, updated_at FROM store_items)"
    ),
}

_HINTS = (
    (
        "readonly",
        "the file or its folder is read-only for this process: make them writable, or open the store"
        " with read_only=True to read it",
    ),
    ("locked", "another connection held the write lock past the busy timeout: retry, or raise timeout="),
    ("malformed", "the file is damaged: restore it from a backup"),
    ("not a database", "the path names a file that is not a SQLite database: check the path"),
    ("disk i/o", "the disk failed or is full: check the device and its free space, then retry"),
    ("full", "the disk is full: free some space, then retry"),
    (
        "unable to open",
        "check that the path and its folder exist and that this process may write there (to read"
        " a read-only file or folder, open the store with read_only=True)",
    ),
)

_READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 8, 10, 11, 13, 14, 26  # SQLite's primary result codes
_DISCARD = frozenset({_READONLY, _IOERR, _CORRUPT, _NOTADB, _CANTOPEN, _FULL})
"""Primary result codes after which the connection is closed, so that the next call opens the
file afresh: a connection that met a read-only or damaged file stays that way after a repair."""

_CODE_OF_MESSAGE = {
    "attempt to write a readonly database": _READONLY,
    "disk I/O error": _IOERR,
    "database disk image is malformed": _CORRUPT,
    "database or disk is full": _FULL,
    "unable to open database file": _CANTOPEN,
    "file is not a database": _NOTADB,
}
"""Python 3.10's ``sqlite3`` errors carry no result code: their message names it."""


def _would_own_shm(path: str) -> bool:
    """Whether SQLite, reading the WAL database ``path``, would create a ``-shm`` owned by this
    process: none exists, the process is not root (root's is given the file's owner) and does
    not own the file."""
    if not hasattr(os, "geteuid") or os.path.exists(path + "-shm") or os.geteuid() == 0:
        return False
    try:
        with open(path, "rb") as file:
            header = file.read(20)
        owner = os.stat(path).st_uid
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and owner != os.geteuid()


def result_code(error: BaseException) -> int | None:
    """The primary SQLite result code of a driver error (``sqlite3`` or SQLCipher's), when it can
    be known."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if code is not None else _CODE_OF_MESSAGE.get(str(error))


def is_not_a_database(error: BaseException) -> bool:
    """Whether SQLite found that the file is no SQLite database."""
    return isinstance(error, _ERRORS) and result_code(error) == _NOTADB


@lru_cache(maxsize=1)
def _cipher() -> ModuleType:
    """SQLCipher's driver, ``sqlcipher3.dbapi2``, imported on first use (its errors then join
    ``_ERRORS``)."""
    global _ERRORS, _OPERATIONAL
    try:
        dbapi2 = importlib.import_module("sqlcipher3.dbapi2")
    except ImportError as error:
        raise StoreError(f"an encrypted SQLite store (key=) needs SQLCipher: {ENCRYPTION_HINT}") from error
    _ERRORS = (sqlite3.Error, dbapi2.Error)
    _OPERATIONAL = (sqlite3.OperationalError, dbapi2.OperationalError)
    return dbapi2


def silence_sqlcipher_log() -> None:
    """Stop SQLCipher printing its own log lines (a wrong key's) to stderr, process-wide: for a
    program, such as the ``sessions`` command, whose errors already say what went wrong."""
    with contextlib.closing(_cipher().connect(":memory:")) as conn:
        conn.execute("PRAGMA cipher_log_level = NONE")


_LOG_LEVEL_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_sqlcipher(conn: Any) -> Iterator[None]:
    """SQLCipher's log (process-wide) silenced while a file is tried with settings that may not
    be its own: that failure is expected, and the next try, logged, settles it."""
    with _LOG_LEVEL_LOCK:
        level = conn.execute("PRAGMA cipher_log_level").fetchone()[0]
        conn.execute("PRAGMA cipher_log_level = NONE")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA cipher_log_level = {level}")


class SqliteStore(SqlStore):
    """A SQLite database file, or ``":memory:"``.

    ``synchronous="NORMAL"`` (the default) with WAL survives a crash of the process: every
    append that returned is on disk. ``"FULL"`` also survives a power loss, at a cost per commit.
    Driver failures raise ``StoreError`` with the ``sqlite3`` error as the cause; after one that
    concerns the file (read-only, damaged, missing, disk full or failing) the next call opens it
    afresh, so the store works again once the fault is repaired. A write to a file deleted or
    replaced since it was opened raises ``StoreError`` and writes nothing (the next call opens
    what the path names then). ``url`` is what ``Session`` takes to open the same database again:
    the file's absolute path, or ``":memory:"`` (a new, empty database).

    ``read_only=True`` opens an existing file without ever writing to it, also in a read-only
    folder or on read-only media (a backup, a mounted snapshot): every write raises
    ``StoreError``, and ``setup()`` migrates nothing (it refuses a schema older or newer than
    this library's, or one whose migration has not finished re-indexing).

    ``key=`` encrypts the file (pages, WAL and search index) with SQLCipher (extra
    ``encryption``): a str passphrase, or 32 bytes used as the raw key (no key derivation, so
    opening is faster). Every feature works as on a plain file. A wrong key, no key for an
    encrypted file, or a key for a plain one raise ``EncryptionKeyError``; :meth:`rekey`
    changes the key, or encrypts a plain file.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
        auto_setup: bool = True,
        read_only: bool = False,
        key: str | bytes | None = None,
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise InvalidInputError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self._key_sql = None if key is None else key_pragma(key)
        self._cipher_settings: tuple[str, ...] | None = None  # known once an encrypted file opened
        self._driver = sqlite3 if key is None else _cipher()
        self._in_place = hasattr(self._driver.Connection, "blobopen")  # Python 3.11+; SQLCipher's lacks it
        self.database = str(path)
        if read_only and (self.database == ":memory:" or self.database.startswith("file:")):
            raise InvalidInputError("read_only=True takes the path of a database file")
        self.read_only = read_only
        # The file's absolute path: as given when it is one (no I/O), else resolved when it opens.
        self._url: str | None = os.path.normpath(self.database) if os.path.isabs(self.database) else None
        super().__init__()
        self._upserts_by_count: dict[int, str] = {}  # by the number of rows
        self._lock = threading.RLock()
        self._connected = _Connected(self)
        self._auto_setup = auto_setup
        self._ready = False
        self._closed = False
        self._timeout = timeout
        self._synchronous = synchronous.upper()
        self._conn: sqlite3.Connection = None  # type: ignore[assignment]  # opened on first use
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened
        self._writes = 0
        self._waiting_built: dict[str, tuple[sqlite3.Connection, int]] = {}  # read-only: each temporary index's state
        self._waiting_terms: dict[int, str] = {}  # read-only: the waiting items' terms, by seq (migration 0017)

    @property
    def url(self) -> str:
        """The file's absolute path (resolved against the working directory it was opened in),
        or the ``":memory:"`` / ``file:`` name as given."""
        if self.database == ":memory:" or self.database.startswith("file:"):
            return self.database
        return self._url or os.path.abspath(self.database)

    def _connect(self) -> None:
        """Open the connection (on first use, so that building a store does no I/O)."""
        timeout = self._timeout
        on_disk = not (self.database == ":memory:" or self.database.startswith("file:"))
        if self._url is None and on_disk:
            self._url = os.path.abspath(self.database)
        conn = None
        try:
            conn = self._open_read_only() if self.read_only else self._open(self.database)
            self._conn = conn
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if on_disk and not self.read_only:
                self._use_wal(timeout)
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA secure_delete = ON")  # what is deleted is zeroed, never left in free pages
            self._identity = self._file_identity() if on_disk else None
        except (*_ERRORS, OSError) as error:
            self._conn = None  # type: ignore[assignment]
            if conn is not None:
                conn.close()
            if isinstance(error, OSError):
                raise StoreError(f"{self!r}: cannot read the file's identity: {error}") from error
            raise self._failure(error) from error

    def _open(self, database: str, *, uri: bool = False) -> sqlite3.Connection:
        """A connection through this store's driver. With a key, the key and the cipher settings
        are set before anything else and the file is read once: the store's own settings
        (``CIPHER_SETTINGS``, which a new file takes), else SQLCipher's defaults for a file made
        with them; the settings that decrypted the file are kept for the store's next opens."""
        if self._key_sql is None:
            return self._driver.connect(
                database, uri=uri, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
        choices = (CIPHER_SETTINGS, DEFAULT_SETTINGS) if self._cipher_settings is None else (self._cipher_settings,)
        for tried, settings in enumerate(choices, 1):
            conn = self._driver.connect(
                database, uri=uri, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            try:
                conn.execute(f"PRAGMA key = {self._key_sql}")
                for setting in settings:
                    conn.execute(f"PRAGMA {setting}")
                with _quiet_sqlcipher(conn) if tried < len(choices) else contextlib.nullcontext():
                    conn.execute(f"PRAGMA cache_size = -{_CIPHER_CACHE_KIB}")
                    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the key decrypts the file
            except BaseException as error:
                conn.close()
                if tried < len(choices) and is_not_a_database(error):
                    continue
                raise
            self._cipher_settings = settings
            return conn
        raise AssertionError("unreachable: the last choice returns or raises")

    def _open_read_only(self) -> sqlite3.Connection:
        """The file opened with ``mode=ro``; with ``immutable=1`` instead where WAL's ``-shm``
        cannot be made (a read-only folder: ``SQLITE_CANTOPEN`` or ``SQLITE_READONLY``) or would
        be the reader's own (a WAL file of another owner without ``-shm``, which SQLite would
        create for a reader that is not root): only when no ``-wal`` file holds changes, which
        an immutable connection would not see (nor what writers commit after it opened)."""
        path = self.url
        if not os.path.isfile(path):
            raise StoreError(f"{self!r}: no database file at {path} (read_only=True never creates one)")
        uri = f"file:{urllib.parse.quote(path)}?mode=ro"
        if not _would_own_shm(path):
            conn = self._open(uri, uri=True)
            try:
                conn.execute("PRAGMA user_version").fetchone()  # opens the file and, in WAL, its -shm
                return conn
            except _ERRORS as error:
                conn.close()
                if result_code(error) not in (_CANTOPEN, _READONLY):
                    raise
                self._refuse_pending_wal(path, error)
        else:
            self._refuse_pending_wal(path, None)
        conn = self._open(f"{uri}&immutable=1", uri=True)
        try:
            conn.execute("PRAGMA user_version").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    def _refuse_pending_wal(self, path: str, error: BaseException | None) -> None:
        """``StoreError`` if ``path-wal`` holds changes, which only a connection with ``-shm`` reads."""
        try:
            pending = os.path.getsize(path + "-wal") > 0
        except FileNotFoundError:
            pending = False
        if pending:
            raise StoreError(
                f"{self!r}: cannot be read where it is: its write-ahead log {path}-wal holds changes, and"
                f" SQLite cannot read them without creating the {path}-shm in this folder, which a read-only"
                " reader does not do; copy the database with its -wal file into a writable folder and open the copy"
            ) from error

    def _file_identity(self) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of the file the path names now."""
        status = os.stat(self._url)  # type: ignore[arg-type]
        return status.st_dev, status.st_ino

    def _check_same_file(self) -> None:
        """Refuse to write when the path no longer names the file the connection has open (deleted,
        or replaced by another): what it acknowledged would be lost with the unlinked file. One
        ``stat`` per write transaction."""
        try:
            status = os.stat(self._url)  # type: ignore[arg-type]
        except FileNotFoundError:
            found = None
        except OSError as error:
            raise StoreError(f"{self!r}: cannot check the database file before writing: {error}") from error
        else:
            found = (status.st_dev, status.st_ino)
            if found == self._identity:
                return
        self._discard_connection()
        what = "was deleted (or moved away)" if found is None else "was replaced by another file"
        raise StoreUnavailableError(
            f"{self!r}: the database file {what} since this store opened it; nothing was written. Delete"
            " or replace a database file only while no store has it open (with its -wal and -shm files);"
            " this store's next call opens what the path names then"
        )

    def __repr__(self) -> str:
        return f"SqliteStore({self.database!r}{', read_only=True' if self.read_only else ''})"

    def _use_wal(self, timeout: float) -> None:
        """Switch the file to WAL. The switch needs the file to itself and SQLite reports
        "database is locked" at once instead of waiting (processes opening a new file together),
        so retry until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except _OPERATIONAL as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    def _failure(self, error: BaseException) -> StoreError:
        """The library error for a driver error; closes the connection after a fault of the file
        (the next call opens it afresh)."""
        if result_code(error) in _DISCARD:
            self._discard_connection()
        problem = self._key_problem(error)
        if problem is not None:
            return EncryptionKeyError(f"{self!r}: {problem}")
        text = str(error)
        hint = next((hint for needle, hint in _HINTS if needle in text.lower()), None)
        return StoreError(f"{self!r}: {text}" + (f" ({hint})" if hint else ""))

    def _discard_connection(self) -> None:
        """Close the connection unless a transaction is open on it (an outer one rolls back first)."""
        with self._lock:
            conn = self._conn
            if conn is None or conn.in_transaction:
                return
            self._conn = None  # type: ignore[assignment]
            self._ready = False
            with contextlib.suppress(*_ERRORS):  # the connection is dropped either way
                conn.close()

    def _key_problem(self, error: BaseException) -> str | None:
        """Why SQLite found no database in the file, when a key explains it (wrong, missing, or
        given for a plain file)."""
        if not is_not_a_database(error):
            return None
        head = b""
        if self._url is not None:
            with contextlib.suppress(OSError), open(self._url, "rb") as file:
                head = file.read(HEAD_BYTES)
        return key_problem(head, keyed=self._key_sql is not None)

    def _refuse_write(self) -> None:
        raise StoreError(f"{self!r}: opened read-only, so nothing was written; open it without read_only=True to write")

    # -- the dialect's hooks ---------------------------------------------------------------

    def _translate(self, sql: str) -> str:
        for fragment, replacement in _FRAGMENTS.items():
            sql = sql.replace(fragment, replacement)
        return sql

    def _read(self, work: Callable[[sqlite3.Connection], T], *, walk: bool = False) -> T:
        try:
            with self._connected as conn:
                return work(conn)
        except _ERRORS as error:
            raise self._failure(error) from error
        except UnicodeEncodeError as error:
            raise unstorable(repr(self), error) from error

    def _write(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        lock: str | None = None,
        walk: bool = False,
        idempotent: bool = True,
        one_statement: bool = False,
    ) -> T:
        # BEGIN IMMEDIATE takes the database's write lock: every writer is serialised.
        if self.read_only:
            self._refuse_write()
        try:
            with self._connected as conn:
                if self._identity is not None:
                    self._check_same_file()
                self._writes += 1
                before = conn.total_changes
                if one_statement:
                    result = work(conn)
                    if self._catch_up_due(conn, before) and _waits(conn):
                        with self._transaction():
                            _catch_up(conn)
                    return result
                with self._transaction():
                    result = work(conn)
                    if self._catch_up_due(conn, before):
                        _catch_up(conn)
                    return result
        except _ERRORS as error:
            raise self._failure(error) from error
        except UnicodeEncodeError as error:
            raise unstorable(repr(self), error) from error

    def _catch_up_due(self, conn: sqlite3.Connection, changes_before: int) -> bool:
        """Whether this write indexes what waits for the keyword indexes (migration 0015): a
        write of ``CATCH_UP`` rows or more, and every ``CATCH_UP``-th write."""
        return conn.total_changes - changes_before >= CATCH_UP or self._writes % CATCH_UP == 0

    _terms = staticmethod(index_text)

    def _list(self, values: Sequence[Any], uses: int = 1) -> tuple[str, tuple[Any, ...]]:
        return _marks(len(values)), tuple(values) * uses

    def _rows(self, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        return f"(VALUES {', '.join(['(?)'] * len(values))})", tuple(values)

    def _by_position(self, sql: str, names: tuple[str, ...]) -> tuple[str, Callable[[tuple[Any, ...]], Any]]:
        # Numbered: sqlite3 finds a named parameter by a linear scan of the statement's names (600
        # of them bound in 796 µs, against 79 by position); Python 3.12+ takes a tuple for ``?N``.
        number = {name: f"?{n}" for n, name in enumerate(names, 1)}
        return _NAMED.sub(lambda match: number[match[1]], self.compile(sql)), tuple

    def _put_items(self, namespace: str, rows: Sequence[tuple[Any, ...]], now_us: int) -> tuple[str, tuple[Any, ...]]:
        sql = self._upserts_by_count.get(len(rows))
        if sql is None:
            sql = self._upserts_by_count[len(rows)] = self._by_position(*_put_items_sql(len(rows)))[0]
        return sql, (namespace, now_us, *chain.from_iterable(rows))

    def _execute_many(self, conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> None:
        conn.executemany(sql, params)

    def _bind_first(self, value: Any, params: tuple[Any, ...]) -> tuple[Any, ...]:
        return (value, *params)

    def _item_condition(self, condition: ItemCondition, n: int) -> tuple[str, dict[str, Any]]:
        path = "$" + "".join('."' + label.replace('"', '""') + '"' for label in condition.path)
        params: dict[str, Any] = {f"ip{n}": path}
        kind, at = f"json_type(value, :ip{n})", f"json_extract(value, :ip{n})"
        value, op = condition.value, ITEM_COMPARISONS[condition.op]
        if value is None or isinstance(value, bool):
            json_kind = "null" if value is None else str(value).lower()
            missing = " OR " + kind + " IS NULL" if value is None else ""
            test = f"({kind} = '{json_kind}'{missing})" if op == "=" else "0"
        elif isinstance(value, (int, float)):
            params[f"iv{n}"] = float(value)  # an integer past 64 bits too
            test = f"(CASE WHEN {kind} IN ('integer', 'real') THEN {at} {op} :iv{n} ELSE 0 END)"
        elif isinstance(value, str):
            params[f"iv{n}"] = value
            test = f"(CASE WHEN {kind} = 'text' THEN {at} {op} :iv{n} ELSE 0 END)"
        else:
            params[f"iv{n}"] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            test = f"(CASE WHEN {kind} IN ('object', 'array') THEN {at} {op} :iv{n} ELSE 0 END)"
        return (f"NOT coalesce({test}, 0)" if condition.op == "$ne" else f"coalesce({test}, 0)"), params

    def _metadata_where(self, items: Sequence[tuple[str, Any]]) -> tuple[str, dict[str, Any]]:
        conditions, params = [], {}
        for n, (key, value) in enumerate(items):
            params[f"mk{n}"] = f'$."{key}"'  # the core refuses a key holding '"'
            kind = f"json_type(metadata, :mk{n})"
            if value is None or isinstance(value, bool):
                conditions.append(f"{kind} = '{'null' if value is None else str(value).lower()}'")
                continue
            if isinstance(value, (int, float)):
                conditions.append(f"{kind} IN ('integer', 'real') AND json_extract(metadata, :mk{n}) = :mv{n}")
                params[f"mv{n}"] = value
            elif isinstance(value, str):
                conditions.append(f"{kind} = 'text' AND json_extract(metadata, :mk{n}) = :mv{n}")
                params[f"mv{n}"] = value
            else:  # an object or array: its compact JSON
                conditions.append(f"{kind} IN ('object', 'array') AND json_extract(metadata, :mk{n}) = :mv{n}")
                params[f"mv{n}"] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return " AND ".join(f"({condition})" for condition in conditions), params

    def _schema_version(self, conn: sqlite3.Connection | None = None) -> int:
        return (conn or self._conn).execute("PRAGMA user_version").fetchone()[0]

    def schema_version(self) -> int:
        with self._lock:
            self._check_open()
            try:
                return self._schema_version()
            except _ERRORS as error:
                raise self._failure(error) from error

    def _size_bytes(self, conn: sqlite3.Connection) -> int:
        pages, size = (conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_count", "page_size"))
        return int(pages) * int(size)  # SQLCipher answers page_size as text

    def scrub(self, *, vacuum: bool = False) -> None:
        """Every connection deletes with ``secure_delete`` (freed content is zeroed); this merges
        each FTS5 index into one segment, so that no older segment keeps a removed term, then
        checkpoints the WAL into the file and truncates it to zero bytes; ``vacuum`` rebuilds
        the file first. A reader holding the WAL open past the busy timeout makes it raise
        ``StoreUnavailableError`` (the rows are gone; call it again)."""

        def merge(conn: sqlite3.Connection) -> None:
            for table in _FTS_TABLES:
                conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")

        self._write(merge)
        try:
            with self._connected as conn:
                if vacuum:
                    conn.execute("VACUUM")
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except _ERRORS as error:
            raise self._failure(error) from error
        if busy:
            raise StoreUnavailableError(
                f"{self!r}: another connection is reading the write-ahead log, which could not be"
                " checkpointed and truncated; the rows are removed: scrub again once it is done"
            )

    # -- lifecycle -------------------------------------------------------------------------

    def setup(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Create or migrate the schema, then index the rows a migration left unindexed
        (``progress(done, total)`` after each batch). Read-only, only check that the schema is
        this library's and complete."""
        with self._lock:
            self._check_open()
            try:
                if self.read_only:
                    self._check_schema_read_only()
                elif self._schema_version() != len(MIGRATIONS):
                    with self._transaction() as conn:
                        version = self._schema_version()
                        if version > len(MIGRATIONS):
                            raise StoreError(
                                f"{self.database}: schema version {version} is newer than this library knows"
                            )
                        conn.create_function(
                            "session_memory_item_scope", 2, item_scope_tokens, deterministic=True
                        )  # migration 0018's
                        for number in range(version, len(MIGRATIONS)):
                            for statement in _statements(MIGRATIONS[number]):
                                conn.execute(statement)
                        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
            except _ERRORS as error:
                raise self._failure(error) from error
            self._ready = True
            if not self.read_only:
                self._backfill_search_terms(progress)
                self._anchor_all_overlays()

    def _check_schema_read_only(self) -> None:
        version = self._schema_version()
        if version == len(MIGRATIONS):
            if self._conn.execute(self.compile(BACKFILL_PENDING), {}).fetchone() is None:
                return
            problem = "a migration has not finished re-indexing it for search"
        elif version == 0:
            problem = "it holds no session-memory tables"
        elif version > len(MIGRATIONS):
            problem = f"its schema version {version} is newer than this library knows ({len(MIGRATIONS)})"
        else:
            problem = f"its schema version {version} is older than this library's ({len(MIGRATIONS)})"
        raise StoreError(
            f"{self!r} cannot be read with read_only=True: {problem}; open it writable once (or run"
            " `sessions migrate` on it) to bring it up to date, or use a version of the library that matches it"
        )

    def close(self) -> None:
        """Index the rows that wait for the keyword indexes (a writer whose schema is current,
        unless another connection holds the write lock: closing never waits), then close the
        connection."""
        with self._lock:
            if not self._closed:
                if self._conn is not None and self._ready and not self.read_only:
                    with contextlib.suppress(StoreError, *_ERRORS):  # a later search indexes them
                        if any(self._conn.execute(waiting).fetchone() for waiting in _WAITING.values()):
                            self._conn.execute("PRAGMA busy_timeout = 0")
                            self._write(partial(_catch_up, sources=tuple(_FTS_SOURCES)))
                self._closed = True
                if self._conn is not None:
                    try:
                        self._conn.close()
                    except _ERRORS as error:
                        raise self._failure(error) from error

    @property
    def encrypted(self) -> bool:
        """Whether the store opens its database with a key (SQLCipher)."""
        return self._key_sql is not None

    def rekey(self, new_key: str | bytes | None) -> None:
        """Make ``new_key`` the file's key (``PRAGMA rekey``: every page is encrypted again). A
        plain file is encrypted instead, and ``None`` decrypts an encrypted one: the file is
        copied into a new one (``sqlcipher_export``) that replaces it; run that while nothing
        else uses the file (a store that has it open refuses its next write: the file was
        replaced). Other connections holding the file with its old key fail from then on."""
        new_sql = None if new_key is None else key_pragma(new_key)
        if self.read_only:
            self._refuse_write()
        with self._lock:
            self._check_open()
            if self._conn.in_transaction:
                raise StoreError(f"{self!r}: rekey() cannot run inside a transaction")
            if new_key is None:
                if self._key_sql is not None:
                    self._copy_as(None)
            elif self._key_sql is None:
                self._copy_as(key_text(new_key))
            else:
                try:
                    self._conn.execute(f"PRAGMA rekey = {new_sql}")
                except _ERRORS as error:
                    raise self._failure(error) from error
            self._key_sql = new_sql

    def _copy_as(self, key: str | None) -> None:
        """Replace the file by a copy (``sqlcipher_export``) encrypted under ``key`` with
        ``CIPHER_SETTINGS``, or plain (``None``); the next call opens the copy."""
        if self._url is None:
            raise InvalidInputError(f"{self!r}: only a database file can be encrypted or decrypted")
        driver = _cipher()
        path = self._url
        self._conn.close()
        self._conn = None  # type: ignore[assignment]
        self._ready = False
        doing, done = ("encrypting", "encrypted") if key else ("decrypting", "decrypted")
        folder, name = os.path.split(path)
        try:
            descriptor, building = tempfile.mkstemp(prefix=f".{name}.", suffix=f".{doing}", dir=folder)
        except OSError as error:
            raise StoreError(f"{self!r}: cannot make the {done} copy beside the file: {error}") from error
        os.close(descriptor)
        conn = (
            self._open(path)
            if self._key_sql is not None
            else driver.connect(path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        )
        try:
            # Out of WAL, in exclusive locking mode: from BEGIN EXCLUSIVE until this connection
            # closes (after the replace), no other connection reads or writes the old file.
            conn.execute("PRAGMA locking_mode = EXCLUSIVE")
            in_use = StoreError(
                f"{self!r}: another connection is using the file, so it cannot be {done}: close every"
                " other store and process using it, then retry"
            )
            try:
                if conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] != "delete":
                    raise in_use  # SQLite keeps WAL while another connection reads
                conn.execute("BEGIN EXCLUSIVE")
            except _OPERATIONAL as error:
                if "locked" not in str(error):
                    raise
                raise in_use from error
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute("COMMIT")
            conn.execute("ATTACH DATABASE ? AS copy KEY ?", (building, key or ""))  # '': a plain copy
            for setting in CIPHER_SETTINGS if key else ():
                conn.execute(f"PRAGMA copy.{setting}")
            conn.execute("SELECT sqlcipher_export('copy')").fetchone()
            conn.execute(f"PRAGMA copy.user_version = {int(version)}")
            conn.execute("DETACH DATABASE copy")
            os.chmod(building, stat.S_IMODE(os.stat(path).st_mode))
            _fsync(building)
            os.replace(building, path)
            with contextlib.suppress(OSError):  # the rename is done; only its durability is at stake
                _fsync(folder)
        except BaseException as error:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(building)
            if isinstance(error, _ERRORS):
                raise self._failure(error) from error
            if isinstance(error, OSError):
                raise StoreError(f"{self!r}: {doing} the file failed: {error}") from error
            raise
        finally:
            conn.close()
        self._driver = driver if key else sqlite3
        self._cipher_settings = CIPHER_SETTINGS if key else None
        self._in_place = hasattr(self._driver.Connection, "blobopen")
        self._identity = None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._conn is None:
            self._connect()

    def _ensure_ready(self) -> None:
        self._check_open()
        if not self._ready:
            if not self._auto_setup:
                if self._schema_version() < len(MIGRATIONS):
                    raise StoreError(f"{self!r}: schema missing; call setup() first")
                self._ready = True
            else:
                self.setup()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no deadlocking upgrades);
        nested, a savepoint."""
        with self._lock:
            if self._conn.in_transaction:
                self._conn.execute("SAVEPOINT nested")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK TO nested")
                    self._conn.execute("RELEASE nested")
                    raise
                self._conn.execute("RELEASE nested")
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # -- batch insert: positions computed here, one executemany ----------------------------

    def insert_messages(
        self, session_id: str, records: Sequence[MessageRecord], parent_id: str | None | _Latest
    ) -> list[Inserted | None]:
        if not records:
            return []

        def work(conn: sqlite3.Connection) -> list[Inserted | None]:
            # The chain's positions come from the first parent and the rows already stored: no
            # parent lookup per row.
            ids = [record.id for record in records]
            known = {row[0]: row[1:] for row in self._rows_for_ids(conn, _POSITIONS, session_id, ids)}
            parent: tuple[Any, ...] | None
            if parent_id is LATEST:
                parent = conn.execute(LATEST_LEAF_TOTALS, {"s": session_id}).fetchone()
            elif parent_id is None:
                parent = None
            else:
                parent = conn.execute(_POSITION_OF, (session_id, parent_id)).fetchone()
            results: list[Inserted | None] = []
            rows: list[tuple[object, ...]] = []
            for record in records:
                position = known.get(record.id)
                if position is not None:  # stored already (before or earlier in this batch)
                    results.append(None)
                    parent = (record.id, *position)
                    continue
                size = record.size
                if parent is None:
                    parent_key, depth, tokens, total_bytes = None, 1, record.tokens, size
                else:
                    parent_key, depth = parent[0], parent[1] + 1
                    tokens, total_bytes = parent[2] + record.tokens, parent[3] + size
                row = (
                    session_id,
                    record.id,
                    parent_key,
                    record.role,
                    record.created_at_us,
                    record.tokens,
                    size,
                    depth,
                    tokens,
                    total_bytes,
                    record.text,
                    index_text(record.text),
                    record.content,
                )
                if self._in_place and len(record.content) > LARGE_ROW:
                    conn.executemany(_INSERT_ROW, rows)  # the rows before it first: seq keeps their order
                    rows = []
                    _insert_large(conn, row)
                else:
                    rows.append(row)
                results.append(Inserted(parent_key, PathTotals(depth, tokens, total_bytes)))
                known[record.id] = (depth, tokens, total_bytes)
                parent = (record.id, depth, tokens, total_bytes)
            conn.executemany(_INSERT_ROW, rows)
            with_blobs = [r for r, result in zip(records, results) if result is not None and r.blobs]
            if with_blobs:
                seqs = dict(
                    self._rows_for_ids(
                        conn, "SELECT id, seq FROM session_messages", session_id, [r.id for r in with_blobs]
                    )
                )
                for record in with_blobs:
                    self._link_blobs(conn, seqs[record.id], record)
            return results

        return self._write(work, lock=session_id)

    def _update_row(self, conn: sqlite3.Connection, seq: int, record: MessageRecord, params: dict[str, Any]) -> None:
        if not (self._in_place and len(record.content) > LARGE_ROW):
            return super()._update_row(conn, seq, record, params)
        conn.execute(
            _UPDATE_LARGE_ROW,
            {**params, "seq": seq, "text_bytes": utf8_size(record.text), "content_bytes": utf8_size(record.content)},
        )
        _write_in_place(conn, seq, record.text, record.content)

    def _rows_for_ids(self, conn: sqlite3.Connection, select: str, session_id: str, ids: list[str]) -> list[tuple]:
        rows: list[tuple] = []
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), self.max_list):
            chunk = unique[start : start + self.max_list]
            rows += conn.execute(f"{select} WHERE session_id = ? AND id {_marks(len(chunk))}", (session_id, *chunk))
        return rows

    # -- search ----------------------------------------------------------------------------

    def _searchable(self, source: str) -> tuple[str, ...]:
        """The keyword indexes that hold every row of ``source`` (a table of ``_FTS_SOURCES``):
        its own, after indexing the rows that wait for it (migration 0015) in a transaction of
        their own; read-only, its own and a temporary one of the waiting rows, built again
        only after another connection commits (what at most 63 writes of fewer than
        ``CATCH_UP`` rows each left)."""
        waiting = self._read(lambda conn: conn.execute(_WAITING[source]).fetchone())
        if waiting is None:
            if source == _ANALYSED_WHEN_INDEXED:
                self._waiting_terms = {}  # indexed since: their terms are in the table
            return (f"{source}_fts",)
        if not self.read_only:
            self._write(lambda conn: _index_waiting(conn, source))
            return (f"{source}_fts",)

        def fill(conn: sqlite3.Connection) -> None:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if self._waiting_built.get(source) == (conn, version):
                return
            columns = _FTS_SOURCES[source]
            conn.execute(f"DROP TABLE IF EXISTS temp.waiting_{source}_fts")
            conn.execute(
                f"CREATE VIRTUAL TABLE temp.waiting_{source}_fts USING fts5({columns}, content='', tokenize='ascii')"
            )
            if source == "session_messages":
                conn.execute(
                    f"INSERT INTO waiting_{source}_fts (waiting_{source}_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)')"
                )
            if source == _ANALYSED_WHEN_INDEXED:
                analysed = _analysed_waiting_items(conn)
                conn.executemany(f"INSERT INTO waiting_{source}_fts (rowid, {columns}) VALUES (?, ?, ?)", analysed)
                self._waiting_terms = {seq: terms for seq, terms, _scope in analysed}
            else:
                conn.execute(
                    f"INSERT INTO waiting_{source}_fts (rowid, {columns}) SELECT seq, {columns} FROM {source}"
                    f" WHERE {_ABOVE_MARK[source]} AND search_terms <> ''"
                )
            self._waiting_built[source] = (conn, version)

        self._read(fill)
        return (f"{source}_fts", f"waiting_{source}_fts")

    def _terms_of(self, table: str, seqs: Sequence[int]) -> dict[int, list[str]]:
        found = super()._terms_of(table, seqs)
        if self.read_only and table == _ANALYSED_WHEN_INDEXED:  # a waiting item holds its text
            for seq in found.keys() & self._waiting_terms.keys():
                found[seq] = self._waiting_terms[seq].split()
        return found

    def _match_entries(self, units: tuple[Unit, ...], session_id: str, label: str, limit: int) -> list[Any]:
        expression = fts5_expression(units)

        def work(conn: sqlite3.Connection) -> list[Any]:
            return _best(
                conn.execute(
                    f"SELECT e.key, e.content, f.rank FROM {fts} f JOIN search_entries e ON e.seq = f.rowid"
                    f" WHERE {fts} MATCH ? AND e.session_id = ? AND e.label = ? ORDER BY f.rank LIMIT ?",
                    (expression, session_id, label, limit),
                ).fetchall()
                for fts in indexes
            )

        indexes = self._searchable("search_entries")
        return [(key, content) for key, content in self._read(work)[:limit]]

    def _match_sessions(self, units: tuple[Unit, ...], namespace: str, limit: int) -> list[SearchRow]:
        expression = f"search_terms : ({fts5_expression(units)})"

        def work(conn: sqlite3.Connection) -> list[Any]:
            return _best(
                conn.execute(
                    f"SELECT s.id, m.id, m.role, {_MATCHED_TEXT}, m.created_at, f.rank"
                    f" FROM {fts} f JOIN session_messages m ON m.seq = f.rowid"
                    " JOIN sessions s ON s.storage_id = m.session_id"
                    f" WHERE {fts} MATCH ? AND s.namespace = ? ORDER BY f.rank LIMIT ?",
                    (expression, namespace, limit),
                ).fetchall()
                for fts in indexes
            )

        indexes = self._searchable("session_messages")
        return [SearchRow(*row) for row in self._read(work)[:limit]]

    def _match_messages(
        self, units: tuple[Unit, ...], session_ids: Sequence[str] | None, limit: int
    ) -> list[SearchRow]:
        """Ranks only the ``SEARCH_CANDIDATES`` most recent matches when there are more (bm25
        over every match of a frequent word costs ~100 ms at 1M messages): the session filter
        runs inside the index, and the window is found without scoring. When the whole index
        holds fewer matches than that, all of them are ranked, without looking for a window."""
        text_match = window_match = f"search_terms : ({fts5_expression(units)})"
        where, params = "", []
        if session_ids is not None:
            params = list(session_ids)
            tokens, where = _session_filter(tuple(params))
            window_match = f"session_token : ({tokens}) AND {text_match}"

        def ranked(conn: sqlite3.Connection, fts: str, oldest: int) -> list[Any]:
            # Ranking with the session token in the expression would score it too (5x slower).
            return conn.execute(
                f"SELECT m.session_id, m.id, m.role, {_MATCHED_TEXT}, m.created_at, f.rank"
                f" FROM {fts} f JOIN session_messages m ON m.seq = f.rowid"
                f" WHERE {fts} MATCH ? AND f.rowid >= ?{where} ORDER BY f.rank LIMIT ?",
                [text_match, oldest, *params, limit],
            ).fetchall()

        def work(conn: sqlite3.Connection) -> list[Any]:
            # Fewer matches than the window in the whole index: rank them all (cheap), no window.
            oldest = many = conn.execute(
                "SELECT rowid FROM session_messages_fts WHERE session_messages_fts MATCH ? LIMIT 1 OFFSET ?",
                (text_match, SEARCH_CANDIDATES - 1),
            ).fetchone()
            if many is not None:
                oldest = conn.execute(
                    "SELECT rowid FROM session_messages_fts WHERE session_messages_fts MATCH ?"
                    " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                    (window_match, SEARCH_CANDIDATES - 1),
                ).fetchone()
            found = ranked(conn, indexes[0], oldest[0] if oldest else 0)
            return _best([found, *(ranked(conn, fts, 0) for fts in indexes[1:])])

        indexes = self._searchable("session_messages")
        return list(map(SearchRow._make, self._read(work)[:limit]))

    # -- ranked search --------------------------------------------------------------------

    _split_terms = staticmethod(str.split)

    def _postings(
        self, scope: SearchScope, words: Sequence[tuple[Alternative, ...]], n: int, estimate: bool
    ) -> list[list[int]]:
        # FTS5 reads the newest end of a word's doclist only: no estimate is cheaper.
        if scope.items_under is not None:
            namespace, under = scope.items_under
            # The word's newest postings among its scope's (the scope's token, migration 0018),
            # each checked for the scope all the same (``+``: not the items' index).
            within = " AND +i.prefix >= ? AND +i.prefix < ? AND (i.prefix = ? OR i.prefix >= ?)" if under else ""
            source, sql = (
                "store_items",
                (
                    "SELECT f.rowid FROM {fts} f JOIN store_items i ON i.seq = f.rowid"
                    f" WHERE {{fts}} MATCH ? AND +i.namespace = ?{within} ORDER BY f.rowid DESC LIMIT ?"
                ),
            )
            bounds = (under, under + "/", under, under + ".") if under else ()
            in_scope = f'scope_tokens : "{item_scope_token(namespace, under)}" AND search_terms : '
            params = [(f"{in_scope}({fts5_expression((word,))})", namespace, *bounds, n) for word in words]
        elif scope.entries_of is not None:
            source, sql = (
                "search_entries",
                (
                    "SELECT f.rowid FROM {fts} f JOIN search_entries e ON e.seq = f.rowid"
                    " WHERE {fts} MATCH ? AND e.session_id = ? AND e.label = ?"
                    " ORDER BY f.rowid DESC LIMIT ?"
                ),
            )
            params = [(fts5_expression((word,)), *scope.entries_of, n) for word in words]
        else:
            session_ids = scope.session_ids
            if scope.namespace is not None:
                session_ids = tuple(row[0] for row in self._all(NAMESPACE_STORAGE_IDS, {"ns": scope.namespace}))
                if not session_ids:
                    return [[] for _word in words]
            within = "" if session_ids is None else f"session_token : ({_session_filter(session_ids)[0]}) AND "
            source, sql = "session_messages", "SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT ?"
            params = [(f"{within}search_terms : ({fts5_expression((word,))})", n) for word in words]
        # The waiting rows are newer than every indexed one: their postings come first.
        statements = [sql.format(fts=fts) for fts in reversed(self._searchable(source))]

        def work(conn: sqlite3.Connection) -> list[list[int]]:
            return [[row[0] for sql in statements for row in conn.execute(sql, one)][:n] for one in params]

        return self._read(work)

    def _indexed_items(self, namespace: str, under: str) -> int:
        # The rows of the scope's token in the keyword indexes (migration 0018), not a count of
        # the scope's rows, which reads each one.
        match = f'scope_tokens : "{item_scope_token(namespace, under)}"'

        def work(conn: sqlite3.Connection) -> int:
            return sum(
                conn.execute(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (match,)).fetchone()[0]
                for fts in indexes
            )

        indexes = self._searchable("store_items")
        return self._read(work)

    def _indexed_messages(self) -> int:
        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT block FROM session_messages_fts_data WHERE id = 1").fetchone()
            waiting = sum(conn.execute(f"SELECT count(*) FROM {fts}").fetchone()[0] for fts in indexes[1:])
            return (_varint(row[0]) if row and row[0] else 0) + waiting

        indexes = self._searchable("session_messages")
        return self._read(work)


def _best(results: Iterable[list[Any]]) -> list[Any]:
    """The rows of one or more ranked searches (each row's last column its rank), best first,
    without their rank."""
    found = [row for rows in results for row in rows]
    if len(found) > 1:
        found.sort(key=itemgetter(-1))
    return [row[:-1] for row in found]


def _waits(conn: sqlite3.Connection) -> bool:
    """Whether rows of ``_INDEXED_BY_WRITES`` wait for their keyword index (read outside a
    transaction: a write takes the write lock only when some do)."""
    return any(conn.execute(_WAITING[source]).fetchone() is not None for source in _INDEXED_BY_WRITES)


def _catch_up(conn: sqlite3.Connection, sources: tuple[str, ...] = _INDEXED_BY_WRITES) -> None:
    """Index the rows of each table of ``sources`` that wait for its keyword index."""
    for source in sources:
        if conn.execute(_WAITING[source]).fetchone() is not None:
            _index_waiting(conn, source)


def _analysed_waiting_items(conn: sqlite3.Connection) -> list[tuple[int, str, str]]:
    """The ``(seq, terms, scope tokens)`` of the items that wait for their keyword index with a
    text to analyse (``_ANALYSED_WHEN_INDEXED``), analysed (migration 0018: ``scope_tokens``)."""
    rows = conn.execute(
        "SELECT seq, search_terms, namespace, prefix FROM store_items"
        f" WHERE {_ABOVE_MARK[_ANALYSED_WHEN_INDEXED]} AND search_terms <> ''"
    ).fetchall()
    return [(seq, index_text(text), item_scope_tokens(namespace, prefix)) for seq, text, namespace, prefix in rows]


def _index_waiting(conn: sqlite3.Connection, source: str) -> None:
    """Index the rows of ``source`` that wait for its keyword index (migration 0015), their
    texts analysed first where they wait as texts (migration 0017)."""
    if source == _ANALYSED_WHEN_INDEXED:
        conn.executemany(
            f"UPDATE {source} SET search_terms = ?, scope_tokens = ? WHERE seq = ?",
            [(terms, scope, seq) for seq, terms, scope in _analysed_waiting_items(conn)],
        )
    columns = _FTS_SOURCES[source]
    conn.execute(
        f"INSERT INTO {source}_fts (rowid, {columns}) SELECT s.seq, {columns}"
        f" FROM {source} s, fts_indexed i WHERE i.source = '{source}' AND s.seq > i.seq AND search_terms <> ''"
    )
    conn.execute(
        f"UPDATE fts_indexed SET seq = max(seq, (SELECT coalesce(max(seq), 0) FROM {source})) WHERE source = '{source}'"
    )


def _put_items_sql(count: int) -> tuple[str, tuple[str, ...]]:
    """``PUT_ITEMS`` for ``count`` rows, and its parameters: the namespace, the time, then the
    rows' ``ITEM_ROW_COLUMNS`` (``r<row>_<column>``) row by row."""
    width = len(ITEM_ROW_COLUMNS)
    names = tuple(f"r{n}_{i}" for n in range(count) for i in range(width))
    columns = ", ".join(f"column{i + 1} AS {column}" for i, column in enumerate(ITEM_ROW_COLUMNS))
    marks = [", ".join(f":{name}" for name in names[n * width : (n + 1) * width]) for n in range(count)]
    values = ", ".join(f"({row})" for row in marks)
    return PUT_ITEMS.replace("{item_rows}", f"(SELECT {columns} FROM (VALUES {values})) AS r"), ("ns", "now", *names)


def _fsync(path: str) -> None:
    """Flush a file, or a folder's entries, to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _varint(data: bytes) -> int:
    """The SQLite varint at the start of ``data`` (FTS5's averages record starts with its row count)."""
    value = 0
    for index in range(8):
        if index >= len(data):
            return value
        byte = data[index]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return (value << 8) | data[8] if len(data) > 8 else value


def _insert_large(conn: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    """Insert a row of ``_INSERT_ROW`` (a message over ``LARGE_ROW`` characters of JSON) with
    its text and JSON in the last two columns, written in place a step at a time. Bound, each
    would be copied by the binding and again into the row built in memory: four times its size."""
    *head, text, terms, content = row
    seq = conn.execute(_INSERT_LARGE_ROW, (*head, "", terms, "", utf8_size(text), utf8_size(content))).lastrowid
    assert seq is not None  # set by every INSERT
    _write_in_place(conn, seq, text, content)


def _write_in_place(conn: sqlite3.Connection, seq: int, text: str, content: str) -> None:
    """Write a large message's text and JSON into the zero-filled blobs of row ``seq``."""
    for column, value in (("large_text", text), ("large_content", content)):
        with conn.blobopen("session_messages", _blob_name(conn, column), seq) as blob:  # type: ignore[attr-defined]
            for start in range(0, len(value), _WRITE_STEP):
                blob.write(value[start : start + _WRITE_STEP].encode("utf-8"))


def _blob_name(conn: sqlite3.Connection, column: str) -> str:
    """The name under which this SQLite's blob I/O opens ``column`` of ``session_messages``.

    SQLite 3.40 (and later ones, reported upstream) finds the column by its position among all
    columns but reads the row's stored fields, so each column after the VIRTUAL generated
    ``session_token`` is opened under the name of the one before it; :func:`_blob_io_misplaces`
    tells whether this SQLite does."""
    if not _blob_io_misplaces(type(conn)):
        return column
    names = [(name, hidden) for _cid, name, *_rest, hidden in conn.execute("PRAGMA table_xinfo(session_messages)")]
    stored = [name for name, hidden in names if hidden != 2]  # 2: a VIRTUAL generated column
    return names[stored.index(column)][0]


@lru_cache(maxsize=2)
def _blob_io_misplaces(connection_class: type) -> bool:
    """Whether blob I/O opens, under a column's name, the stored field of the column after it
    when a VIRTUAL generated column comes before (probed once per driver, whose SQLite may
    differ, on a table of that shape)."""
    connect = sqlite3.connect if connection_class is sqlite3.Connection else _cipher().connect
    with contextlib.closing(connect(":memory:")) as conn:
        conn.execute("CREATE TABLE t (a, b AS (a) VIRTUAL, c, d)")
        rowid = conn.execute("INSERT INTO t (a, c, d) VALUES (NULL, zeroblob(1), zeroblob(2))").lastrowid
        with conn.blobopen("t", "c", rowid) as blob:  # type: ignore[attr-defined]
            return len(blob) == 2  # d's field, not c's


class _Connected:
    """The store's connection under its lock, open, schema ready (a class, not
    ``@contextmanager``: this runs around every statement, and a generator-based manager costs
    three times as much)."""

    __slots__ = ("_store",)

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self._store
        store._lock.acquire()
        try:
            store._ensure_ready()
        except BaseException:
            store._lock.release()
            raise
        return store._conn

    def __exit__(self, *exc_info: object) -> None:
        self._store._lock.release()


@lru_cache(maxsize=256)
def _marks(count: int) -> str:
    return f"IN ({','.join('?' * count)})"


def _session_token(session_id: str) -> str:
    """The indexed token naming a session (the ``session_token`` column's value)."""
    return "s" + session_id.encode("utf-8").hex()


@lru_cache(maxsize=32)
def _session_filter(session_ids: tuple[str, ...]) -> tuple[str, str]:
    """The sessions' tokens as an FTS5 alternative, and the SQL condition on the row."""
    tokens = " OR ".join(f'"{_session_token(s)}"' for s in dict.fromkeys(session_ids))
    return tokens, f" AND m.session_id IN ({','.join('?' * len(session_ids))})"


def _statements(script: str) -> list[str]:
    """Split a migration into statements (``sqlite3.complete_statement`` keeps triggers whole)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return [s for s in statements if s]
