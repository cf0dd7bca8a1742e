"""session-memory: durable, searchable, branching memory for LLM agents."""

from .errors import (
    MessageTooLargeError,
    MessageValidationError,
    SearchNotSupportedError,
    SessionsError,
    StoreError,
)
from .fts import match_all_words
from .messages import (
    FilePart,
    Part,
    ReasoningPart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
    UnknownPart,
    parse_message,
)
from .models import AppendResult, Compaction, RecentHistory, SearchResult
from .session import Session
from .stores import LATEST, SqliteStore, Store
from .tokens import TiktokenCounter, estimate_message_tokens, estimate_tokens

__version__ = "0.1.0"

__all__ = [
    "LATEST",
    "AppendResult",
    "Compaction",
    "FilePart",
    "MessageTooLargeError",
    "MessageValidationError",
    "Part",
    "ReasoningPart",
    "RecentHistory",
    "SearchNotSupportedError",
    "SearchResult",
    "Session",
    "SessionMessage",
    "SessionsError",
    "SqliteStore",
    "Store",
    "StoreError",
    "TextPart",
    "TiktokenCounter",
    "ToolCallPart",
    "ToolResultPart",
    "ToolUIPart",
    "UnknownPart",
    "estimate_message_tokens",
    "estimate_tokens",
    "match_all_words",
    "parse_message",
]
