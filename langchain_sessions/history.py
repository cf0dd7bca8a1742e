"""``SessionChatMessageHistory``: a session as a LangChain ``BaseChatMessageHistory``."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from sessions_core import (
    CompactionError,
    InvalidInputError,
    Session,
    SessionManager,
    SessionMessage,
    create_compact_function,
)
from sessions_core.integration import Registration, async_twin, run_in_thread, soft_reset

from .conversion import is_summary, to_langchain_messages, to_session_message
from .summarizer import as_summarize

__all__ = ["SessionChatMessageHistory"]

logger = logging.getLogger("langchain_sessions")


class SessionChatMessageHistory(BaseChatMessageHistory):
    """The active branch of a session as a chat message history, for ``RunnableWithMessageHistory``
    and any code that takes a ``BaseChatMessageHistory``.

    ``messages`` is the history as the model should see it: compaction summaries in place of
    the ranges they cover. ``add_messages`` appends under the latest message; a message without
    an id is stored under a new one (given to the stored copy, not set on your message, so the
    same message object added again in a later call is a new turn, as in
    ``InMemoryChatMessageHistory``), and a message whose id is already stored (one you set, or
    one read back from ``messages``) is skipped. Every method has an async twin (the sync method in a
    worker thread, a chat model summariser called natively async).

    With a ``summarizer`` (a chat model or a function ``str -> str``), the session compacts with
    it; with ``compact_after`` too, ``add_messages`` compacts when the session's token estimate
    passes that many tokens (a failed compaction is logged and the history left whole). The
    history is never compacted while it is being read, so a run sees the same list at its start
    and at its end.

    ``clear()`` starts a new, empty branch and deletes nothing (the old messages stay
    searchable); ``hard_clear()`` deletes them.

    Built from a ``Session``, a ``SessionManager`` with ``session_id=``, or, as
    ``SQLChatMessageHistory`` is, ``session_id=`` with ``connection=`` / ``connection_string=``
    (a path, ``"sqlite:///chat.db"``, a ``postgresql://`` URL; ``table_name=`` becomes the
    manager's namespace); a path may also come first (``SessionChatMessageHistory("chat.db",
    session_id="u1")``). Building reads nothing: a manager's session is registered on first use.
    """

    def __init__(
        self,
        session: Session | SessionManager | str | os.PathLike | None = None,
        *,
        session_id: str | None = None,
        connection: Any = None,
        connection_string: str | None = None,
        table_name: str | None = None,
        async_mode: bool | None = None,
        summarizer: Any = None,
        compact_after: int | None = None,
        keep_recent_tokens: int = 20_000,
        protect_head: int = 3,
        **unsupported: Any,
    ) -> None:
        super().__init__()
        _refuse(unsupported)
        del async_mode  # SQLChatMessageHistory's switch: both forms always work here
        if compact_after is not None and summarizer is None:
            raise InvalidInputError(
                "compact_after needs a summarizer: pass summarizer=a chat model or a function str -> str"
            )
        self._owned: SessionManager | None = None
        self._registration: Registration | None = None
        store = _store_spec(session, connection, connection_string)
        if store is not None:
            self._owned = session = SessionManager(store, namespace=_namespace(table_name))
        elif table_name is not None:
            raise InvalidInputError(
                "table_name goes with connection=: pass both, or a SessionManager(..., namespace=...)"
            )
        if isinstance(session, SessionManager):
            if not session_id:
                raise InvalidInputError(
                    "pass session_id=... (the conversation's id) with a SessionManager or a connection"
                )
            self._registration = Registration(session, session_id)
            session = session.get_session(session_id)
        elif not isinstance(session, Session):
            raise TypeError(
                "expected a Session, a SessionManager with session_id=..., or session_id=... with"
                f' connection="chat.db" (a path or a database URL), not {type(session).__name__}'
            )
        elif session_id is not None and session_id != session.session_id:
            raise InvalidInputError(
                f"session_id={session_id!r} differs from the Session's id {session.session_id!r}:"
                " pass one of them, or a SessionManager with session_id=..."
            )
        self.session = session
        self.compact_after = compact_after
        if summarizer is not None:
            session.on_compaction(
                create_compact_function(
                    summarize=as_summarize(summarizer),
                    protect_head=protect_head,
                    keep_recent_tokens=keep_recent_tokens,
                )
            )

    @classmethod
    def from_manager(cls, manager: SessionManager, session_id: str, **options: Any) -> SessionChatMessageHistory:
        """The history of a manager's session ``session_id``, registered on first use (so
        ``session_search`` and ``manager.list_sessions()`` see it); building it reads nothing. A
        ``get_session_history`` for ``RunnableWithMessageHistory``:
        ``lambda sid: SessionChatMessageHistory.from_manager(manager, sid)``."""
        return cls(manager, session_id=session_id, **options)

    def _register(self) -> None:
        """Register a manager's session in its registry at first use (and again after the manager
        deleted it)."""
        if self._registration is not None:
            self._registration.ensure()

    def close(self) -> None:
        """Close the store if this history opened it (from ``connection=``)."""
        if self._owned is not None:
            self._owned.close()

    aclose = async_twin(close)

    def __repr__(self) -> str:
        return f"SessionChatMessageHistory({self.session!r})"

    # -- reads -----------------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The active branch as LangChain messages, compaction summaries applied."""
        self._register()
        return to_langchain_messages(self.session.get_history())

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of :attr:`messages`."""
        return await run_in_thread(lambda: self.messages)

    # -- writes ----------------------------------------------------------------------------

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in order under the latest message, in one transaction: all of
        them or none; ids already stored are skipped."""
        self._register()
        prepared = self._prepare(messages)
        if prepared:
            # Ids of ours are new: only an id the caller set can be stored already (a read).
            given = any(message.id for message in messages)
            self.session.append_messages(prepared, stored="skip" if given else "continue")
        self._maybe_compact()

    aadd_messages = async_twin(add_messages, prefer_async=True)

    def clear(self) -> None:
        """Start a new, empty active branch: nothing is deleted, the old messages stay
        searchable (``hard_clear`` deletes them)."""
        self._register()
        if self.session.get_latest_leaf() is not None:
            soft_reset(self.session)

    aclear = async_twin(clear)

    def hard_clear(self) -> None:
        """Delete every message and compaction of the session (its context blocks stay)."""
        self._register()
        self.session.clear_messages()

    ahard_clear = async_twin(hard_clear)

    def _prepare(self, messages: Sequence[BaseMessage]) -> list[SessionMessage]:
        # An id the caller set (or one read back from the store) dedupes; a message without one
        # is stored under an id of ours written on the stored copy only, never on the caller's
        # object, so the same object sent again in a later add (a constant "continue") is a new
        # turn, as in InMemoryChatMessageHistory. Within one add, the same object is one message.
        prepared: list[SessionMessage] = []
        seen: set[str] = set()
        seen_objects: set[int] = set()
        for message in messages:
            if is_summary(message):
                continue
            ident = message.id
            if not ident:
                if id(message) in seen_objects:
                    continue
                seen_objects.add(id(message))
                ident = str(uuid.uuid4())
                message = message.model_copy(update={"id": ident})
            elif ident in seen:
                continue
            seen.add(ident)
            prepared.append(to_session_message(message))
        return prepared

    # -- compaction ------------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        if self.compact_after is None or self.session.get_token_estimate() <= self.compact_after:
            return
        try:
            self.session.compact()
        except CompactionError as error:
            logger.warning("compaction of session %r failed, history kept whole: %s", self.session.session_id, error)


_UNSUPPORTED = {
    "session_id_field_name": "sessions are keyed by session_id alone; drop it",
    "custom_message_converter": "every LangChain message is stored as it is; drop it",
    "engine_args": 'pass the URL alone (connection="postgresql://..."), or a Session over a configured store',
}


def _refuse(unsupported: dict[str, Any]) -> None:
    for name in unsupported:
        hint = _UNSUPPORTED.get(name) or (
            "it takes session, session_id, connection (or connection_string), table_name, summarizer,"
            " compact_after, keep_recent_tokens and protect_head"
        )
        raise TypeError(f"SessionChatMessageHistory got an unexpected argument {name}=: {hint}")


def _store_spec(session: Any, connection: Any, connection_string: str | None) -> Any:
    """The store to open from a path or URL given as ``session``, ``connection`` or
    ``connection_string`` (SQLAlchemy URLs included); ``None`` when none is given."""
    given = [value for value in (connection, connection_string) if value is not None]
    if isinstance(session, (str, os.PathLike)):
        given.insert(0, session)
    elif session is not None and given:
        raise InvalidInputError("pass either a Session / SessionManager or connection=..., not both")
    if len(given) > 1:
        raise InvalidInputError("pass one store: connection=... or connection_string=..., not both")
    if not given:
        return None
    spec = given[0]
    url = getattr(spec, "url", None)  # a SQLAlchemy Engine
    if url is not None and hasattr(url, "render_as_string"):
        spec = url.render_as_string(hide_password=False)
    if isinstance(spec, os.PathLike):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            f'connection must be a path or a database URL ("chat.db", "sqlite:///chat.db",'
            f' "postgresql://..."), not {type(spec).__name__}'
        )
    return _from_sqlalchemy_url(spec)


def _from_sqlalchemy_url(url: str) -> str:
    """``sqlite:///chat.db`` -> ``chat.db``, ``postgresql+psycopg://...`` -> ``postgresql://...``;
    a plain path or our own URL unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    dialect = scheme.split("+", 1)[0]
    if dialect == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        return path or ":memory:"
    if dialect in ("postgresql", "postgres"):
        return f"postgresql://{rest}"
    raise InvalidInputError(f"unsupported database URL {scheme}://...: use a SQLite path or a postgresql:// URL")


def _namespace(table_name: str | None) -> str:
    """SQLChatMessageHistory's ``table_name`` as the manager's namespace (the default table is
    the default namespace)."""
    if table_name is None or table_name == "message_store":
        return ""
    return table_name
