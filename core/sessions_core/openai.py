"""Helpers for the raw OpenAI client (extra ``openai``).

``to_openai_messages`` turns a stored history into Chat Completions messages;
``from_openai_message`` turns a model reply into a ``SessionMessage`` to store; ``run_tool_calls``
runs the reply's tool calls against a session's tools and returns the tool messages to store;
``openai_summarizer`` makes compaction summaries with any OpenAI client. Only
``openai_summarizer`` needs the ``openai`` package, and only for the client you pass it.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from ._async import run_in_thread
from .errors import CompactionError, InvalidInputError
from .messages import (
    FilePart,
    ReasoningPart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
    file_data_text,
)
from .tokens import compact_json

__all__ = [
    "arun_tool_calls",
    "from_openai_message",
    "openai_summarizer",
    "run_tool_calls",
    "to_openai_messages",
]


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else compact_json(output)


def _data_url(media_type: str, data: str | bytes | None) -> str:
    """A file part's inline ``data`` as a data URL: raw bytes base64-encoded (as the part's JSON
    holds them), base64 text prefixed, a data URL as it is."""
    text = file_data_text(data)
    if text is None:  # a part without ``url`` has ``data`` (FilePart checks)
        raise InvalidInputError("a file part needs 'data' or 'url'")
    return text if text.startswith("data:") else f"data:{media_type};base64,{text}"


def _user_content(message: SessionMessage) -> str | list[dict[str, Any]]:
    files = [p for p in message.parts if isinstance(p, FilePart) and p.media_type.startswith("image/")]
    if not files:
        return message.text
    content: list[dict[str, Any]] = [{"type": "text", "text": p.text} for p in message.parts if isinstance(p, TextPart)]
    for part in files:
        url = part.url or _data_url(part.media_type, part.data)
        content.append({"type": "image_url", "image_url": {"url": url}})
    return content


def _tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    encoded = arguments if isinstance(arguments, str) else compact_json({} if arguments is None else arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}


def to_openai_messages(history: Iterable[SessionMessage], *, system_prompt: str | None = None) -> list[dict[str, Any]]:
    """Chat Completions messages for a history (the system prompt first when given and non-empty).

    Tool calls become ``tool_calls`` of the assistant message, tool results ``tool`` messages;
    AI SDK UI tool parts give both. Reasoning parts are not sent.
    """
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    for message in history:
        if message.role == "user":
            out.append({"role": "user", "content": _user_content(message)})
        elif message.role == "system":
            out.append({"role": "system", "content": message.text})
        elif message.role == "assistant":
            calls, results = [], []
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    calls.append(_tool_call(part.tool_call_id, part.tool_name, part.input))
                elif isinstance(part, ToolUIPart) and part.tool_call_id:
                    name = part.tool_name or part.type.removeprefix("tool-")
                    calls.append(_tool_call(part.tool_call_id, name, part.input))
                    if part.output is not None:
                        results.append(
                            {"role": "tool", "tool_call_id": part.tool_call_id, "content": _output_text(part.output)}
                        )
                elif isinstance(part, ToolResultPart):
                    results.append(
                        {"role": "tool", "tool_call_id": part.tool_call_id, "content": _output_text(part.output)}
                    )
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if calls:
                entry["tool_calls"] = calls
            if entry["content"] is not None or calls:
                out.append(entry)
            out.extend(results)
        else:
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    out.append(
                        {"role": "tool", "tool_call_id": part.tool_call_id, "content": _output_text(part.output)}
                    )
    return out


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return raw


def from_openai_message(message: Any, *, id: str | None = None) -> SessionMessage:
    """A ``SessionMessage`` for an OpenAI assistant reply (``choices[0].message``, object or dict).

    Tool-call arguments are stored parsed; arguments that are not valid JSON are kept as the raw
    string, so nothing the model said is lost.
    """
    parts: list[Any] = []
    reasoning = _get(message, "reasoning_content")
    if reasoning:
        parts.append(ReasoningPart(text=reasoning))
    content = _get(message, "content")
    if content:
        parts.append(TextPart(text=content))
    for call in _get(message, "tool_calls") or ():
        function = _get(call, "function")
        parts.append(
            ToolCallPart(
                tool_call_id=_get(call, "id"),
                tool_name=_get(function, "name"),
                input=_arguments(_get(function, "arguments")),
            )
        )
    return SessionMessage(id=id or f"msg_{uuid.uuid4().hex}", role="assistant", parts=parts)


def _calls(message: SessionMessage) -> list[ToolCallPart]:
    return [p for p in message.parts if isinstance(p, ToolCallPart)]


def _result(message: SessionMessage, call: ToolCallPart, output: str) -> SessionMessage:
    # Scoped by the reply's id: some servers reuse tool-call ids across turns ("call_0").
    return SessionMessage(
        id=f"{message.id}-{call.tool_call_id}-result",
        role="tool",
        parts=[ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=output)],
    )


def run_tool_calls(tools: Sequence[Any], message: SessionMessage) -> list[SessionMessage]:
    """Run every tool call of an assistant message and return one ``tool`` message per call
    (its id is derived from the message's id and the call's, so it is unique across turns).

    A call to an unknown tool gets an ``Error: ...`` result; tools never raise.
    """
    by_name = {tool.name: tool for tool in tools}
    results = []
    for call in _calls(message):
        tool = by_name.get(call.tool_name)
        output = tool.invoke(call.input) if tool else f"Error: unknown tool {call.tool_name!r}"
        results.append(_result(message, call, output))
    return results


async def arun_tool_calls(tools: Sequence[Any], message: SessionMessage) -> list[SessionMessage]:
    """Async twin of :func:`run_tool_calls`."""
    return await run_in_thread(run_tool_calls, tools, message)


def openai_summarizer(
    client: Any, model: str, **create_options: Any
) -> Callable[[str], str] | Callable[[str], Awaitable[str]]:
    """A compaction ``summarize`` function that asks ``model`` through an OpenAI client.

    With ``AsyncOpenAI`` the function is ``async``. Extra keyword arguments go to
    ``chat.completions.create`` (for example ``temperature=0``).
    """
    create = client.chat.completions.create

    def request(prompt: str) -> dict[str, Any]:
        return {"model": model, "messages": [{"role": "user", "content": prompt}], **create_options}

    def text(response: Any) -> str:
        content = response.choices[0].message.content
        if not isinstance(content, str):
            raise CompactionError("the summariser model returned no text")
        return content

    # ``AsyncOpenAI``'s ``create`` is a plain wrapper (argument checks) around an ``async def``.
    if inspect.iscoroutinefunction(inspect.unwrap(create)):

        async def asummarize(prompt: str) -> str:
            return text(await create(**request(prompt)))

        return asummarize

    def summarize(prompt: str) -> str:
        return text(create(**request(prompt)))

    return summarize
