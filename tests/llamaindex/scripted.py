"""A scripted function-calling LLM for offline agent and engine tests.

Each call takes the next step of the script: a ``ChatMessage``, a string (a text answer) or a
function ``step(messages, tools) -> ChatMessage | str``. Every call is recorded (messages and
tool names) so a test can check what the model saw.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection

Step = Any  # ChatMessage | str | Callable[[list[ChatMessage], list[str]], ChatMessage | str]
_ids = itertools.count(1)


def tool_call(
    name: str,
    args: dict[str, Any] | None = None,
    *,
    text: str = "",
    call_id: str | None = None,
    kwargs_form: bool = False,
) -> ChatMessage:
    """An assistant message calling one tool (as a ``ToolCallBlock``; with ``kwargs_form``
    only as ``additional_kwargs["tool_calls"]``, the older shape)."""
    return tool_calls([(name, args or {})], text=text, call_ids=[call_id] if call_id else None, kwargs_form=kwargs_form)


def tool_calls(
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    text: str = "",
    call_ids: Sequence[str] | None = None,
    kwargs_form: bool = False,
) -> ChatMessage:
    ids = list(call_ids or [f"call_{next(_ids)}" for _ in calls])
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    if kwargs_form:
        import json

        kwargs = {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, (n, a) in zip(ids, calls)
            ]
        }
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks, additional_kwargs=kwargs)
    blocks += [ToolCallBlock(tool_call_id=i, tool_name=n, tool_kwargs=a) for i, (n, a) in zip(ids, calls)]
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)


@dataclass
class Call:
    messages: list[ChatMessage]
    tools: list[str] = field(default_factory=list)
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def system(self) -> list[str]:
        return [m.content or "" for m in self.messages if m.role == MessageRole.SYSTEM]


class ScriptedLLM(FunctionCallingLLM):
    """Answers from a script; records every call."""

    _script: list[Step] = PrivateAttr(default_factory=list)
    _calls: list[Call] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _fallback: Step = PrivateAttr(default=None)

    def __init__(self, script: Iterable[Step] = (), *, fallback: Step = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._script = list(script)
        self._fallback = fallback

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=128_000,
            num_output=1024,
            is_chat_model=True,
            is_function_calling_model=True,
            model_name="scripted",
        )

    @property
    def calls(self) -> list[Call]:
        return self._calls

    def add(self, *steps: Step) -> ScriptedLLM:
        self._script.extend(steps)
        return self

    def _respond(self, messages: Sequence[ChatMessage], tools: Sequence[Any] | None) -> ChatResponse:
        tools = list(tools or [])
        names = [t.metadata.name for t in tools]
        with self._lock:
            self._calls.append(
                Call(
                    copy.deepcopy(list(messages)),
                    names,
                    {t.metadata.name: t.metadata.get_parameters_dict() for t in tools},
                )
            )
            if self._script:
                step = self._script.pop(0)
            elif self._fallback is not None:
                step = self._fallback
            else:
                raise AssertionError(f"the script is exhausted (call {len(self._calls)})")
        if callable(step) and not isinstance(step, ChatMessage):
            step = step(list(messages), names)
        if isinstance(step, str):
            step = ChatMessage(role=MessageRole.ASSISTANT, content=step)
        return ChatResponse(message=step.model_copy(deep=True), delta=step.content or "")

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._respond(messages, kwargs.get("tools"))

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        response = self._respond(messages, kwargs.get("tools"))
        return iter([response])

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._respond(messages, kwargs.get("tools"))

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        response = self._respond(messages, kwargs.get("tools"))

        async def gen() -> Any:
            yield response

        return gen()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._respond([ChatMessage(content=prompt)], None).message.content or "")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        return iter([self.complete(prompt)])

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.complete(prompt)

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        response = self.complete(prompt)

        async def gen() -> Any:
            yield response

        return gen()

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: Any = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(
                ChatMessage(role=MessageRole.USER, content=user_msg) if isinstance(user_msg, str) else user_msg
            )
        return {"messages": messages, "tools": list(tools)}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        import json

        selections = [
            ToolSelection(
                tool_id=b.tool_call_id or "",
                tool_name=b.tool_name,
                tool_kwargs=b.tool_kwargs if isinstance(b.tool_kwargs, dict) else json.loads(b.tool_kwargs or "{}"),
            )
            for b in response.message.blocks
            if isinstance(b, ToolCallBlock)
        ]
        for call in response.message.additional_kwargs.get("tool_calls") or ():
            if any(s.tool_id == call["id"] for s in selections):
                continue
            selections.append(
                ToolSelection(
                    tool_id=call["id"],
                    tool_name=call["function"]["name"],
                    tool_kwargs=json.loads(call["function"]["arguments"] or "{}"),
                )
            )
        if not selections and error_on_no_tool_call:
            raise ValueError("expected at least one tool call")
        return selections
