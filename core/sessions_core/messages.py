"""Message and part models (pure, no I/O).

A ``SessionMessage`` is structurally an AI SDK ``UIMessage``: ``{id, role, parts, createdAt?, metadata?}``.
Attributes are snake_case; camelCase JSON is accepted on input and produced by
``model_dump(by_alias=True)``. Unknown part types and extra fields are kept verbatim, so a
valid message dict read back from storage equals what was written.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ._time import EPOCH
from .errors import InvalidInputError, MessageValidationError
from .text import lone_surrogate, surrogate_problem

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")

COMPACTION_ID_PREFIX = "compaction_"
MARKER_KEY = "sessionsMarker"


# NaN and the infinities are written as the JSON extensions ``NaN``, ``Infinity`` and
# ``-Infinity`` (which Python's json module and pydantic read back), not as null.
_KEEP_NON_FINITE = "constants"


class _PartBase(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        ser_json_inf_nan=_KEEP_NON_FINITE,
    )

    def model_post_init(self, context: Any, /) -> None:
        # ``type`` always belongs to the dumped part, even when it came from the default.
        self.__pydantic_fields_set__.add("type")


class TextPart(_PartBase):
    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_PartBase):
    type: Literal["reasoning"] = "reasoning"
    text: str | None = None


class ToolCallPart(_PartBase):
    """A model's request to run a tool."""

    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    input: Any = None


class ToolResultPart(_PartBase):
    """The result of a tool call, matched to it by ``tool_call_id``."""

    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str | None = None
    output: Any = None
    is_error: bool = False


class FilePart(_PartBase):
    """A file, inline (``data``: bytes, base64 or a data URL) or by ``url``. Inline payloads are
    stored once, outside the message row, and read back exactly as given."""

    type: Literal["file"] = "file"
    media_type: str
    data: str | bytes | None = None
    url: str | None = None
    filename: str | None = None

    @field_serializer("data", when_used="json")
    def _standard_base64(self, data: str | bytes | None) -> str | None:
        return file_data_text(data)

    @model_validator(mode="after")
    def _data_or_url(self) -> FilePart:
        if self.data is None and self.url is None:
            raise InvalidInputError("a file part needs 'data' or 'url'")  # pydantic reports it as a ValueError
        return self


def file_data_text(data: str | bytes | None) -> str | None:
    """A file part's inline ``data`` as text, as its JSON holds it: bytes base64-encoded, a
    string (base64 or a data URL) as it is."""
    return base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else data


class ToolUIPart(_PartBase):
    """An AI SDK UI tool part (``tool-<name>`` or ``dynamic-tool``): call and result in one part."""

    type: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    state: str | None = None
    input: Any = None
    output: Any = None


class UnknownPart(_PartBase):
    """Any other part type (``step-start``, ``source-url``, ``data-*``...), kept verbatim."""

    type: str


def is_tool_ui_type(part_type: Any) -> bool:
    return isinstance(part_type, str) and (
        part_type == "dynamic-tool" or (part_type.startswith("tool-") and part_type not in ("tool-call", "tool-result"))
    )


_TAGGED = {"text", "reasoning", "tool-call", "tool-result", "file"}
_UNION_TAGS = _TAGGED | {"tool-ui", "unknown"}


def _open_tag(value: Any) -> str | None:
    """The tag of a part whose type is open (``tool-<name>``, ``dynamic-tool``, any other); ``None``
    (no member) for a type the closed union owns, so that an invalid text part is not kept as an
    unknown one."""
    if type(value) is dict:
        part_type = value.get("type")
    else:
        part_type = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    if part_type in _TAGGED:
        return None
    return "tool-ui" if is_tool_ui_type(part_type) else "unknown"


# The types the AI SDK fixes are told apart by the ``type`` key itself (pydantic-core reads it in
# place, also from JSON); only the open types need a function, which pydantic-core calls with
# the part as Python objects. Every part is a member of exactly one of the two unions.
_ClosedPart = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolResultPart | FilePart, Field(discriminator="type")
]
_OpenPart = Annotated[
    Annotated[ToolUIPart, Tag("tool-ui")] | Annotated[UnknownPart, Tag("unknown")],
    Discriminator(_open_tag),
]
Part = Annotated[_ClosedPart | _OpenPart, Field(union_mode="left_to_right")]


def _as_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


class SessionMessage(BaseModel):
    """One message of a conversation tree."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        ser_json_inf_nan=_KEEP_NON_FINITE,
    )

    id: str = Field(min_length=1)
    role: Role
    parts: list[Part]
    created_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _as_utc(value)

    @property
    def text(self) -> str:
        """The text parts joined with a newline."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    def to_dict(self) -> dict[str, Any]:
        """The AI SDK (camelCase) JSON shape of this message."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


MessageInput = SessionMessage | Mapping[str, Any]


def _is_member(piece: Any) -> bool:
    """Whether an error location's piece names a member of the part union."""
    return isinstance(piece, str) and piece.startswith("tagged-union[")


def _field_path(loc: tuple[Any, ...]) -> list[str]:
    """The error location without the union member and the tag pydantic put after a part's index."""
    path: list[str] = []
    after_part = False
    for piece in loc:
        if _is_member(piece):
            continue
        if not (after_part and piece in _UNION_TAGS):
            path.append(str(piece))
        after_part = isinstance(piece, int)
    return path


def _part_errors(error: ValidationError) -> list[Any]:
    """The errors of ``error``, each part's from the one union it belongs to (the first whose
    error is not "not my tag"); a part that belongs to neither keeps its tag errors."""
    items = error.errors(include_url=False)
    owner: dict[tuple[Any, ...], str] = {}
    for item in items:
        part, member = _member(item["loc"])
        if member is not None and item["type"] not in _NOT_MY_TAG:
            owner.setdefault(part, member)
    kept = []
    for item in items:
        part, member = _member(item["loc"])
        if member is None or part not in owner or member == owner[part]:
            kept.append(item)
    return kept


_NOT_MY_TAG = frozenset({"union_tag_invalid", "union_tag_not_found"})


def _member(loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], str | None]:
    """The location of the part and the union member an error comes from (``None``: no union)."""
    for i, piece in enumerate(loc):
        if _is_member(piece):
            return loc[:i], piece
    return loc, None


def _describe(error: ValidationError) -> str:
    items = _part_errors(error)
    problems = []
    for item in items[:5]:
        where = ".".join(_field_path(item["loc"])) or "message"
        problems.append(f"{where}: {item['msg']}")
    more = len(items) - len(problems)
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


_validate_python = SessionMessage.__pydantic_validator__.validate_python  # ``model_validate`` without its frame


def parse_message(message: MessageInput) -> SessionMessage:
    """Validate a ``SessionMessage`` or a dict of its shape; raise ``MessageValidationError``."""
    if isinstance(message, SessionMessage):
        return message
    if not isinstance(message, Mapping):
        raise MessageValidationError(
            f"invalid message: expected a SessionMessage or a dict, got {type(message).__name__}"
        )
    try:
        return _validate_python(message)
    except ValidationError as error:
        ident = message.get("id")
        label = f"invalid message {ident!r}" if isinstance(ident, str) and ident else "invalid message"
        for detail in error.errors():
            value = detail.get("input")
            if detail["type"] == "string_unicode" and isinstance(value, str):
                position = lone_surrogate(value)
                if position is not None:  # say which field, as for the strings that validate
                    field = ".".join(str(step) for step in detail["loc"]) or "message"
                    raise MessageValidationError(f"{label}: {surrogate_problem(field, value, position)}") from None
        raise MessageValidationError(f"{label}: {_describe(error)}") from None


def is_marker(message: SessionMessage) -> bool:
    """Whether ``message`` is a head marker (``sessions_core.branching``): a ``system`` message
    with no parts that only moves the active branch, never shown to a model or a user."""
    return message.role == "system" and not message.parts and MARKER_KEY in message.metadata


def text_content(message: SessionMessage) -> str:
    """What the full-text index holds: the text parts joined with one space."""
    return " ".join(p.text for p in message.parts if isinstance(p, TextPart))


SEARCH_TOOLS = frozenset({"session_search", "search_context"})
"""The memory tools whose results are what a search found elsewhere: semantic recall does not
embed them again (each search would otherwise find the last one's answer)."""


def _tool_of(part: ToolResultPart | ToolUIPart) -> str | None:
    if part.tool_name:
        return part.tool_name
    return part.type[5:] if part.type.startswith("tool-") and part.type != "tool-result" else None


def recall_text(message: SessionMessage) -> str:
    """What semantic recall embeds: the text parts and every tool result (but those of
    :data:`SEARCH_TOOLS`), in order (a result that is not a string as JSON), one blank line apart."""
    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif (
            isinstance(part, (ToolResultPart, ToolUIPart))
            and part.output is not None
            and _tool_of(part) not in SEARCH_TOOLS
        ):
            output = part.output
            pieces.append(output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str))
    return "\n\n".join(piece for piece in pieces if piece.strip())


_to_json = SessionMessage.__pydantic_serializer__.to_json
# A run of digits longer than ``int`` reads back (``sys.get_int_max_str_digits``' default).
_OVERLONG_DIGITS = re.compile(r"(?<!\d)\d{4301}")  # from a run's start only: each digit of it counted once
_SURROGATE = re.compile("[\ud800-\udfff]")
_LONG_TEXT = 1 << 20
"""Characters of a text part above which the json module writes the message's JSON: pydantic-core
would keep a UTF-8 copy of the text in it, and hold the JSON as bytes and as text at once."""


def storage_json(message: SessionMessage) -> str:
    """The stored JSON of a message: its camelCase shape without ``createdAt`` (a column of its own)."""
    try:
        if _holds_long_text(message):
            return _written_by_json_module(message)
        data = _to_json(message, by_alias=True, exclude_unset=True, exclude={"created_at"}).decode()
        if "\ufffd" in data:  # pydantic writes a key holding a lone surrogate as U+FFFD: refuse it
            _refuse_surrogates(message)
        if len(data) <= 4301 or not _OVERLONG_DIGITS.search(data):
            return data
        # An integer too long to read back, or only digits in a string: the json module,
        # which writes the same JSON as pydantic-core, tells them apart (it refuses the first).
        return _written_by_json_module(message)
    except MessageValidationError:
        raise
    except (ValueError, RecursionError) as error:  # nested deeper than can be written, an int too long...
        if "surrogates not allowed" in str(error):
            _refuse_surrogates(message)
        depth = json_depth(message)
        if depth > MAX_JSON_DEPTH:
            raise MessageValidationError(
                f"invalid message {message.id!r}: cannot be stored as JSON: nested {depth} levels deep"
                " (objects and lists holding something, the message itself included);"
                f" a stored message may nest at most {MAX_JSON_DEPTH} levels"
            ) from None
        raise MessageValidationError(f"invalid message {message.id!r}: cannot be stored as JSON ({error})") from None


def _holds_long_text(message: SessionMessage) -> bool:
    for part in message.parts:
        if type(part) is TextPart and len(part.text) > _LONG_TEXT:
            return True
    return False


MAX_JSON_DEPTH = 256
"""The deepest a message's JSON may nest to be stored (objects and lists holding something, the
message itself included): what pydantic-core writes."""


def json_depth(value: Any) -> int:
    """How deep ``value`` nests: models, dicts, lists and tuples holding something each count
    one level (an empty one none, as pydantic-core counts)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, BaseModel):
            children = [*item.__dict__.values(), *(item.__pydantic_extra__ or {}).values()]
        elif isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, (list, tuple)):
            children = list(item)
        else:
            continue
        if children:
            deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _written_by_json_module(message: SessionMessage) -> str:
    dumped = message.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"created_at"})
    data = json.dumps(dumped, ensure_ascii=False, separators=(",", ":"))
    if _SURROGATE.search(data):  # the json module writes a lone surrogate as it is: refuse it
        _refuse_surrogates(message)
    return data


def _refuse_surrogates(message: SessionMessage) -> None:
    """``MessageValidationError`` naming the first string of ``message`` (a key or a value)
    that holds a lone surrogate, if any."""
    found = _surrogate_in(message.model_dump(by_alias=True, exclude_unset=True, exclude={"created_at"}), [])
    if found is not None:
        path, value, position = found
        problem = surrogate_problem(".".join(path) or "message", value, position)
        raise MessageValidationError(f"invalid message {message.id!r}: {problem}")


def _surrogate_in(value: Any, path: list[str]) -> tuple[list[str], str, int] | None:
    if isinstance(value, str):
        position = lone_surrogate(value)
        return None if position is None else (path, value, position)
    if isinstance(value, Mapping):
        for key, item in value.items():
            key_path = [*path, str(key).encode("utf-8", "backslashreplace").decode()]
            found = _surrogate_in(key, [*key_path[:-1], f"{key_path[-1]} (a key)"]) or _surrogate_in(item, key_path)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _surrogate_in(item, [*path, str(index)])
            if found is not None:
                return found
    return None


_validate_json = SessionMessage.__pydantic_validator__.validate_json  # no classmethod frame per row


def message_from_storage(content: str, created_at_us: int) -> SessionMessage | None:
    """Parse a stored row (its JSON and its ``created_at`` column); ``None`` for a row that no
    longer parses (skipped by every read)."""
    try:
        message = _validate_json(content)
    except ValidationError:
        try:  # nested deeper than pydantic's JSON parser goes, yet written: the json module reads it
            message = SessionMessage.model_validate(json.loads(content))
        except (ValueError, RecursionError):
            return None
    # What ``message.created_at = from_us(created_at_us)`` does, without pydantic's
    # ``__setattr__`` and two calls (together half the per-row cost beyond parsing).
    # vars(): pyright takes a model's __dict__ for a read-only mapping (pyright issue 11548).
    vars(message)["created_at"] = EPOCH + timedelta(0, 0, created_at_us)
    message.__pydantic_fields_set__.add("created_at")
    return message
