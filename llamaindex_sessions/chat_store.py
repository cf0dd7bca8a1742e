"""``SessionChatStore``: a LlamaIndex ``BaseChatStore`` whose keys are sessions of a manager."""

from __future__ import annotations

import contextlib
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any, cast

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.storage.chat_store.base import BaseChatStore
from llama_index.core.storage.chat_store.loading import RECOGNIZED_CHAT_STORES

from sessions_core import SessionManager
from sessions_core.integration import (
    async_twin,
    ensure_session,
    raw_history,
    set_active_history,
    soft_reset,
    store_url,
)

from ._pointers import open_store, store_schema, store_url_of
from .conversion import from_chat_messages, to_chat_messages
from .memory import _same_for_llamaindex

__all__ = ["SessionChatStore"]


class _LiveManager:
    """The manager every store object of one ``handle`` shares, closed with the last of them
    when this process opened it."""

    __slots__ = ("manager", "owns", "__weakref__")

    def __init__(self, manager: SessionManager, owns: bool) -> None:
        self.manager = manager
        self.owns = owns

    def __del__(self) -> None:
        if self.owns:
            with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to report to
                self.manager.close()
                self.manager.store.close()


def _points_to(live: SessionManager, given: Any, pointer: SessionChatStore) -> bool:
    """Whether the live manager of a pointer's handle is the one it means."""
    if isinstance(given, SessionManager):
        return live is given
    same_store = store_url(live.store) == store_url_of(pointer.store)
    return same_store and live.namespace == pointer.namespace


_live: weakref.WeakValueDictionary[str, _LiveManager] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


class SessionChatStore(BaseChatStore):
    """Chat histories kept as sessions of a ``SessionManager``: a key is a session id.

    A key written for the first time is registered with the manager under that id, so
    ``get_keys`` lists it and cross-session search finds it. ``get_messages`` returns the
    session's active branch as written (``SessionMemory`` is what applies compaction).
    Nothing is ever deleted: ``set_messages`` and the deletes move the session to a branch
    holding the remaining messages (a soft reset for ``delete_messages``); the old messages
    stay stored and searchable. Use ``manager.delete(key)`` to really delete a session.

    ``manager`` is a ``SessionManager``, a SQLite path or a ``postgresql://`` URL. The object
    serialises as a pointer (``store`` path or URL without password, ``store_schema``,
    ``namespace``): ``from_dict`` in the same process finds the same live manager again (through
    ``handle``), elsewhere it reopens the store (a PostgreSQL password then comes from
    ``PGPASSWORD``, ``PGPASSFILE`` or ``~/.pgpass``, or from ``store=`` passed to ``from_dict``).
    ``ChatMemoryBuffer.from_dict`` recognises it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: str | None = Field(
        default=None, description="SQLite path or postgresql:// URL (never with a password) of the store."
    )
    store_schema: str | None = Field(default=None, description="PostgreSQL schema of the store (None: public).")
    namespace: str = Field(default="", description="The manager's namespace in the store.")
    handle: str = Field(default_factory=lambda: uuid.uuid4().hex, description="Finds the live manager in-process.")

    _live: _LiveManager = PrivateAttr()
    _lock: Any = PrivateAttr(default_factory=threading.RLock)

    def __init__(self, manager: SessionManager | str | Path | None = None, **data: Any) -> None:
        if isinstance(manager, SessionManager):
            data.setdefault("namespace", manager.namespace)
        elif manager is not None:
            if not isinstance(manager, (str, Path)):
                raise TypeError(
                    "SessionChatStore takes a SessionManager, a SQLite path or a postgresql:// URL,"
                    f" not {type(manager).__name__}"
                )
            data["store"] = str(manager)
        super().__init__(**data)
        with _live_lock:
            live = _live.get(self.handle)
            if live is not None and not _points_to(live.manager, manager, self):
                live, self.handle = None, uuid.uuid4().hex
            if live is None:
                live = self._open(manager)
                _live[self.handle] = live
        self._live = live
        self.store = store_url(live.manager.store)
        self.store_schema = store_schema(live.manager)

    def _open(self, manager: SessionManager | str | Path | None) -> _LiveManager:
        if isinstance(manager, SessionManager):
            return _LiveManager(manager, owns=False)
        store = open_store(self.store or ":memory:", self.store_schema)
        return _LiveManager(SessionManager(store, namespace=self.namespace), owns=True)

    @classmethod
    def class_name(cls) -> str:
        return "SessionChatStore"

    @property
    def manager(self) -> SessionManager:
        return self._live.manager

    def _session(self, key: str, *, create: bool) -> Any:
        if create:
            ensure_session(self.manager, key)
        return self.manager.get_session(key)

    def _chat(self, key: str) -> list[ChatMessage]:
        return to_chat_messages(raw_history(self._session(key, create=False)))

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Make ``messages`` the session's history (shared prefix kept, the rest a new branch)."""
        with self._lock:
            set_active_history(self._session(key, create=True), from_chat_messages(messages), same=_same_for_llamaindex)

    def get_messages(self, key: str) -> list[ChatMessage]:
        return self._chat(key)

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        """Append a message (at ``idx``: a new branch with the message inserted there)."""
        with self._lock:
            if idx is not None:
                messages = self._chat(key)
                messages.insert(idx, message)
                self.set_messages(key, messages)
                return
            self.manager.append(key, from_chat_messages([message])[0], register=True)

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Start an empty branch and return the messages it hides (``None`` if there were none)."""
        with self._lock:
            messages = self._chat(key)
            if not messages:
                return None
            soft_reset(self._session(key, create=False))
            return messages

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Move to a branch without message ``idx`` and return it (``None`` if out of range)."""
        with self._lock:
            messages = self._chat(key)
            if not -len(messages) <= idx < len(messages):
                return None
            removed = messages.pop(idx)
            if messages:
                self.set_messages(key, messages)
            else:
                soft_reset(self._session(key, create=False))
            return removed

    def delete_last_message(self, key: str) -> ChatMessage | None:
        return self.delete_message(key, -1)

    def get_keys(self) -> list[str]:
        """The ids of the manager's sessions, oldest first (the order keys were first written,
        as ``SimpleChatStore`` gives them)."""
        return [info.id for info in sorted(self.manager.list_sessions(), key=lambda info: info.created_at)]

    aset_messages = async_twin(set_messages)
    aget_messages = async_twin(get_messages)
    aadd_message = async_twin(add_message)
    async_add_message = aadd_message  # LlamaIndex's name for it
    adelete_messages = async_twin(delete_messages)
    adelete_message = async_twin(delete_message)
    adelete_last_message = async_twin(delete_last_message)
    aget_keys = async_twin(get_keys)


# ``ChatMemoryBuffer.from_dict`` loads its chat store through this registry of class names.
# cast: LlamaIndex leaves the registry unannotated, so it is typed as holding SimpleChatStore only.
_chat_stores = cast("dict[str, type[BaseChatStore]]", RECOGNIZED_CHAT_STORES)
_chat_stores.setdefault(SessionChatStore.class_name(), SessionChatStore)
