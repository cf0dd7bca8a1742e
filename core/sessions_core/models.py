"""Result types returned by sessions and managers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

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


@dataclass(frozen=True, slots=True)
class SearchResult:
    id: str
    role: str
    content: str
    created_at: datetime
    session_id: str = ""


@dataclass(frozen=True, slots=True)
class Compaction:
    """A summary overlay replacing ``from_message_id .. to_message_id`` at read time."""

    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: datetime = field(compare=False)
