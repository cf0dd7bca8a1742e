"""session-memory: durable, searchable, branching memory for LLM agents."""

from .compaction import (
    CompactContext,
    CompactResult,
    create_compact_function,
    sanitize_tool_pairs,
    truncate_older_messages,
)
from .context import ContextBlock, StaticContext, context_entry_key, render_system_prompt
from .errors import (
    CompactionError,
    ContextError,
    MessageTooLargeError,
    MessageValidationError,
    SessionsError,
    StoreError,
)
from .fts import match_all_words
from .manager import SessionInfo, SessionManager
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
from .models import AppendResult, Compaction, RecentHistory, SearchResult, SessionEvent
from .providers import StoreContext, StoreSearchContext
from .session import Session
from .skills import FileSkillProvider
from .stores import LATEST, SqliteStore, Store
from .tokens import TiktokenCounter, estimate_message_tokens, estimate_tokens
from .tools import Tool, to_openai_tools

__version__ = "0.1.0"

_LAZY = {"PostgresStore": "sessions_core.stores.postgres"}


def __getattr__(name: str) -> object:
    """Optional parts load their dependency on first use (``ImportError`` names the extra)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sessions_core' has no attribute {name!r}")

__all__ = [
    "AppendResult",
    "CompactContext",
    "CompactResult",
    "Compaction",
    "CompactionError",
    "ContextBlock",
    "ContextError",
    "FilePart",
    "FileSkillProvider",
    "LATEST",
    "MessageTooLargeError",
    "MessageValidationError",
    "Part",
    "PostgresStore",
    "ReasoningPart",
    "RecentHistory",
    "SearchResult",
    "Session",
    "SessionEvent",
    "SessionInfo",
    "SessionManager",
    "SessionMessage",
    "SessionsError",
    "SqliteStore",
    "StaticContext",
    "Store",
    "StoreContext",
    "StoreError",
    "StoreSearchContext",
    "TextPart",
    "TiktokenCounter",
    "Tool",
    "ToolCallPart",
    "ToolResultPart",
    "ToolUIPart",
    "UnknownPart",
    "context_entry_key",
    "create_compact_function",
    "estimate_message_tokens",
    "estimate_tokens",
    "match_all_words",
    "parse_message",
    "render_system_prompt",
    "sanitize_tool_pairs",
    "to_openai_tools",
    "truncate_older_messages",
]
