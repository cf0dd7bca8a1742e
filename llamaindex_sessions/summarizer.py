"""Compaction summaries written by any LlamaIndex ``LLM``."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from sessions_core import CompactionError
from sessions_core.integration import Summarizer

__all__ = ["llm_summarizer"]


def _summary_text(response: Any) -> str:
    content = response.message.content
    if not isinstance(content, str) or not content.strip():
        raise CompactionError("the summariser LLM returned no text")
    return content


def llm_summarizer(llm: Any, *, use_async: bool = False) -> Summarizer:
    """A compaction ``summarize(prompt) -> str`` for ``create_compact_function`` that asks
    ``llm`` (any LlamaIndex ``LLM``; completion-only models work through ``chat``).

    The call goes straight to the LLM, outside any agent or engine, so the summary never
    reaches a user's stream. By default calling it is sync (``llm.chat``): the session runs it
    in a worker thread on async paths, which suits every LLM; its ``ainvoke`` uses
    ``llm.achat``. ``use_async=True`` makes calling it return the ``llm.achat`` coroutine, run on
    the caller's event loop.
    """

    def request(prompt: str) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole.USER, content=prompt)]

    async def asummarize(prompt: str) -> str:
        return _summary_text(await llm.achat(request(prompt)))

    if use_async:
        return Summarizer(asynchronous=asummarize)

    def summarize(prompt: str) -> str:
        return _summary_text(llm.chat(request(prompt)))

    return Summarizer(summarize, asummarize)
