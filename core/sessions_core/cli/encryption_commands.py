"""``sessions rekey``: change the key of an encrypted SQLite file, or encrypt a plain one."""

from __future__ import annotations

from .output import console
from .store import BadInput, StoreHandle


def cmd_rekey(handle: StoreHandle, database: str | None, new_key: str) -> None:
    """Give the SQLite file ``database`` (default: the handle's) ``new_key``; it is opened with
    the handle's key, or as a plain file that is then encrypted."""
    from ..stores.sqlite import SqliteStore

    if database is not None:
        handle.url = database
    if handle.is_postgres or handle.url == ":memory:":
        raise BadInput("rekey takes a SQLite database file")
    if not new_key:
        raise BadInput("the new key is empty")
    if new_key == handle.key:
        raise BadInput("the new key is the current one (SESSIONS_KEY)")
    store = handle.open()
    assert isinstance(store, SqliteStore)  # a SQLite path opens one
    encrypted = store.encrypted
    store.rekey(new_key)
    done = "Changed the key of" if encrypted else "Encrypted"
    console().print(f"{done} {handle.display}; open it with SESSIONS_KEY set to the new key.")
