"""Moving a session's active branch without deleting anything: soft resets, "set the history
to these messages", the raw (uncompacted) active path, and registering a session under a
chosen id. Shared by the framework adapters (a chat history's ``clear``/``set`` and a chat
store's keys).

The active branch of a session is the path to its latest leaf. To make an empty branch, or an
interior message, the active one, a *head marker* is appended: a ``system`` message with no
parts and ``metadata["sessionsMarker"]`` set (``"reset"`` as a new root, ``"head"`` under the
message to continue from). Markers are never shown: ``Session`` history reads skip them, and
raw reads drop them with :func:`without_markers`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._async import run_in_thread
from ._time import now_us
from .messages import MARKER_KEY, MessageInput, SessionMessage, is_marker, parse_message
from .session import Session

__all__ = [
    "MARKER_KEY",
    "araw_history",
    "aensure_session",
    "aset_active_history",
    "asoft_reset",
    "ensure_session",
    "head_marker",
    "is_marker",
    "raw_history",
    "same_message",
    "set_active_history",
    "soft_reset",
    "without_markers",
]


def head_marker(kind: str = "head") -> SessionMessage:
    """A new head marker (``kind`` is ``"reset"`` for a new empty root, else ``"head"``)."""
    return SessionMessage(id=f"marker_{uuid.uuid4().hex}", role="system", parts=[], metadata={MARKER_KEY: kind})


def without_markers(messages: Iterable[SessionMessage]) -> list[SessionMessage]:
    return [m for m in messages if not is_marker(m)]


def raw_history(session: Session, leaf_id: str | None = None) -> list[SessionMessage]:
    """The stored path root -> ``leaf_id`` (default: the latest leaf) without compaction
    overlays and without head markers: every original message, as written."""
    return without_markers(session.get_history(leaf_id, raw=True))


def soft_reset(session: Session) -> SessionMessage:
    """Start a new, empty active branch (a ``"reset"`` marker as a new root). The old branch
    stays stored and searchable; the session's context blocks are untouched."""
    return session.append_message(head_marker("reset"), None).message


def same_message(stored: SessionMessage, new: SessionMessage) -> bool:
    """Default equality of :func:`set_active_history`: the same id, or the same role, parts
    and metadata (ids and creation times ignored)."""
    if stored.id == new.id:
        return True
    if stored.role != new.role or stored.metadata != new.metadata or len(stored.parts) != len(new.parts):
        return False
    return all(a.model_dump(mode="json") == b.model_dump(mode="json") for a, b in zip(stored.parts, new.parts))


def set_active_history(
    session: Session,
    messages: Sequence[MessageInput],
    *,
    same: Callable[[SessionMessage, SessionMessage], bool] = same_message,
) -> list[SessionMessage]:
    """Make ``messages`` the active branch without deleting anything; return those stored.

    The longest prefix equal (``same``) to the current active branch is kept as it is; the rest
    is appended as a new branch under the last shared message (a new root when nothing is
    shared). When ``messages`` is a shorter prefix of the branch, a head marker under its last
    message makes it active. An empty list is a :func:`soft_reset`. Equal histories change
    nothing. A message whose id is stored elsewhere in the session gets a new id. Every message
    is validated before anything is stored.
    """
    parsed = [parse_message(m) for m in messages]
    if not parsed:
        current = raw_history(session)
        if current:
            soft_reset(session)
        return []
    path = session.get_history(raw=True)
    parent: str | None = None
    matched = 0
    visible_left = 0
    for position, stored in enumerate(path):
        if is_marker(stored):
            parent = stored.id
            continue
        if matched < len(parsed) and same(stored, parsed[matched]):
            parent = stored.id
            matched += 1
            continue
        visible_left = sum(1 for m in path[position:] if not is_marker(m))
        break
    rest = parsed[matched:]
    if not rest:
        if visible_left:
            session.append_message(head_marker("head"), parent)
        return []
    stored_messages: list[SessionMessage] = []
    for message in rest:
        # Stored "now", so the new branch ends at the latest leaf and becomes the active one.
        message = message.model_copy(update={"created_at": None})
        result = session.append_message(message, parent)
        if not result.inserted:
            message = message.model_copy(update={"id": str(uuid.uuid4())})
            result = session.append_message(message, parent)
        stored_messages.append(result.message)
        parent = result.message.id
    return stored_messages


def ensure_session(manager: Any, session_id: str, *, name: str | None = None) -> Any:
    """The manager's session ``session_id``, registered under that id (named ``name``, else
    the id) if it is not yet; returns its ``SessionInfo``."""
    from .stores.base import SessionRow

    info = manager.get(session_id)
    if info is not None:
        return info
    row = SessionRow.new(manager.namespace, session_id, manager.storage_id(session_id), name or session_id, now_us())
    try:
        manager.store.register_session(row)
    except Exception:
        if manager.get(session_id) is None:  # not a concurrent registration of the same id
            raise
    return manager.get(session_id)


class Registration:
    """A manager's session registered under ``session_id`` at its first :meth:`ensure`, and
    checked again at the first one after the manager published a ``clear`` (a session deleted,
    erased, pruned or cleared: registered again if it was this one). Registers nothing until
    asked; keeps no subscription (a history per user may live long)."""

    def __init__(self, manager: Any, session_id: str) -> None:
        self.manager = manager
        self.session_id = session_id
        self._checked_at: int | None = None  # the manager's clear count when last registered
        self._lock = threading.Lock()

    def ensure(self) -> None:
        """Register the session unless this object did since the manager last cleared one."""
        clears = self.manager._clears
        if self._checked_at == clears:
            return
        with self._lock:
            if self._checked_at != clears:
                ensure_session(self.manager, self.session_id)
                self._checked_at = clears


async def araw_history(session: Session, leaf_id: str | None = None) -> list[SessionMessage]:
    """Async twin of :func:`raw_history`."""
    return await run_in_thread(raw_history, session, leaf_id)


async def asoft_reset(session: Session) -> SessionMessage:
    """Async twin of :func:`soft_reset`."""
    return await run_in_thread(soft_reset, session)


async def aset_active_history(
    session: Session,
    messages: Sequence[MessageInput],
    *,
    same: Callable[[SessionMessage, SessionMessage], bool] = same_message,
) -> list[SessionMessage]:
    """Async twin of :func:`set_active_history`."""
    return await run_in_thread(set_active_history, session, messages, same=same)


async def aensure_session(manager: Any, session_id: str, *, name: str | None = None) -> Any:
    """Async twin of :func:`ensure_session`."""
    return await run_in_thread(ensure_session, manager, session_id, name=name)
