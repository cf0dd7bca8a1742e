"""Compaction summaries written by any LlamaIndex ``LLM``."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from llama_index.core.base.llms.types import ChatMessage, MessageRole

__all__ = ["llm_summarizer"]


def _summary_text(response: Any) -> str:
    content = response.message.content
    if not isinstance(content, str) or not content.strip():
        raise ValueError("the summariser LLM returned no text")
    return content


def llm_summarizer(llm: Any, *, use_async: bool = False) -> Callable[[str], str] | Callable[[str], Awaitable[str]]:
    """A compaction ``summarize(prompt) -> str`` for ``create_compact_function`` that asks
    ``llm`` (any LlamaIndex ``LLM``; completion-only models work through ``chat``).

    The call goes straight to the LLM, outside any agent or engine, so the summary never
    reaches a user's stream. By default the function is sync (``llm.chat``): the session
    runs it in a worker thread on async paths, which suits every LLM. ``use_async=True``
    gives an ``async def`` using ``llm.achat``, run on the caller's event loop.
    """

    def request(prompt: str) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole.USER, content=prompt)]

    if use_async:

        async def asummarize(prompt: str) -> str:
            return _summary_text(await llm.achat(request(prompt)))

        return asummarize

    def summarize(prompt: str) -> str:
        return _summary_text(llm.chat(request(prompt)))

    return summarize
