"""A scripted chat model for offline agent tests, and small helpers."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

SUMMARY_PROMPT_STARTS = ("Create a concise summary", "You are updating a conversation summary")


def is_summary_prompt(messages: list[BaseMessage]) -> bool:
    return (
        len(messages) == 1
        and isinstance(messages[0], HumanMessage)
        and isinstance(messages[0].content, str)
        and messages[0].content.startswith(SUMMARY_PROMPT_STARTS)
    )


class ScriptedChatModel(FakeMessagesListChatModel):
    """Answers with the scripted ``responses`` in order; ``bind_tools`` returns the model itself
    (recording the tools). A compaction prompt gets ``summary`` (or fails with
    ``fail_summary``) without consuming the script. Every call's input is recorded."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[Any] = Field(default_factory=list)
    summary: str = "SUMMARY-TEXT: the user talked about tea."
    summary_prompts: list[str] = Field(default_factory=list)
    fail_summary: bool = False

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> ScriptedChatModel:
        self.bound_tools = list(tools)
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if is_summary_prompt(messages):
            self.summary_prompts.append(messages[0].content)
            if self.fail_summary:
                raise RuntimeError("summariser unavailable")
            return ChatResult(generations=[ChatGeneration(message=AIMessage(self.summary))])
        self.calls.append(list(messages))
        if len(self.calls) > len(self.responses):
            raise AssertionError(f"script exhausted after {len(self.responses)} responses")
        reply = self.responses[len(self.calls) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy())])

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """A scripted model turn calling one tool."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def texts(messages: list[BaseMessage]) -> list[str]:
    return [f"{m.type}:{m.text}" for m in messages]


def matched(found: list[Any]) -> list[Any]:
    """The items of a ``SessionStore.search`` that its keyword query matched: the store lists the
    others after them, unscored, as LangGraph's stores list every item for a query."""
    return [item for item in found if item.score is not None]
