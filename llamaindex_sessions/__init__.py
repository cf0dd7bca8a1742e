"""LlamaIndex adapter of session-memory (extra ``llamaindex``).

``SessionMemory`` is the memory of agents and chat engines, ``SessionChatStore`` a chat store
over a ``SessionManager``, ``SessionToolSpec`` the memory tools as ``FunctionTool``s, and
``llm_summarizer`` compaction with any LlamaIndex ``LLM``, and ``VectorStoreRecall`` semantic recall
on any vector store with an embed model.
"""

try:
    import llama_index.core  # noqa: F401
except ModuleNotFoundError as error:  # pragma: no cover - depends on the environment
    raise ImportError("llamaindex_sessions needs LlamaIndex: pip install 'session-memory[llamaindex]'") from error

from .chat_store import SessionChatStore
from .conversion import from_chat_message, from_chat_messages, to_chat_message, to_chat_messages
from .memory import SessionMemory
from .recall import SynonymEmbedding, VectorStoreRecall
from .summarizer import llm_summarizer
from .tools import SessionToolSpec, to_function_tool

__all__ = [
    "SessionChatStore",
    "SessionMemory",
    "SessionToolSpec",
    "SynonymEmbedding",
    "VectorStoreRecall",
    "from_chat_message",
    "from_chat_messages",
    "llm_summarizer",
    "to_chat_message",
    "to_chat_messages",
    "to_function_tool",
]
