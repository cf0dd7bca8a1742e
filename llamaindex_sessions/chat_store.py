"""``SessionChatStore``: a LlamaIndex ``BaseChatStore`` whose keys are sessions of a manager."""

from __future__ import annotations

import threading
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import ConfigDict, PrivateAttr
from llama_index.core.storage.chat_store.base import BaseChatStore

from sessions_core import SessionManager
from sessions_core.integration import async_twin, ensure_session, raw_history, set_active_history, soft_reset

from .conversion import from_chat_messages, to_chat_messages
from .memory import _same_for_llamaindex

__all__ = ["SessionChatStore"]


class SessionChatStore(BaseChatStore):
    """Chat histories kept as sessions of a ``SessionManager``: a key is a session id.

    A key written for the first time is registered with the manager under that id, so
    ``get_keys`` lists it and cross-session search finds it. ``get_messages`` returns the
    session's active branch as written (``SessionMemory`` is what applies compaction).
    Nothing is ever deleted: ``set_messages`` and the deletes move the session to a branch
    holding the remaining messages (a soft reset for ``delete_messages``); the old messages
    stay stored and searchable. Use ``manager.delete(key)`` to really delete a session.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _manager: SessionManager = PrivateAttr()
    _lock: Any = PrivateAttr(default_factory=threading.RLock)

    def __init__(self, manager: SessionManager | str = ":memory:", **data: Any) -> None:
        super().__init__(**data)
        self._manager = manager if isinstance(manager, SessionManager) else SessionManager(manager)

    @classmethod
    def class_name(cls) -> str:
        return "SessionChatStore"

    @property
    def manager(self) -> SessionManager:
        return self._manager

    def _session(self, key: str, *, create: bool) -> Any:
        if create:
            ensure_session(self._manager, key)
        return self._manager.get_session(key)

    def _chat(self, key: str) -> list[ChatMessage]:
        return [chat for message in raw_history(self._session(key, create=False)) for chat in to_chat_messages(message)]

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
            ensure_session(self._manager, key)
            self._manager.append(key, from_chat_messages([message])[0])

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
        """The ids of the manager's sessions, most recently updated first."""
        return [info.id for info in self._manager.list()]

    aset_messages = async_twin(set_messages)
    aget_messages = async_twin(get_messages)
    aadd_message = async_twin(add_message)
    async_add_message = aadd_message  # LlamaIndex's name for it
    adelete_messages = async_twin(delete_messages)
    adelete_message = async_twin(delete_message)
    adelete_last_message = async_twin(delete_last_message)
    aget_keys = async_twin(get_keys)
