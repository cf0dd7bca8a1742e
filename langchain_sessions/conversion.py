"""Lossless conversion between LangChain messages and ``SessionMessage`` (pure, no I/O).

What the other readers of a conversation need lives in typed parts: text, reasoning, files, tool
calls (``tool-call``) and tool results (``tool-result``). What only LangChain needs (the message
type, ``name``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``, ``artifact``,
``invalid_tool_calls``, list-shaped content...) is kept in ``metadata["langchain"]``, so
``to_langchain_message(to_session_message(m)) == m`` for every LangChain message whose fields
are JSON values.

Messages written by something else (the raw OpenAI helpers, the LlamaIndex adapter, AI SDK UI
messages) have no such record; they are converted to what a provider accepts, one stored
message possibly giving several LangChain messages (an AI SDK tool part holds a call and its
result). Such extra messages carry ``response_metadata["session_memory"]["source_id"]``.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolCall,
    ToolMessage,
    ToolMessageChunk,
)
from langchain_core.messages.tool import tool_call as make_tool_call

from sessions_core import (
    FilePart,
    InvalidInputError,
    ReasoningPart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
)
from sessions_core.integration import COMPACTION_ID_PREFIX, file_data_text, is_marker, is_tool_ui_type

__all__ = [
    "COMPACTION_SOURCE",
    "RECORD_KEY",
    "source_id",
    "to_langchain_message",
    "to_langchain_messages",
    "to_session_message",
    "to_session_messages",
]

RECORD_KEY = "langchain"
"""The ``SessionMessage.metadata`` key holding what only LangChain needs."""

COMPACTION_SOURCE = "session_memory.compaction"
"""``additional_kwargs["lc_source"]`` of a compaction summary shown to the model."""

_MARKER = "lcBlock"  # on a part made from a content block that needs a hint to be rebuilt
_WRAPPED = "langchain-block"  # a part holding a content block verbatim under "block"
_DERIVED = "session_memory"

_CLASSES: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
    "chat": ChatMessage,
    "function": FunctionMessage,
    "HumanMessageChunk": HumanMessageChunk,
    "AIMessageChunk": AIMessageChunk,
    "SystemMessageChunk": SystemMessageChunk,
    "ToolMessageChunk": ToolMessageChunk,
    "ChatMessageChunk": ChatMessageChunk,
    "FunctionMessageChunk": FunctionMessageChunk,
}
_ROLES = {
    "human": "user",
    "HumanMessageChunk": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
    "function": "tool",
    "FunctionMessageChunk": "tool",
}
_CHAT_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
}
_FILE_BLOCKS = ("image", "audio", "video", "file")
_CORE_TYPES = {"text", "reasoning", "file", "tool-call", "tool-result"}


# -- LangChain -> SessionMessage --------------------------------------------------------------


def to_session_message(message: BaseMessage) -> SessionMessage:
    """The ``SessionMessage`` storing ``message`` (a message without an id gets a uuid4 id).

    Raises ``TypeError`` for what is not a storable message (a ``RemoveMessage``, a dict...).
    """
    if not isinstance(message, BaseMessage):
        raise TypeError(f"expected a LangChain message, got {type(message).__name__}")
    kind = message.type
    if kind not in _CLASSES:
        raise TypeError(f"a {type(message).__name__} cannot be stored")
    role = _ROLES.get(kind) or _CHAT_ROLES.get(getattr(message, "role", ""), "user")
    record: dict[str, Any] = {"type": kind}
    parts: list[dict[str, Any]] = []
    omit = {"content", "id", "type"}

    if role == "tool" and isinstance(message, ToolMessage):
        parts.append(
            {
                "type": "tool-result",
                "tool_call_id": message.tool_call_id,
                "tool_name": message.name,
                "output": _jsonable(message.content),
                "is_error": message.status == "error",
            }
        )
        omit |= {"tool_call_id", "name", "status"}
        if isinstance(message.content, list):
            record["content"] = "list"
    else:
        parts.extend(_content_parts(message.content))
        if isinstance(message.content, list):
            record["content"] = "list"

    calls = getattr(message, "tool_calls", None)
    if calls:
        ids = [call.get("id") for call in calls]
        if all(isinstance(i, str) for i in ids) and len(set(ids)) == len(ids):
            omit.add("tool_calls")
        for call in calls:
            if isinstance(call.get("id"), str):
                parts.append(
                    {
                        "type": "tool-call",
                        "tool_call_id": call["id"],
                        "tool_name": call["name"],
                        "input": _jsonable(call.get("args", {})),
                    }
                )

    fields = type(message).model_fields
    for key, value in message.model_dump().items():
        if key in omit:
            continue
        field = fields.get(key)
        if field is not None and not field.is_required() and value == field.get_default(call_default_factory=True):
            continue
        record[key] = _jsonable(value)

    return SessionMessage.model_validate(
        {
            "id": message.id or str(uuid.uuid4()),
            "role": role,
            "parts": parts,
            "metadata": {RECORD_KEY: record},
        }
    )


def to_session_messages(messages: Iterable[BaseMessage]) -> list[SessionMessage]:
    """``to_session_message`` for each message."""
    return [to_session_message(m) for m in messages]


def _content_parts(content: str | list[Any]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [_block_part(block) for block in content]


def _reserved(part_type: type) -> set[str]:
    names = {_MARKER}
    for name, field in part_type.model_fields.items():
        names.add(name)
        if field.alias:
            names.add(field.alias)
    return names


_FILE_KEYS = _reserved(FilePart)


def _block_part(block: Any) -> dict[str, Any]:
    """One content block as a part, rebuilt exactly by ``_part_block``."""
    if isinstance(block, str):
        return {"type": "text", "text": block, _MARKER: "str"}
    if not isinstance(block, Mapping) or _MARKER in block:
        return {"type": _WRAPPED, "block": _jsonable(block)}
    block = dict(block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return _jsonable(block)
    if kind == "reasoning" and "text" not in block and isinstance(block.get("reasoning", ""), str):
        rest = {k: v for k, v in block.items() if k != "reasoning"}
        if "reasoning" in block:
            rest["text"] = block["reasoning"]
        return _jsonable(rest)
    if kind in _FILE_BLOCKS and isinstance(block.get("mime_type"), str):
        rest = {k: v for k, v in block.items() if k not in ("type", "mime_type", "base64", "url")}
        source = [k for k in ("base64", "url") if k in block]
        if len(source) == 1 and isinstance(block[source[0]], str) and not rest.keys() & _FILE_KEYS:
            where = "data" if source[0] == "base64" else "url"
            return _jsonable(
                {"type": "file", "media_type": block["mime_type"], where: block[source[0]], _MARKER: kind, **rest}
            )
    if isinstance(kind, str) and kind not in _CORE_TYPES and not is_tool_ui_type(kind):
        return _jsonable(block)
    return {"type": _WRAPPED, "block": _jsonable(block)}


def _jsonable(value: Any) -> Any:
    """``value`` if it is made of JSON values, else a JSON rendering of it (models are dumped,
    other objects become their ``repr``)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


# -- SessionMessage -> LangChain --------------------------------------------------------------


def to_langchain_message(message: SessionMessage | Mapping[str, Any]) -> BaseMessage:
    """The LangChain message for a stored message (exactly the one written, for a message
    written by this adapter). ``ValueError`` when it stands for several LangChain messages."""
    converted = to_langchain_messages([message])
    if len(converted) != 1:
        raise InvalidInputError(
            f"message {_id_of(message)!r} converts to {len(converted)} LangChain messages; use to_langchain_messages"
        )
    return converted[0]


def to_langchain_messages(messages: Iterable[SessionMessage | Mapping[str, Any]]) -> list[BaseMessage]:
    """LangChain messages for a history, in order (head markers of moved branches left out)."""
    out: list[BaseMessage] = []
    for message in messages:
        if not isinstance(message, SessionMessage):
            message = SessionMessage.model_validate(message)
        if message.role == "system" and is_marker(message):
            continue
        record = message.metadata.get(RECORD_KEY)
        if isinstance(record, Mapping) and record.get("type") in _CLASSES:
            out.append(_from_record(message, record))
        else:
            out.extend(_from_foreign(message))
    return out


def source_id(message: BaseMessage) -> str | None:
    """The stored id a LangChain message stands for: its own id, or for an extra message made
    from a foreign stored message, that message's id."""
    derived = message.response_metadata.get(_DERIVED) if isinstance(message.response_metadata, dict) else None
    if isinstance(derived, Mapping) and isinstance(derived.get("source_id"), str):
        return derived["source_id"]
    return message.id


def _id_of(message: Any) -> Any:
    return message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)


def _from_record(message: SessionMessage, record: Mapping[str, Any]) -> BaseMessage:
    kind = record["type"]
    fields = {k: v for k, v in record.items() if k not in ("type", "content")}
    as_list = record.get("content") == "list"
    results = [p for p in message.parts if isinstance(p, ToolResultPart)]
    if kind in ("tool", "ToolMessageChunk") and results:
        result = results[0]
        content = result.output
        if not (isinstance(content, list) if as_list else isinstance(content, str)):
            content = _output_text(content) if not as_list else [content]
        fields.setdefault("tool_call_id", result.tool_call_id)
        fields.setdefault("name", result.tool_name)
        fields.setdefault("status", "error" if result.is_error else "success")
    else:
        blocks = [p for p in message.parts if not isinstance(p, (ToolCallPart, ToolResultPart))]
        if as_list:
            content = [_part_block(p) for p in blocks]
        else:
            content = "".join(p.text for p in blocks if isinstance(p, TextPart))
    if kind in ("ai", "AIMessageChunk") and "tool_calls" not in fields:
        fields["tool_calls"] = [
            make_tool_call(name=p.tool_name, args=p.input if isinstance(p.input, dict) else {}, id=p.tool_call_id)
            for p in message.parts
            if isinstance(p, ToolCallPart)
        ]
    return _CLASSES[kind](content=content, id=message.id, **fields)


def _part_block(part: Any) -> Any:
    """The content block a part was made from (see ``_block_part``): a string, a dict, or a
    wrapped block exactly as it was given."""
    data = part.model_dump(exclude_unset=True)
    if part.type == _WRAPPED:
        return (part.model_extra or {}).get("block")
    marker = data.pop(_MARKER, None)
    if isinstance(part, TextPart):
        return part.text if marker == "str" else data
    if isinstance(part, ReasoningPart):
        if "text" in data:
            data["reasoning"] = data.pop("text")
        return data
    if isinstance(part, FilePart):
        return _file_block(part, marker, data)
    return data


def _file_block(part: FilePart, kind: str | None, data: dict[str, Any]) -> dict[str, Any]:
    """A standard LangChain data block: of type ``kind`` (a block this adapter stored) or, for a
    foreign part, of the type its media type names, with ``filename`` under ``extras``."""
    rest = {k: v for k, v in data.items() if k not in ("type", "media_type", "data", "url", "filename")}
    payload = file_data_text(part.data)
    if kind is None:
        top = part.media_type.split("/", 1)[0]
        kind = top if top in ("image", "audio", "video") else "file"
        if part.filename is not None:
            rest["extras"] = {**rest.get("extras", {}), "filename": part.filename}
        if payload is not None and payload.startswith("data:") and "," in payload:
            payload = payload.split(",", 1)[1]
    block: dict[str, Any] = {"type": kind, "mime_type": part.media_type}
    if payload is not None:
        block["base64"] = payload
    else:
        block["url"] = part.url
    return {**block, **rest}


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=str)


def _from_foreign(message: SessionMessage) -> list[BaseMessage]:
    """A message written without a LangChain record: what a provider accepts."""
    if message.id.startswith(COMPACTION_ID_PREFIX):
        return [AIMessage(content=message.text, id=message.id, additional_kwargs={"lc_source": COMPACTION_SOURCE})]
    content = _foreign_content(message)
    if message.role == "user":
        return [HumanMessage(content=content, id=message.id)]
    if message.role == "system":
        return [SystemMessage(content=message.text, id=message.id)]
    calls: list[ToolCall] = []
    results: list[ToolMessage] = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            calls.append(make_tool_call(name=part.tool_name, args=_args(part.input), id=part.tool_call_id))
        elif isinstance(part, ToolResultPart):
            results.append(_tool_message(part.tool_call_id, part.tool_name, part.output, part.is_error))
        elif isinstance(part, ToolUIPart) and part.tool_call_id:
            name = part.tool_name or (part.type[5:] if part.type.startswith("tool-") else "tool")
            calls.append(make_tool_call(name=name, args=_args(part.input), id=part.tool_call_id))
            state = part.state or ""
            if part.output is not None or state.startswith("output-"):
                error = state == "output-error"
                output = (part.model_extra or {}).get("errorText") if error and part.output is None else part.output
                results.append(_tool_message(part.tool_call_id, name, output, error))
    out: list[BaseMessage] = []
    if message.role == "assistant":
        out.append(AIMessage(content=content, tool_calls=calls, id=message.id))
    for result in results:
        if out:
            result.id = f"{message.id}#{result.tool_call_id}"
            result.response_metadata[_DERIVED] = {"source_id": message.id}
        else:
            result.id = message.id
        out.append(result)
    return out


def _args(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {} if value is None else {"input": value}


def _tool_message(call_id: str, name: str | None, output: Any, error: bool) -> ToolMessage:
    return ToolMessage(
        content=_output_text(output) if output is not None else "",
        tool_call_id=call_id,
        name=name,
        status="error" if error else "success",
    )


def _foreign_content(message: SessionMessage) -> str | list[Any]:
    """Text and files as content; reasoning and parts a provider would not take are left out."""
    texts = [p for p in message.parts if isinstance(p, TextPart)]
    files = [p for p in message.parts if isinstance(p, FilePart)]
    if not files:
        return "\n".join(p.text for p in texts)
    blocks: list[Any] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, FilePart):
            blocks.append(_file_block(part, None, part.model_dump(exclude_unset=True)))
    return blocks


def is_summary(message: BaseMessage) -> bool:
    """Whether ``message`` is a compaction summary standing for a range of the history."""
    return isinstance(message.id, str) and message.id.startswith(COMPACTION_ID_PREFIX)
