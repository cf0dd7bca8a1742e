"""Opening and owning a store: what ``Session`` and ``SessionManager`` accept as ``store``, and
closing only what they opened."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._async import AsyncTwins, io, run_in_thread
from .errors import InvalidInputError
from .stores.base import Store
from .stores.conninfo import is_postgres_conninfo
from .stores.sqlite import SqliteStore

if TYPE_CHECKING:
    from ._twins import StoreOwnerTwins
    from .stores.postgres import PostgresStore
else:
    StoreOwnerTwins = object  # typed twins for type checkers; AsyncTwins makes the real ones


def open_store(store: Any, *, key: str | bytes | None = None) -> tuple[Store, bool]:
    """A store object for ``store`` (a path, ``":memory:"``, a ``postgresql://`` URL or libpq
    ``key=value`` string, or a store), and whether the caller opened it (and so must close it).
    ``key`` encrypts a SQLite file (``SqliteStore(path, key=...)``); it goes with a path only."""
    if key is not None and not isinstance(store, (str, Path)):
        raise InvalidInputError("key= goes with a SQLite path; give the store object its key instead")
    if isinstance(store, Store):
        return store, False
    if isinstance(store, Path):
        return SqliteStore(store, key=key), True
    if isinstance(store, str):
        if is_postgres_conninfo(store):
            if key is not None:
                raise InvalidInputError(
                    "key= encrypts SQLite files only; for PostgreSQL use TLS (sslmode) and the server's encryption"
                )
            try:
                from .stores.postgres import PostgresStore
            except ModuleNotFoundError as error:
                raise ImportError(
                    "PostgreSQL stores need the postgres extra: pip install 'session-memory[postgres]'"
                ) from error
            return PostgresStore(store), True
        return SqliteStore(store, key=key), True
    raise TypeError(f"store must be a path, ':memory:', a postgresql:// URL or a Store, not {type(store).__name__}")


class StoreOwner(AsyncTwins, StoreOwnerTwins):
    """An object over a store, opened with :func:`open_store`: ``close()`` / ``aclose()`` and
    ``with`` / ``async with`` close the store only when the object opened it (from a path or URL).
    """

    store: Store
    _owns_store: bool

    def __init__(self, store: Any, *, key: str | bytes | None = None) -> None:
        self.store, self._owns_store = open_store(store, key=key)

    @io
    def close(self) -> None:
        """Close the store if this object opened it."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await run_in_thread(self.close)


def store_url(store: Store) -> str | None:
    """Where ``store`` is, to open it again in another process: a SQLite file's absolute path,
    ``":memory:"`` (which opens a new, empty store), or a ``postgresql://`` URL that never holds
    the password (the process that opens it gives the password through ``PGPASSWORD``,
    ``PGPASSFILE`` or ``~/.pgpass``, or passes the full URL itself); ``None`` for a store of
    another kind. A PostgreSQL store's ``schema`` is its own attribute, not part of the URL.
    No I/O: the stores work their address out when they open."""
    if isinstance(store, SqliteStore):
        return store.url
    postgres = sys.modules.get("sessions_core.stores.postgres")  # not loaded: no PostgresStore exists
    if postgres is not None:
        postgres_store: type[PostgresStore] = postgres.PostgresStore
        if isinstance(store, postgres_store):
            return store.url
    return None
