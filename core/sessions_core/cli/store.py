"""The store a command works on, and how a command's failure becomes one line and an exit code."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..cipher import ENCRYPTED_HINT
from ..errors import (
    EncryptionKeyError,
    InvalidRecordError,
    MessageValidationError,
    SessionsError,
    StoreError,
    StoreUnavailableError,
)
from ..stores.base import InspectableStore, SessionSummary, Store, inspectable
from ..stores.conninfo import hide_password, is_postgres_conninfo

if TYPE_CHECKING:
    from ..stores.postgres import PostgresStore
    from ..stores.sqlite import SqliteStore


class NotFound(Exception):
    """Exit code 1: what the command names does not exist."""


class BadInput(Exception):
    """Exit code 2: the options, store URL or input file are wrong."""


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def error_for(error: BaseException, handle: StoreHandle | None = None) -> tuple[str, int]:
    """The one-line message and exit code for an exception a command raised; a store's error
    names the file as the user gave it, never the store object (``handle.for_user``)."""
    if isinstance(error, NotFound):
        return str(error), 1
    if isinstance(error, (BadInput, MessageValidationError, InvalidRecordError)):
        return str(error), 2
    if isinstance(error, (ImportError, SessionsError)):  # StoreError among them
        return (handle.for_user(str(error)) if handle is not None else str(error)), 1
    if isinstance(error, OSError):
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror or error}{where}", 1
    return f"{type(error).__name__}: {error} (run with --debug for the traceback)", 1


def not_a_sqlite_database(error: BaseException) -> sqlite3.DatabaseError | None:
    """The SQLite error saying a file is no database, under ``SqliteStore``'s ``StoreError``."""
    from ..stores.sqlite import is_not_a_database

    cause = error.__cause__ if isinstance(error, StoreError) and not isinstance(error, EncryptionKeyError) else None
    return cause if isinstance(cause, sqlite3.DatabaseError) and is_not_a_database(cause) else None


# -- the store -----------------------------------------------------------------------------------


@dataclass
class StoreHandle:
    """The store a command works on, opened on first use and closed at the end."""

    url: str
    schema: str | None = None
    debug: bool = False
    store: InspectableStore | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    key: str | None = field(default=None, repr=False)
    """The key of an encrypted SQLite file (``$SESSIONS_KEY``)."""
    redact_salt: str | None = field(default=None, repr=False)
    """The ``hash_salt`` of the ``PIIRedactor`` that ``--redact`` writes with and ``search`` masks
    its query with (``$SESSIONS_REDACT_SALT``)."""
    names: dict[str, str] = field(default_factory=dict, repr=False)
    """How the stores opened name themselves in their errors (``repr``) -> the path the user gave."""

    def for_user(self, message: str) -> str:
        """``message`` with each store's Python name replaced by its path, and the library's
        advice for Python callers by the command's."""
        for name, path in self.names.items():
            message = message.replace(f"{name} ", f"{path} ").replace(name, path)
        return message.replace(ENCRYPTED_HINT, "set SESSIONS_KEY to its key")

    @property
    def is_postgres(self) -> bool:
        return is_postgres_conninfo(self.url)

    @property
    def display(self) -> str:
        if self.is_postgres:
            return f"{hide_password(self.url)} (schema {self.schema or 'public'})"
        return self.url

    def check(self) -> None:
        """Reject a bad store URL or option combination before doing anything."""
        if not self.url:
            raise BadInput("the store is empty: pass --store PATH or a postgresql:// URL")
        if self.is_postgres:
            if self.key is not None:
                raise BadInput("SESSIONS_KEY applies to SQLite files only: unset it for a PostgreSQL store")
            return
        if "://" in self.url:
            raise BadInput(
                f"unsupported store URL {hide_password(self.url)!r}: use a SQLite file path or a postgresql:// URL"
            )
        if self.schema is not None:
            raise BadInput("--schema applies to PostgreSQL stores only")

    def open(
        self, *, create: bool = False, progress: Callable[[int, int], None] | None = None, read_only: bool = False
    ) -> InspectableStore:
        """The store, its schema migrated (``progress(done, total)`` while a migration re-indexes
        search); a read (``create=False``) never creates a database or tables, and a SQLite file
        opened ``read_only`` is never written (a backup, a read-only folder or mounted snapshot)."""
        if self.store is None:
            self.check()
            if self.is_postgres:
                store = self._open_postgres(create)
                if progress is not None:
                    store.setup(progress=progress)
            else:
                store = self._open_sqlite(create, progress, read_only=read_only)
            self.store = inspectable(store)
        return self.store

    def _open_sqlite(
        self, create: bool, progress: Callable[[int, int], None] | None = None, *, read_only: bool = False
    ) -> Store:
        from ..stores.sqlite import SqliteStore, silence_sqlcipher_log

        path = self.url
        if path != ":memory:":
            target = Path(path)
            if target.is_dir():
                raise BadInput(f"{path} is a directory, not a SQLite database")
            if not target.exists() and not create:
                raise NotFound(f"no SQLite database at {path} (pass --store or set SESSIONS_STORE)")
            if not target.parent.exists():
                raise NotFound(f"no such directory: {target.parent}")
        try:
            if self.key is not None:
                silence_sqlcipher_log()
            store = SqliteStore(path, read_only=read_only and path != ":memory:", key=self.key)
            self.closers.append(store.close)
            self.names[repr(store)] = path
            if store.read_only:
                self._check_readable(store, path)
            store.setup(progress=progress)
        except Exception as error:
            cause = not_a_sqlite_database(error)
            if cause is None:
                raise
            raise BadInput(f"{path} is not a session-memory SQLite database ({cause})") from None
        return store

    @staticmethod
    def _check_readable(store: SqliteStore, path: str) -> None:
        """Refuse, saying what to do, a file a read command cannot read: empty, another program's
        SQLite database, or a schema of another version (which a read never migrates)."""
        from ..stores.sqlite import MIGRATIONS

        version = store.schema_version()
        if version == 0:
            if os.path.getsize(path) == 0:
                raise BadInput(f"{path} is empty: it holds no session-memory database (check the path)")
            raise BadInput(f"{path} holds no session-memory tables: it is another program's SQLite database")
        if version < len(MIGRATIONS):
            raise StoreError(
                f"{path} has schema version {version}, older than this version's {len(MIGRATIONS)}: run"
                " `sessions migrate` on it to upgrade it (a read command never changes the file)"
            )
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{path} has schema version {version}, newer than this version's {len(MIGRATIONS)}:"
                " upgrade session-memory to read it"
            )

    def _open_postgres(self, create: bool) -> PostgresStore:
        try:
            import psycopg

            from ..stores.postgres import PostgresStore
        except ImportError:
            raise StoreError(
                "PostgreSQL stores need the postgres extra: pip install 'session-memory[postgres]'"
            ) from None
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as error:
            detail = one_line(str(error)) or type(error).__name__
            raise StoreUnavailableError(f"cannot connect to {hide_password(self.url)}: {detail}") from None
        self.closers.append(conn.close)
        schema = self.schema or "public"
        store = PostgresStore(conn, schema=schema)
        self.closers.append(store.close)
        if not create and store.schema_version() == 0:
            raise NotFound(f"no session-memory tables in schema {schema!r} of {hide_password(self.url)}")
        return store

    def close(self) -> None:
        while self.closers:
            with contextlib.suppress(Exception):  # closing never hides the command's own outcome
                self.closers.pop()()


def summary_of(store: InspectableStore, session_id: str) -> SessionSummary:
    """The session's summary; ``NotFound`` when the store holds nothing under that id."""
    found = store.session_summaries([session_id])
    if not found:
        raise NotFound(f"unknown session {session_id!r} (see `sessions list`)")
    return found[0]
