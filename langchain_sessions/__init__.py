"""LangChain adapter of session-memory (extra ``langchain``).

``SessionMemoryMiddleware`` gives a ``langchain.agents.create_agent`` agent durable,
searchable, self-edited memory; ``SessionChatMessageHistory`` is a ``BaseChatMessageHistory``;
``SessionToolkit`` gives the memory tools as ``StructuredTool``s; ``chat_model_summarizer`` makes
compaction summaries with any chat model; ``VectorStoreRecall`` gives semantic recall on any
``VectorStore``; ``SessionSaver`` is a LangGraph checkpointer whose threads are sessions; ``SessionStore`` is a
LangGraph ``BaseStore`` in the same database. The
history, the toolkit and the conversion need only ``langchain-core``; the middleware, the
saver and the store need ``langchain`` (with LangGraph) and are imported on first use.
"""

import typing as _typing

try:
    import langchain_core  # noqa: F401
except ModuleNotFoundError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "langchain_sessions needs the langchain extra: pip install 'session-memory[langchain]'"
    ) from error

from .conversion import (
    COMPACTION_SOURCE,
    to_langchain_message,
    to_langchain_messages,
    to_session_message,
    to_session_messages,
)
from .history import SessionChatMessageHistory
from .recall import SynonymEmbeddings, VectorStoreRecall
from .summarizer import COMPACTION_TAG, ChatModelSummarizer, chat_model_summarizer
from .toolkit import SessionToolkit

if _typing.TYPE_CHECKING:
    from .checkpoint import SessionSaver
    from .middleware import SessionMemoryMiddleware, SessionMemoryState
    from .store import SessionStore

__all__ = [
    "COMPACTION_SOURCE",
    "COMPACTION_TAG",
    "ChatModelSummarizer",
    "SessionChatMessageHistory",
    "SessionMemoryMiddleware",
    "SessionMemoryState",
    "SessionSaver",
    "SessionStore",
    "SessionToolkit",
    "SynonymEmbeddings",
    "VectorStoreRecall",
    "chat_model_summarizer",
    "to_langchain_message",
    "to_langchain_messages",
    "to_session_message",
    "to_session_messages",
]

_LAZY = {
    "SessionMemoryMiddleware": "middleware",
    "SessionMemoryState": "middleware",
    "SessionSaver": "checkpoint",
    "SessionStore": "store",
}


def __getattr__(name: str) -> _typing.Any:
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(f".{_LAZY[name]}", __name__)
        except ModuleNotFoundError as error:
            raise ImportError(
                f"{name} needs langchain (create_agent, LangGraph): pip install 'session-memory[langchain]'"
            ) from error
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
