"""``sessions rekey``: change the key of an encrypted SQLite file, encrypt a plain one, or
decrypt one (``--decrypt``)."""

from __future__ import annotations

from .output import console
from .store import BadInput, StoreHandle


def cmd_rekey(handle: StoreHandle, database: str | None, new_key: str | None) -> None:
    """Give the SQLite file ``database`` (default: the handle's) ``new_key``; it is opened with
    the handle's key, or as a plain file that is then encrypted. ``None`` decrypts it: the file
    opened with the handle's key is replaced by a plain copy."""
    from ..stores.sqlite import SqliteStore

    if database is not None:
        handle.url = database
    if handle.is_postgres or handle.url == ":memory:":
        raise BadInput("rekey takes a SQLite database file")
    if new_key is None and not handle.key:
        raise BadInput("--decrypt needs the current key in SESSIONS_KEY (without it the file is read as plain)")
    if new_key is not None and not new_key:
        raise BadInput("the new key is empty")
    if new_key is not None and new_key == handle.key:
        raise BadInput("the new key is the current one (SESSIONS_KEY)")
    store = handle.open()
    assert isinstance(store, SqliteStore)  # a SQLite path opens one
    encrypted = store.encrypted
    store.rekey(new_key)
    if new_key is None:
        console().print(f"Decrypted {handle.display}; open it without SESSIONS_KEY.")
        return
    done = "Changed the key of" if encrypted else "Encrypted"
    console().print(f"{done} {handle.display}; open it with SESSIONS_KEY set to the new key.")
