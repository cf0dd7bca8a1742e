"""Result types returned by sessions and managers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

from .messages import SessionMessage


@dataclass(frozen=True, slots=True)
class AppendResult:
    """``inserted`` is False when a message with that id was already stored; ``message`` is then
    the stored one (the first content wins)."""

    inserted: bool
    message: SessionMessage


@dataclass(frozen=True, slots=True)
class RecentHistory:
    messages: list[SessionMessage]
    truncated: bool
    """Whether older messages of the path were left out."""
    total_content_bytes: int
    """UTF-8 bytes of the whole path's stored messages."""


class SearchResult(NamedTuple):
    """A message found by search (a tuple: built once per result row, at C speed)."""

    id: str
    role: str
    content: str
    created_at: datetime
    session_id: str = ""
    compacted: bool = False
    """The message is hidden behind a compaction overlay's summary (it is kept, and found)."""


class SearchResults(list[SearchResult]):
    """The results of ``search``: a list of :class:`SearchResult`, best first, saying how it
    was ranked. ``text_only``: by words alone (``mode="text"``, or ``"hybrid"`` whose vector
    index failed: ``recall_error`` then names the index's error)."""

    def __init__(
        self, results: Iterable[SearchResult] = (), *, text_only: bool = False, recall_error: str | None = None
    ) -> None:
        super().__init__(results)
        self.text_only = text_only
        self.recall_error = recall_error


@dataclass(frozen=True, slots=True)
class Compaction:
    """A summary overlay replacing ``from_message_id .. to_message_id`` at read time."""

    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: datetime = field(compare=False)


@dataclass(frozen=True, slots=True)
class ContextVersion:
    """One version of a context block (or of a keyed entry of one): every write records one."""

    version: int
    """Counted from 1 per block (and key)."""
    content: str
    created_at: datetime
    source: str
    """``"tool"`` (the model's memory tools), ``"code"`` (the Python API) or ``"import"``."""
    tool_call_id: str | None = None


EventType = Literal["append", "update", "delete", "clear", "compact", "block"]


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One write, as reported to ``subscribe`` callbacks.

    ``append``: ``message``, ``parent_id`` (where it landed) and ``inserted`` (``False`` for an id
    already stored); ``update``: ``message``; ``delete``: ``message_ids``; ``clear``; ``compact``:
    ``compaction``; ``block``: ``label`` and, for keyed blocks, ``key``.
    """

    type: EventType
    session_id: str
    message: SessionMessage | None = None
    parent_id: str | None = None
    inserted: bool | None = None
    message_ids: tuple[str, ...] = ()
    compaction: Compaction | None = None
    label: str | None = None
    key: str | None = None
    version: int | None = None
    """``block``: the version the write recorded (``None`` from a provider that keeps none)."""
