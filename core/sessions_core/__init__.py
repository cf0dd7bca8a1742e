"""session-memory: durable, searchable, branching memory for LLM agents."""

import typing as _typing

from .compaction import CompactContext, CompactResult, create_compact_function
from .context import ContextBlock, StaticContext
from .errors import (
    CompactionError,
    ConflictError,
    ContextError,
    EncryptionKeyError,
    InvalidInputError,
    InvalidParentError,
    InvalidRecordError,
    InvalidTextError,
    MessageTooLargeError,
    MessageValidationError,
    NotFoundError,
    RecallError,
    RedactionError,
    SessionNotFoundError,
    SessionsError,
    StoreError,
    StoreUnavailableError,
    UnsupportedOperationError,
)
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
from .models import AppendResult, Compaction, RecentHistory, SearchResult, SearchResults, SessionEvent
from .providers import StoreContext, StoreSearchContext
from .recall import VectorHit, VectorIndex
from .redaction import PIIRedactor, Redaction
from .retention import EraseResult, PruneResult
from .semantic import DrainReport, SemanticRecall
from .session import Session
from .skills import FileSkillProvider
from .stores import LATEST, SqliteStore, Store
from .tokens import TiktokenCounter, estimate_message_tokens, estimate_tokens
from .tools import Tool, to_openai_tools

if _typing.TYPE_CHECKING:  # for type checkers only: at run time __getattr__ loads it (and psycopg) on first use
    from .stores.postgres import PostgresStore

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
    "RedactionError",
    "ConflictError",
    "DrainReport",
    "EraseResult",
    "ContextBlock",
    "ContextError",
    "EncryptionKeyError",
    "FilePart",
    "FileSkillProvider",
    "InvalidInputError",
    "InvalidRecordError",
    "LATEST",
    "InvalidTextError",
    "InvalidParentError",
    "MessageTooLargeError",
    "MessageValidationError",
    "NotFoundError",
    "PIIRedactor",
    "Part",
    "PruneResult",
    "PostgresStore",
    "ReasoningPart",
    "RecallError",
    "RecentHistory",
    "Redaction",
    "SearchResult",
    "SearchResults",
    "SemanticRecall",
    "Session",
    "SessionEvent",
    "SessionInfo",
    "SessionManager",
    "SessionMessage",
    "SessionNotFoundError",
    "SessionsError",
    "SqliteStore",
    "StaticContext",
    "Store",
    "StoreContext",
    "StoreError",
    "StoreSearchContext",
    "StoreUnavailableError",
    "TextPart",
    "TiktokenCounter",
    "Tool",
    "ToolCallPart",
    "ToolResultPart",
    "ToolUIPart",
    "UnknownPart",
    "UnsupportedOperationError",
    "VectorHit",
    "VectorIndex",
    "create_compact_function",
    "estimate_message_tokens",
    "estimate_tokens",
    "parse_message",
    "to_openai_tools",
]
