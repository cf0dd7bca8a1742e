"""Lossless conversion between LlamaIndex ``ChatMessage`` and ``SessionMessage``.

A ``ChatMessage`` becomes one ``SessionMessage`` whose parts carry the portable meaning
(text, reasoning, tool calls and results, files) so other frameworks can read it, and whose
``metadata["llamaindex"]`` / part extra field ``llamaindex`` keep whatever LlamaIndex needs to
rebuild the exact message: the original role (``developer``, ``function``, ``chatbot``,
``model``), ``additional_kwargs`` (JSON-serialised the way ``ChatMessage`` serialises them),
thinking-block details, media blocks and the blocks without a portable meaning (cache points,
citations) as ``data-llamaindex-*`` parts.

Tool calls may come as ``ToolCallBlock``s, as ``additional_kwargs["tool_calls"]`` (older core,
some providers), or both; each call is stored once. Tool results are ``role="tool"`` messages
with ``additional_kwargs["tool_call_id"]`` (or ``"call_id"``).

Reading a message written by another framework gives the LlamaIndex shape for it: an
assistant message holding tool results (AI SDK style) becomes the assistant message followed by
one ``tool`` message per result, so the chat messages of a history (:func:`to_chat_messages`)
may outnumber its stored messages; :func:`to_chat_message` converts a message that maps to one.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from pydantic import TypeAdapter

from sessions_core import (
    FilePart,
    InvalidInputError,
    ReasoningPart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
    UnknownPart,
    parse_message,
)
from sessions_core.integration import file_data_text, is_marker

__all__ = [
    "LLAMAINDEX_KEY",
    "from_chat_message",
    "from_chat_messages",
    "to_chat_message",
    "to_chat_messages",
]

LLAMAINDEX_KEY = "llamaindex"
"""Metadata key (message) and extra field (part) holding what only LlamaIndex needs."""

_DATA_PREFIX = "data-llamaindex-"
_ROLE_MAP: dict[str, Literal["system", "user", "assistant", "tool"]] = {  # to SessionMessage.role
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}
_MEDIA = {
    "image": ("image", "image_mimetype", "image/*"),
    "audio": ("audio", None, "audio/*"),
    "video": ("video", "video_mimetype", "video/*"),
    "document": ("data", "document_mimetype", "application/octet-stream"),
}
# cast: a FieldInfo's annotation is optional in pydantic's types, and set for a declared field
_BLOCK_ADAPTER: TypeAdapter[Any] = TypeAdapter(cast(Any, ChatMessage.model_fields["blocks"].annotation))


# -- ChatMessage -> SessionMessage ------------------------------------------------------------


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _kwargs_json(message: ChatMessage) -> dict[str, Any]:
    """``additional_kwargs`` as ``ChatMessage`` serialises them (models to dicts, bytes to
    base64); a provider object pydantic cannot serialise is stored as its ``str``, never an
    error (a message must always be storable)."""
    try:
        dumped = message.model_dump(mode="json", include={"additional_kwargs"})
    except Exception:
        dumped = message.model_dump(include={"additional_kwargs"})
    return _json_safe(dumped.get("additional_kwargs") or {})


def _role_value(role: Any) -> str:
    return role.value if isinstance(role, MessageRole) else str(role)


def _text(blocks: Sequence[Any]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def _block_dump(block: Any) -> dict[str, Any]:
    return _json_safe(block.model_dump(mode="json"))


def _media_part(block: Any) -> FilePart:
    kind = block.block_type
    data_field, mime_field, fallback = _MEDIA[kind]
    media_type = (getattr(block, mime_field, None) if mime_field else None) or (
        f"audio/{block.format}" if kind == "audio" and getattr(block, "format", None) else fallback
    )
    raw = getattr(block, data_field, None)
    data = raw.decode("ascii", "replace") if isinstance(raw, (bytes, bytearray)) else None
    url = None if data else (str(block.url) if block.url else None)
    if data is None and url is None:
        url = Path(str(block.path)).resolve().as_uri() if block.path else "about:blank"
    filename = getattr(block, "title", None) or (Path(str(block.path)).name if block.path else None)
    part = FilePart(media_type=media_type, data=data, url=url, filename=filename)
    setattr(part, LLAMAINDEX_KEY, {"block": _block_dump(block)})
    return part


def _block_part(block: Any, call_id: str) -> Any:
    if isinstance(block, TextBlock):
        return TextPart(text=block.text)
    if isinstance(block, ThinkingBlock):
        part = ReasoningPart(text=block.content)
        extra = {}
        if block.num_tokens is not None:
            extra["num_tokens"] = block.num_tokens
        if block.additional_information:
            extra["additional_information"] = _json_safe(block.additional_information)
        if extra:
            setattr(part, LLAMAINDEX_KEY, extra)
        return part
    if isinstance(block, ToolCallBlock):
        part = ToolCallPart(
            tool_call_id=block.tool_call_id or call_id,
            tool_name=block.tool_name,
            input=_json_safe(block.tool_kwargs),
        )
        if block.tool_call_id is None:
            setattr(part, LLAMAINDEX_KEY, {"tool_call_id": None})
        return part
    if isinstance(block, (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)):
        return _media_part(block)
    # Cache points, citable and citation blocks: no portable meaning, kept verbatim.
    return UnknownPart.model_validate({"type": _DATA_PREFIX + block.block_type, "data": _block_dump(block)})


def _kwargs_tool_calls(kwargs: Mapping[str, Any]) -> list[tuple[str | None, str, Any]]:
    """``(id, name, arguments)`` of ``additional_kwargs["tool_calls"]`` (OpenAI shape)."""
    calls = []
    for call in kwargs.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = given if isinstance(given := call.get("function"), Mapping) else {}
        name = function.get("name") or call.get("name")
        if not name:
            continue
        arguments = function.get("arguments", call.get("arguments"))
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):  # not JSON: kept as the raw string the model sent
                arguments = json.loads(arguments) if arguments.strip() else {}
        calls.append((call.get("id"), name, arguments))
    return calls


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _result_id(kwargs: Mapping[str, Any]) -> str | None:
    value = kwargs.get("tool_call_id") or kwargs.get("call_id")
    return value if isinstance(value, str) and value else None


def from_chat_message(
    message: ChatMessage,
    *,
    id: str | None = None,
    tool_names: Mapping[str, str] | None = None,
) -> SessionMessage:
    """The ``SessionMessage`` for a ``ChatMessage`` (a new random id unless ``id`` is given).

    ``tool_names`` maps tool-call ids to tool names, to name the tool of a result message
    (LlamaIndex tool messages carry only the call id).
    """
    message_id = id or str(uuid.uuid4())
    role = _role_value(message.role)
    kwargs = _kwargs_json(message)
    metadata: dict[str, Any] = {}
    if role != _ROLE_MAP.get(role) or role not in _ROLE_MAP:
        metadata["role"] = role
    if kwargs:
        metadata["additional_kwargs"] = kwargs
    stored_role = _ROLE_MAP.get(role, "user")

    result_id = _result_id(kwargs) if stored_role == "tool" else None
    if result_id is not None:
        output = _text(message.blocks)
        part = ToolResultPart(
            tool_call_id=result_id,
            tool_name=_str_or_none(kwargs.get("name")) or (tool_names or {}).get(result_id),
            output=output,
        )
        blocks = list(message.blocks)
        if not (len(blocks) == 1 and isinstance(blocks[0], TextBlock)):
            setattr(part, LLAMAINDEX_KEY, {"blocks": [_block_dump(b) for b in blocks]})
        parts: list[Any] = [part]
    else:
        # A call without an id gets one derived from the message id (stable across conversions).
        parts = [_block_part(block, f"{message_id}-call-{i}") for i, block in enumerate(message.blocks)]
        if stored_role == "assistant":
            known = {p.tool_call_id for p in parts if isinstance(p, ToolCallPart)}
            for i, (call_id, name, arguments) in enumerate(_kwargs_tool_calls(kwargs)):
                if call_id in known:
                    continue
                part = ToolCallPart(tool_call_id=call_id or f"{message_id}-kwcall-{i}", tool_name=name, input=arguments)
                setattr(part, LLAMAINDEX_KEY, {"source": "additional_kwargs"})
                parts.append(part)
    return SessionMessage(
        id=message_id,
        role=stored_role,
        parts=parts,
        metadata={LLAMAINDEX_KEY: metadata} if metadata else {},
    )


def from_chat_messages(messages: Iterable[ChatMessage]) -> list[SessionMessage]:
    """Convert a batch (for example an agent turn), naming each tool result after its call."""
    names: dict[str, str] = {}
    converted = []
    for message in messages:
        session_message = from_chat_message(message, tool_names=names)
        for part in session_message.parts:
            if isinstance(part, ToolCallPart):
                names[part.tool_call_id] = part.tool_name
        converted.append(session_message)
    return converted


# -- SessionMessage -> ChatMessage ------------------------------------------------------------


def _extra(part: Any) -> dict[str, Any]:
    value = (part.model_extra or {}).get(LLAMAINDEX_KEY)
    return value if isinstance(value, dict) else {}


def _output_text(output: Any) -> str:
    if output is None:
        return ""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, separators=(",", ":"))


def _file_block(part: FilePart) -> Any:
    saved = _extra(part).get("block")
    if isinstance(saved, dict):
        return _BLOCK_ADAPTER.validate_python([saved])[0]
    media_type = part.media_type or ""
    data = file_data_text(part.data)
    if data and data.startswith("data:") and ";base64," in data:
        data = data.split(";base64,", 1)[1]
    inline = data.encode("ascii") if data else None
    if media_type.startswith("image/"):
        mime = None if media_type == "image/*" else media_type
        return ImageBlock(image=inline, url=None if inline else part.url, image_mimetype=mime)
    if media_type.startswith("audio/"):
        fmt = media_type.split("/", 1)[1]
        return AudioBlock(audio=inline, url=None if inline else part.url, format=None if fmt == "*" else fmt)
    if media_type.startswith("video/"):
        mime = None if media_type == "video/*" else media_type
        return VideoBlock(video=inline, url=None if inline else part.url, video_mimetype=mime)
    return DocumentBlock(
        data=inline, url=None if inline else part.url, title=part.filename, document_mimetype=media_type or None
    )


def _part_block(part: Any) -> Any | None:
    if isinstance(part, TextPart):
        return TextBlock(text=part.text)
    if isinstance(part, ReasoningPart):
        extra = _extra(part)
        return ThinkingBlock(
            content=part.text,
            num_tokens=extra.get("num_tokens"),
            additional_information=extra.get("additional_information") or {},
        )
    if isinstance(part, ToolCallPart):
        extra = _extra(part)
        if extra.get("source") == "additional_kwargs":
            return None  # restored with additional_kwargs["tool_calls"]
        arguments = part.input if isinstance(part.input, (dict, str)) else ({} if part.input is None else part.input)
        if not isinstance(arguments, (dict, str)):
            arguments = json.dumps(arguments)
        call_id = None if "tool_call_id" in extra and extra["tool_call_id"] is None else part.tool_call_id
        return ToolCallBlock(tool_call_id=call_id, tool_name=part.tool_name, tool_kwargs=arguments)
    if isinstance(part, FilePart):
        return _file_block(part)
    if isinstance(part, UnknownPart) and part.type.startswith(_DATA_PREFIX):
        data = (part.model_extra or {}).get("data")
        if isinstance(data, dict):
            return _BLOCK_ADAPTER.validate_python([data])[0]
    return None  # AI SDK UI parts without a LlamaIndex meaning (step-start, sources...)


def _role(message: SessionMessage, li: Mapping[str, Any]) -> MessageRole:
    original = li.get("role")
    if isinstance(original, str) and original in MessageRole._value2member_map_:
        return MessageRole(original)
    return MessageRole(message.role)


def _tool_message(part: Any, kwargs: Mapping[str, Any] | None = None) -> ChatMessage:
    saved = _extra(part).get("blocks")
    if isinstance(saved, list):
        blocks = _BLOCK_ADAPTER.validate_python(saved)
    else:
        blocks = [TextBlock(text=_output_text(part.output))]
    additional = dict(kwargs) if kwargs is not None else {"tool_call_id": part.tool_call_id}
    return ChatMessage(role=MessageRole.TOOL, blocks=blocks, additional_kwargs=additional)


def to_chat_messages(messages: Iterable[SessionMessage | Mapping[str, Any]] | SessionMessage) -> list[ChatMessage]:
    """The ``ChatMessage``s of stored messages (``SessionMessage``s or dicts of their shape, for
    example ``session.get_history()``), the inverse of :func:`from_chat_messages`: one for each
    message written through LlamaIndex, a tool message per result for tool results kept in
    another framework's shape, none for a branch's head marker. One ``SessionMessage`` alone is
    taken as a list of one (the form of version 0.1)."""
    if isinstance(messages, SessionMessage):
        messages = [messages]
    return [
        chat
        for message in messages
        for chat in _chat_messages_of(message if type(message) is SessionMessage else parse_message(message))
    ]


def _chat_messages_of(message: SessionMessage) -> list[ChatMessage]:
    if message.role == "system" and is_marker(message):
        return []
    li = message.metadata.get(LLAMAINDEX_KEY)
    li = li if isinstance(li, Mapping) else {}
    saved_kwargs = li.get("additional_kwargs")
    kwargs = dict(saved_kwargs) if isinstance(saved_kwargs, Mapping) else None
    role = _role(message, li)

    results = [p for p in message.parts if isinstance(p, ToolResultPart)]
    if message.role == "tool" and results:
        if len(results) == 1 and len(message.parts) == 1:
            chat = _tool_message(results[0], kwargs)
            chat.role = role
            return [chat]
        return [_tool_message(p) for p in results]

    blocks: list[Any] = []
    trailing: list[ChatMessage] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            trailing.append(_tool_message(part))
            continue
        if isinstance(part, ToolUIPart) and part.tool_call_id:
            name = part.tool_name or part.type.removeprefix("tool-")
            arguments = part.input if isinstance(part.input, (dict, str)) else {}
            blocks.append(ToolCallBlock(tool_call_id=part.tool_call_id, tool_name=name, tool_kwargs=arguments))
            if part.output is not None or (part.state or "").startswith("output-"):
                trailing.append(
                    ChatMessage(
                        role=MessageRole.TOOL,
                        content=_output_text(part.output),
                        additional_kwargs={"tool_call_id": part.tool_call_id},
                    )
                )
            continue
        block = _part_block(part)
        if block is not None:
            blocks.append(block)
    chat = ChatMessage(role=role, blocks=blocks, additional_kwargs=kwargs or {})
    return [chat, *trailing]


def to_chat_message(message: SessionMessage | Mapping[str, Any]) -> ChatMessage:
    """The single ``ChatMessage`` for a stored message, the inverse of :func:`from_chat_message`;
    raises ``ValueError`` for a head marker or a message that maps to several chat messages."""
    message = parse_message(message)
    converted = _chat_messages_of(message)
    if len(converted) != 1:
        raise InvalidInputError(f"message {message.id!r} maps to {len(converted)} chat messages; use to_chat_messages")
    return converted[0]
