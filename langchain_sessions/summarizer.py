"""``chat_model_summarizer``: compaction summaries written by any LangChain chat model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from sessions_core.integration import Summarizer

from .conversion import COMPACTION_SOURCE

__all__ = ["COMPACTION_TAG", "ChatModelSummarizer", "chat_model_summarizer"]

NOSTREAM_TAG = "nostream"  # langgraph.constants.TAG_NOSTREAM: keeps a call out of stream_mode="messages"
COMPACTION_TAG = "session_memory:compaction"
"""Tag of every summary call (with LangGraph's ``nostream`` tag, so the summary never streams)."""


class ChatModelSummarizer(Summarizer):
    """A compaction ``summarize(prompt) -> str`` backed by a chat model.

    Calling it runs the model synchronously, or natively async within the adapter's async paths
    (the core's ``prefer_async``); :meth:`ainvoke` is the native async form. Each
    call is tagged ``nostream`` and ``session_memory:compaction`` (so LangGraph's
    ``stream_mode="messages"`` never shows it), carries ``metadata={"lc_source":
    "session_memory.compaction"}`` and is retried ``max_retries`` times. A blank reply is
    returned as it is: ``create_compact_function`` treats it as a failure.
    """

    def __init__(
        self,
        model: BaseChatModel | Runnable[Any, Any],
        *,
        max_retries: int = 2,
        retry_wait: bool = True,
        tags: Sequence[str] = (),
    ) -> None:
        self.model = model
        runnable: Runnable[Any, Any] = model
        if max_retries > 0:
            runnable = model.with_retry(stop_after_attempt=max_retries + 1, wait_exponential_jitter=retry_wait)
        self._runnable = runnable
        self._config: RunnableConfig = {
            "tags": [NOSTREAM_TAG, COMPACTION_TAG, *tags],
            "metadata": {"lc_source": COMPACTION_SOURCE},
            "run_name": "session_memory_compaction",
        }
        super().__init__(self._invoke, self._ainvoke)

    def _invoke(self, prompt: str) -> str:
        return _text(self._runnable.invoke([HumanMessage(prompt)], config=self._config))

    async def _ainvoke(self, prompt: str) -> str:
        return _text(await self._runnable.ainvoke([HumanMessage(prompt)], config=self._config))

    def __repr__(self) -> str:
        return f"ChatModelSummarizer({self.model!r})"


def _text(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    text = getattr(reply, "text", None)
    if isinstance(text, str):
        return text
    content = getattr(reply, "content", reply)
    return content if isinstance(content, str) else str(content)


def chat_model_summarizer(
    model: BaseChatModel | Runnable[Any, Any], *, max_retries: int = 2, retry_wait: bool = True
) -> ChatModelSummarizer:
    """Any ``BaseChatModel`` as the summariser of ``create_compact_function(summarize=...)``::

    session.on_compaction(create_compact_function(summarize=chat_model_summarizer(model)))
    """
    return ChatModelSummarizer(model, max_retries=max_retries, retry_wait=retry_wait)


def as_summarize(summarizer: Any) -> Callable[[str], Any]:
    """A ``summarize`` callable for a chat model, a runnable or a plain function."""
    if isinstance(summarizer, ChatModelSummarizer):
        return summarizer
    if isinstance(summarizer, (BaseChatModel, Runnable)):
        return ChatModelSummarizer(summarizer)
    if callable(summarizer):
        return summarizer
    raise TypeError(f"a summarizer must be a chat model or a function str -> str, not {type(summarizer).__name__}")
