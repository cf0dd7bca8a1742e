"""``SessionChatMessageHistory``: a session as a LangChain ``BaseChatMessageHistory``."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from sessions_core import CompactionError, Session, SessionManager, SessionMessage, create_compact_function
from sessions_core.integration import async_twin, ensure_session, run_in_thread, soft_reset

from .conversion import is_summary, to_langchain_messages, to_session_message
from .summarizer import as_summarize

__all__ = ["SessionChatMessageHistory"]

logger = logging.getLogger("langchain_sessions")


class SessionChatMessageHistory(BaseChatMessageHistory):
    """The active branch of a session as a chat message history, for ``RunnableWithMessageHistory``
    and any code that takes a ``BaseChatMessageHistory``.

    ``messages`` is the history as the model should see it: compaction summaries in place of
    the ranges they cover. ``add_messages`` appends under the latest message; a message without
    an id is given one (set on the message, so adding it again stores nothing), and a message
    whose id is already stored is skipped. Every method has an async twin (the sync method in a
    worker thread, a chat model summariser called natively async).

    With a ``summarizer`` (a chat model or a function ``str -> str``), the session compacts with
    it; with ``compact_after`` too, ``add_messages`` compacts when the session's token estimate
    passes that many tokens (a failed compaction is logged and the history left whole). The
    history is never compacted while it is being read, so a run sees the same list at its start
    and at its end.

    ``clear()`` starts a new, empty branch and deletes nothing (the old messages stay
    searchable); ``hard_clear()`` deletes them.
    """

    def __init__(
        self,
        session: Session,
        *,
        summarizer: Any = None,
        compact_after: int | None = None,
        keep_recent_tokens: int = 20_000,
        protect_head: int = 3,
    ) -> None:
        super().__init__()
        if not isinstance(session, Session):
            raise TypeError(f"expected a Session, not {type(session).__name__}")
        if compact_after is not None and summarizer is None:
            raise ValueError("compact_after needs a summarizer")
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
        ``session_search`` and ``manager.list()`` see it). A ``get_session_history`` for
        ``RunnableWithMessageHistory``: ``lambda sid: SessionChatMessageHistory.from_manager(manager, sid)``."""
        ensure_session(manager, session_id)
        return cls(manager.get_session(session_id), **options)

    def __repr__(self) -> str:
        return f"SessionChatMessageHistory({self.session!r})"

    # -- reads -----------------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The active branch as LangChain messages, compaction summaries applied."""
        return to_langchain_messages(self.session.get_history())

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of :attr:`messages`."""
        return await run_in_thread(lambda: self.messages)

    # -- writes ----------------------------------------------------------------------------

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in order; ids already stored are skipped."""
        for message in self._prepare(messages):
            self.session.append_message(message)
        self._maybe_compact()

    aadd_messages = async_twin(add_messages, prefer_async=True)

    def clear(self) -> None:
        """Start a new, empty active branch: nothing is deleted, the old messages stay
        searchable (``hard_clear`` deletes them)."""
        if self.session.get_latest_leaf() is not None:
            soft_reset(self.session)

    aclear = async_twin(clear)

    def hard_clear(self) -> None:
        """Delete every message and compaction of the session (its context blocks stay)."""
        self.session.clear_messages()

    ahard_clear = async_twin(hard_clear)

    def _prepare(self, messages: Sequence[BaseMessage]) -> list[SessionMessage]:
        prepared: list[SessionMessage] = []
        seen: set[str] = set()
        for message in messages:
            if is_summary(message):
                continue
            if not message.id:
                message.id = str(uuid.uuid4())
            if message.id in seen:
                continue
            seen.add(message.id)
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
